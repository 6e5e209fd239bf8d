//! Device profiles: calibration targets from the papers, and the device
//! models derived from them.
//!
//! A profile states what a device does, in the units the papers use: QD1
//! read/write latency at 4 KiB (and 16 KiB when known) and peak bandwidth
//! (32 threads) at 4 KiB (and 16 KiB). [`Profile::model`] derives the
//! pipe-and-channels [`DeviceModel`] that reproduces those points exactly
//! (see `docs/profiles.md`):
//!
//! - pipe cost per operation `p(s) = s / bandwidth(s)`, linear in `s`
//!   through the two bandwidth points (one point: pure per-byte cost);
//! - remaining latency `a(s) = latency(s) - p(s)`, linear through the two
//!   latency points (one point: the extra bytes of larger operations stream
//!   at `qd1_gb_per_s`, the single-stream bandwidth, which defaults to the
//!   peak bandwidth).
//!
//! Profiles can also be written in TOML (see [`ProfileSpec`]); the
//! built-in ones are in `builtin_profiles`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::builtin_profiles::builtin_profiles;
use crate::economics::PowerW;
use crate::model::{DeviceModel, DirModel, Tail};

/// Calibration targets of one direction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct DirTargets {
    /// QD1 latency of a 4 KiB operation, µs.
    pub latency_us_4k: f64,
    /// QD1 latency of a 16 KiB operation, µs (optional).
    #[serde(default)]
    pub latency_us_16k: Option<f64>,
    /// Peak (32-thread) bandwidth at 4 KiB, GB/s (10^9 bytes per second).
    pub gb_per_s_4k: f64,
    /// Peak bandwidth at 16 KiB, GB/s (optional).
    #[serde(default)]
    pub gb_per_s_16k: Option<f64>,
    /// Peak bandwidth of large transfers (a datasheet's sequential figure),
    /// GB/s (optional; instead of `gb_per_s_16k`): it sets the pipe's cost
    /// per byte, and the 4 KiB point its cost per operation.
    #[serde(default)]
    pub gb_per_s_large: Option<f64>,
    /// Single-stream bandwidth for the latency of large operations, GB/s
    /// (optional; defaults to the peak bandwidth).
    #[serde(default)]
    pub qd1_gb_per_s: Option<f64>,
    /// 99th-percentile QD1 latency over the median (optional, at least 1;
    /// none: every operation takes the same time). The latency points
    /// above are then medians.
    #[serde(default)]
    pub p99_over_p50: Option<f64>,
    /// 99.9th-percentile QD1 latency over the median (optional; needs
    /// `p99_over_p50`, and at least it).
    #[serde(default)]
    pub p999_over_p50: Option<f64>,
}

/// A device profile as written in TOML or built in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileSpec {
    /// Short name used in configs.
    pub name: String,
    /// What device this is.
    #[serde(default)]
    pub description: String,
    /// Where the numbers come from.
    pub source: String,
    /// Reads.
    pub read: DirTargets,
    /// Writes.
    pub write: DirTargets,
    /// Channels of the latency stage (0 = no queueing there).
    #[serde(default)]
    pub channels: u32,
    /// Read slowdown factor times the recent write fraction.
    #[serde(default)]
    pub write_interference: f64,
    /// Concurrent writes beyond which writes slow each other (0 = never).
    #[serde(default)]
    pub write_contention_threads: u32,
    /// Slowdown per `write_contention_threads` extra concurrent writers.
    #[serde(default)]
    pub write_contention_factor: f64,
    /// Garbage-collection pause every this many MB written (0 = never).
    #[serde(default)]
    pub gc_every_mb: f64,
    /// Length of a garbage-collection pause, µs.
    #[serde(default)]
    pub gc_pause_us: f64,
    /// Serve this many ops/s one at a time, whatever the size (the paper's
    /// analytical model); overrides the targets.
    #[serde(default)]
    pub fixed_rate_ops_per_s: Option<f64>,
    /// Power by state (optional): runs report the energy of the devices
    /// whose profile gives it.
    #[serde(default)]
    pub power: Option<PowerW>,
    /// Writes per GB of capacity the device endures, its full-device
    /// writes (optional): runs report its lifetime at the rate they wrote
    /// it, and count its writes in the cache write amplification.
    #[serde(default)]
    pub endurance_writes_per_gb: Option<f64>,
    /// Years over which the maker warrants `endurance_writes_per_gb`
    /// (optional). With both, the device's rated drive writes per day are
    /// the endurance over the warranty's days, and runs report its
    /// lifetime under their migration writes as MOST §4.2 computes it.
    #[serde(default)]
    pub warranty_years: Option<f64>,
    /// Where each parameter's value comes from, by parameter name
    /// (`read.latency_us_4k`, `channels`, ...): a paper's table or figure,
    /// a datasheet at a stated size, a named measurement, or a stated
    /// assumption. Parameters without one cite `source`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cite: BTreeMap<String, String>,
}

/// Why a profile is unusable.
#[derive(Debug, thiserror::Error)]
#[error("profile '{profile}': field '{field}': {message}")]
pub struct ProfileError {
    /// Profile name.
    pub profile: String,
    /// Offending field.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn positive(profile: &str, field: &str, v: f64) -> Result<(), ProfileError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(ProfileError {
            profile: profile.into(),
            field: field.into(),
            message: format!("must be a positive number, got {v}"),
        })
    }
}

fn non_negative(profile: &str, field: &str, v: f64) -> Result<(), ProfileError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(ProfileError {
            profile: profile.into(),
            field: field.into(),
            message: format!("must be zero or positive, got {v}"),
        })
    }
}

/// Refuses, by field, targets of one direction that no device could meet.
fn check_dir(profile: &str, dir: &str, t: &DirTargets) -> Result<(), ProfileError> {
    let f = |name: &str| format!("{dir}.{name}");
    positive(profile, &f("latency_us_4k"), t.latency_us_4k)?;
    positive(profile, &f("gb_per_s_4k"), t.gb_per_s_4k)?;
    if let Some(v) = t.latency_us_16k {
        positive(profile, &f("latency_us_16k"), v)?;
    }
    if let Some(v) = t.gb_per_s_16k {
        positive(profile, &f("gb_per_s_16k"), v)?;
        if v < t.gb_per_s_4k {
            // The pipe would need a negative cost per request.
            return Err(ProfileError {
                profile: profile.into(),
                field: f("gb_per_s_16k"),
                message: format!(
                    "{v} GB/s at 16 KiB is below {} GB/s at 4 KiB; a device moves \
                     larger requests at least as fast (the two figures may come \
                     from different devices)",
                    t.gb_per_s_4k
                ),
            });
        }
    }
    if let Some(v) = t.gb_per_s_large {
        positive(profile, &f("gb_per_s_large"), v)?;
        if t.gb_per_s_16k.is_some() {
            return Err(ProfileError {
                profile: profile.into(),
                field: f("gb_per_s_large"),
                message: "give gb_per_s_16k or gb_per_s_large, not both".into(),
            });
        }
        if v < t.gb_per_s_4k {
            // The pipe would need a negative cost per request.
            return Err(ProfileError {
                profile: profile.into(),
                field: f("gb_per_s_large"),
                message: format!(
                    "{v} GB/s for large transfers is below {} GB/s at 4 KiB; a device \
                     moves larger requests at least as fast (leave it out to move \
                     every size at the 4 KiB rate)",
                    t.gb_per_s_4k
                ),
            });
        }
    }
    if let Some(v) = t.qd1_gb_per_s {
        positive(profile, &f("qd1_gb_per_s"), v)?;
    }
    Ok(())
}

fn derive_dir(profile: &str, dir: &str, t: &DirTargets) -> Result<DirModel, ProfileError> {
    check_dir(profile, dir, t)?;
    let tail = derive_tail(profile, dir, t)?;
    const S4: f64 = 4096.0;
    const S16: f64 = 16384.0;
    // Pipe: p(s) = fixed + s * per_byte, through the bandwidth points (ns).
    let p4 = S4 / t.gb_per_s_4k;
    let (pipe_fixed, pipe_per_byte) = match (t.gb_per_s_16k, t.gb_per_s_large) {
        (Some(b16), _) => {
            let p16 = S16 / b16;
            let per_byte = ((p16 - p4) / (S16 - S4)).max(0.0);
            (p4 - S4 * per_byte, per_byte)
        }
        (None, Some(large)) => {
            let per_byte = 1.0 / large;
            debug_assert!(per_byte <= p4 / S4, "refused above: a negative fixed cost");
            (p4 - S4 * per_byte, per_byte)
        }
        (None, None) => (0.0, 1.0 / t.gb_per_s_4k),
    };
    let pipe = |s: f64| pipe_fixed + s * pipe_per_byte;
    // Latency: L(s) linear through the latency points (ns).
    let l4 = t.latency_us_4k * 1e3;
    let lat_per_byte = match t.latency_us_16k {
        Some(l16) => ((l16 * 1e3 - l4) / (S16 - S4)).max(0.0),
        None => 1.0 / t.qd1_gb_per_s.unwrap_or(1.0 / pipe_per_byte.max(1e-12)),
    };
    let lat = |s: f64| l4 + (s - S4) * lat_per_byte;
    // Access stage: the latency not spent in the pipe, never negative.
    let a4 = (lat(S4) - pipe(S4)).max(0.0);
    let a16 = (lat(S16) - pipe(S16)).max(0.0);
    let access_per_byte = (a16 - a4) / (S16 - S4);
    Ok(DirModel {
        pipe_fixed_ns: pipe_fixed,
        pipe_ns_per_byte: pipe_per_byte,
        access_fixed_ns: a4 - S4 * access_per_byte,
        access_ns_per_byte: access_per_byte,
        tail,
    })
}

/// The latency tail of one direction from its percentile ratios.
fn derive_tail(profile: &str, dir: &str, t: &DirTargets) -> Result<Tail, ProfileError> {
    let err = |field: &str, message: String| ProfileError {
        profile: profile.into(),
        field: format!("{dir}.{field}"),
        message,
    };
    match (t.p99_over_p50, t.p999_over_p50) {
        (None, None) => Ok(Tail::default()),
        (None, Some(_)) => Err(err("p999_over_p50", "needs p99_over_p50 too".into())),
        (Some(p99), p999) => {
            if !(p99.is_finite() && p99 >= 1.0) {
                return Err(err(
                    "p99_over_p50",
                    format!("must be at least 1, got {p99}"),
                ));
            }
            if let Some(v) = p999 {
                if !(v.is_finite() && v >= p99) {
                    return Err(err(
                        "p999_over_p50",
                        format!("must be at least p99_over_p50 ({p99}), got {v}"),
                    ));
                }
            }
            Ok(Tail::from_percentiles(p99, p999))
        }
    }
}

impl DirTargets {
    /// The targets that are set, as (name, value) pairs.
    fn set(&self) -> Vec<(&'static str, f64)> {
        let mut v = vec![
            ("latency_us_4k", self.latency_us_4k),
            ("gb_per_s_4k", self.gb_per_s_4k),
        ];
        for (name, x) in [
            ("latency_us_16k", self.latency_us_16k),
            ("gb_per_s_16k", self.gb_per_s_16k),
            ("gb_per_s_large", self.gb_per_s_large),
            ("qd1_gb_per_s", self.qd1_gb_per_s),
            ("p99_over_p50", self.p99_over_p50),
            ("p999_over_p50", self.p999_over_p50),
        ] {
            if let Some(x) = x {
                v.push((name, x));
            }
        }
        v
    }
}

impl ProfileSpec {
    /// Every parameter the profile sets, as (name, value): the names that
    /// [`ProfileSpec::cite`] takes.
    pub fn parameters(&self) -> Vec<(String, f64)> {
        if let Some(r) = self.fixed_rate_ops_per_s {
            return vec![("fixed_rate_ops_per_s".into(), r)];
        }
        let mut v = Vec::new();
        for (dir, t) in [("read", &self.read), ("write", &self.write)] {
            v.extend(t.set().into_iter().map(|(n, x)| (format!("{dir}.{n}"), x)));
        }
        for (name, x) in [
            ("channels", self.channels as f64),
            ("write_interference", self.write_interference),
            (
                "write_contention_threads",
                self.write_contention_threads as f64,
            ),
            ("write_contention_factor", self.write_contention_factor),
            ("gc_every_mb", self.gc_every_mb),
            ("gc_pause_us", self.gc_pause_us),
        ] {
            if x != 0.0 {
                v.push((name.to_string(), x));
            }
        }
        if let Some(p) = self.power {
            v.push(("power.read_w".into(), p.read_w));
            v.push(("power.write_w".into(), p.write_w));
            v.push(("power.idle_w".into(), p.idle_w));
        }
        if let Some(e) = self.endurance_writes_per_gb {
            v.push(("endurance_writes_per_gb".into(), e));
        }
        if let Some(y) = self.warranty_years {
            v.push(("warranty_years".into(), y));
        }
        v
    }

    /// Where parameter `name`'s value comes from (its own citation, or
    /// the profile's `source`).
    pub fn citation(&self, name: &str) -> &str {
        self.cite
            .get(name)
            .map_or(self.source.as_str(), |s| s.as_str())
    }

    /// Refuses a citation of a parameter the profile does not set.
    fn check_citations(&self) -> Result<(), ProfileError> {
        let set = self.parameters();
        for key in self.cite.keys() {
            if !set.iter().any(|(n, _)| n == key) {
                return Err(ProfileError {
                    profile: self.name.clone(),
                    field: format!("cite.{key}"),
                    message: format!(
                        "names no parameter this profile sets (it sets: {})",
                        set.iter()
                            .map(|(n, _)| n.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
        }
        Ok(())
    }

    /// Checks the profile and derives its device model.
    pub fn model(&self) -> Result<DeviceModel, ProfileError> {
        let n = self.name.as_str();
        self.check_citations()?;
        if let Some(r) = self.fixed_rate_ops_per_s {
            positive(n, "fixed_rate_ops_per_s", r)?;
            return Ok(DeviceModel::fixed_rate(r));
        }
        non_negative(n, "write_interference", self.write_interference)?;
        non_negative(n, "write_contention_factor", self.write_contention_factor)?;
        non_negative(n, "gc_every_mb", self.gc_every_mb)?;
        non_negative(n, "gc_pause_us", self.gc_pause_us)?;
        if let Some(p) = self.power {
            non_negative(n, "power.read_w", p.read_w)?;
            non_negative(n, "power.write_w", p.write_w)?;
            non_negative(n, "power.idle_w", p.idle_w)?;
        }
        if let Some(e) = self.endurance_writes_per_gb {
            positive(n, "endurance_writes_per_gb", e)?;
        }
        if let Some(y) = self.warranty_years {
            positive(n, "warranty_years", y)?;
            if self.endurance_writes_per_gb.is_none() {
                return Err(ProfileError {
                    profile: n.into(),
                    field: "warranty_years".into(),
                    message: "needs endurance_writes_per_gb, the writes it warrants".into(),
                });
            }
        }
        Ok(DeviceModel {
            read: derive_dir(n, "read", &self.read)?,
            write: derive_dir(n, "write", &self.write)?,
            channels: self.channels,
            write_interference: self.write_interference,
            write_contention_threads: self.write_contention_threads,
            write_contention_factor: self.write_contention_factor,
            gc_every_bytes: (self.gc_every_mb * 1e6) as u64,
            gc_pause_ns: self.gc_pause_us * 1e3,
        })
    }
}

pub(crate) fn dir(
    latency_us_4k: f64,
    latency_us_16k: Option<f64>,
    gb_4k: f64,
    gb_16k: Option<f64>,
) -> DirTargets {
    DirTargets {
        latency_us_4k,
        latency_us_16k,
        gb_per_s_4k: gb_4k,
        gb_per_s_16k: gb_16k,
        gb_per_s_large: None,
        qd1_gb_per_s: None,
        p99_over_p50: None,
        p999_over_p50: None,
    }
}

pub(crate) fn spec(
    name: &str,
    description: &str,
    source: &str,
    read: DirTargets,
    write: DirTargets,
) -> ProfileSpec {
    ProfileSpec {
        name: name.into(),
        description: description.into(),
        source: source.into(),
        read,
        write,
        channels: 0,
        write_interference: 0.0,
        write_contention_threads: 0,
        write_contention_factor: 0.0,
        gc_every_mb: 0.0,
        gc_pause_us: 0.0,
        fixed_rate_ops_per_s: None,
        power: None,
        endurance_writes_per_gb: None,
        warranty_years: None,
        cite: BTreeMap::new(),
    }
}

/// Cites `text` for each parameter in `names`.
pub(crate) fn cite(p: &mut ProfileSpec, names: &[&str], text: &str) {
    for n in names {
        p.cite.insert((*n).to_string(), text.to_string());
    }
}

/// A markdown table of every parameter of `profiles` with its value and
/// its source (what `tiermux profiles` prints and `docs/profiles.md`
/// holds).
pub fn sources_markdown(profiles: &[ProfileSpec]) -> String {
    let mut out = String::from("| profile | parameter | value | source |\n|---|---|---|---|\n");
    for p in profiles {
        for (name, value) in p.parameters() {
            // Four decimals at most, trailing zeros dropped.
            let shown = format!("{value:.4}");
            let shown = shown.trim_end_matches('0').trim_end_matches('.');
            out += &format!(
                "| {} | `{name}` | {shown} | {} |\n",
                p.name,
                p.citation(&name).replace('|', "/")
            );
        }
    }
    out
}

/// Looks up a built-in profile, or a `fixed:R` fixed-rate device of R ops/s.
pub fn find_builtin(name: &str) -> Option<ProfileSpec> {
    if let Some(rate) = name.strip_prefix("fixed:") {
        let r: f64 = rate.parse().ok()?;
        let mut s = spec(
            name,
            "fixed-rate device for the analytical model",
            "Orthus §3.1: a device that performs at a fixed rate R ops/s",
            DirTargets::default(),
            DirTargets::default(),
        );
        s.fixed_rate_ops_per_s = Some(r);
        cite(
            &mut s,
            &["fixed_rate_ops_per_s"],
            "Orthus §3.1: a device that performs at a fixed rate R ops/s",
        );
        return Some(s);
    }
    builtin_profiles().into_iter().find(|p| p.name == name)
}

/// Finds a profile by name among `extra` and the built-ins.
pub fn lookup_profile(name: &str, extra: &[ProfileSpec]) -> Option<ProfileSpec> {
    extra
        .iter()
        .find(|p| p.name == name)
        .cloned()
        .or_else(|| find_builtin(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_derives() {
        for p in builtin_profiles() {
            let m = p.model().unwrap_or_else(|e| panic!("{e}"));
            for d in [m.read, m.write] {
                assert!(d.pipe_ns(4096) > 0.0, "{}", p.name);
                assert!(d.access_ns(4096) >= 0.0, "{}", p.name);
                // No device moves large requests slower than small ones.
                let bytes_per_ns = |s: u64| s as f64 / d.pipe_ns(s);
                assert!(d.pipe_fixed_ns >= 0.0, "{}", p.name);
                assert!(
                    bytes_per_ns(65536) >= bytes_per_ns(4096) - 1e-12,
                    "{}",
                    p.name
                );
            }
        }
    }

    #[test]
    fn two_point_profile_is_exact_on_paper() {
        let m = find_builtin("nvme-pcie4").unwrap().model().unwrap();
        // Peak bandwidth: size / pipe time.
        assert!((4096.0 / m.read.pipe_ns(4096) - 1.5).abs() < 1e-9);
        assert!((16384.0 / m.read.pipe_ns(16384) - 3.3).abs() < 1e-9);
        // QD1 latency: pipe + access.
        assert!((m.read.pipe_ns(4096) + m.read.access_ns(4096) - 66_000.0).abs() < 1e-6);
        assert!((m.read.pipe_ns(16384) + m.read.access_ns(16384) - 86_000.0).abs() < 1e-6);
    }

    #[test]
    fn bad_numbers_name_the_field() {
        let mut p = find_builtin("optane-905p").unwrap();
        p.read.gb_per_s_4k = -1.0;
        let e = p.model().unwrap_err();
        assert_eq!(e.field, "read.gb_per_s_4k");
        let mut p = find_builtin("sata-520").unwrap();
        p.write.p99_over_p50 = Some(0.5);
        assert_eq!(p.model().unwrap_err().field, "write.p99_over_p50");
        p.write.p99_over_p50 = Some(3.0);
        p.write.p999_over_p50 = Some(2.0);
        let e = p.model().unwrap_err();
        assert_eq!(e.field, "write.p999_over_p50");
        assert!(e.message.contains("at least p99_over_p50 (3)"), "{e}");
        p.read.p999_over_p50 = Some(2.0);
        assert_eq!(p.model().unwrap_err().field, "read.p999_over_p50");
    }

    /// A warranty period rates an endurance: alone, or not positive, it is
    /// refused by name.
    #[test]
    fn a_warranty_needs_a_positive_period_and_an_endurance() {
        let mut p = find_builtin("nvme-pcie3").unwrap();
        assert!(p.model().is_ok());
        p.warranty_years = Some(0.0);
        assert_eq!(p.model().unwrap_err().field, "warranty_years");
        p.warranty_years = Some(3.0);
        p.endurance_writes_per_gb = None;
        p.cite.remove("endurance_writes_per_gb");
        let e = p.model().unwrap_err();
        assert_eq!(e.field, "warranty_years");
        assert!(e.message.contains("needs endurance_writes_per_gb"), "{e}");
    }

    /// `docs/profiles.md` lists every built-in parameter's source, as
    /// generated here.
    #[test]
    fn the_docs_list_every_source() {
        let doc = include_str!("../../../docs/profiles.md");
        let (start, end) = ("<!-- sources:start -->\n", "<!-- sources:end -->");
        let a = doc.find(start).expect("the sources section's start marker") + start.len();
        let b = doc.find(end).expect("the sources section's end marker");
        assert_eq!(
            &doc[a..b],
            sources_markdown(&builtin_profiles()),
            "docs/profiles.md is out of date: paste `tiermux profiles --sources` between the markers"
        );
    }

    /// A large-transfer bandwidth sets the pipe's cost per byte; the
    /// 4 KiB point keeps its cost per operation.
    #[test]
    fn a_large_transfer_figure_sets_the_cost_per_byte() {
        let mut p = find_builtin("sata-520").unwrap();
        p.read.gb_per_s_4k = 0.4096; // 100,000 IOPS
        p.read.gb_per_s_large = Some(0.55);
        let m = p.model().unwrap();
        assert!((m.read.pipe_ns(4096) - 10_000.0).abs() < 1e-6);
        let per_byte = m.read.pipe_ns(1 << 20) - m.read.pipe_ns((1 << 20) - 1);
        assert!((per_byte - 1.0 / 0.55).abs() < 1e-6);
        p.read.gb_per_s_16k = Some(0.5);
        assert_eq!(p.model().unwrap_err().field, "read.gb_per_s_large");
    }

    /// A 16 KiB bandwidth under the 4 KiB one, as when the two figures
    /// come from different devices, is refused by name: the pipe would
    /// need a negative cost per request.
    #[test]
    fn bandwidth_falling_with_size_is_refused() {
        let mut p = find_builtin("nvme-pcie3").unwrap();
        p.read.gb_per_s_16k = Some(0.9);
        let e = p.model().unwrap_err();
        assert_eq!(e.field, "read.gb_per_s_16k");
        assert!(
            e.message.contains("0.9 GB/s at 16 KiB is below 1 GB/s"),
            "{e}"
        );
        p.read.gb_per_s_16k = Some(1.0);
        assert!(p.model().is_ok());
        let mut p = find_builtin("sata-520").unwrap();
        p.read.gb_per_s_large = Some(0.45);
        let e = p.model().unwrap_err();
        assert_eq!(e.field, "read.gb_per_s_large");
        assert!(
            e.message
                .contains("0.45 GB/s for large transfers is below 0.5 GB/s"),
            "{e}"
        );
        p.read.gb_per_s_large = Some(0.5);
        assert!(p.model().is_ok());
    }

    /// A TOML profile cites its parameters in a `cite` table.
    #[test]
    fn toml_profiles_cite_their_parameters() {
        let text = r#"
name = "my-ssd"
source = "vendor datasheet, 2024"
read = { latency_us_4k = 70.0, gb_per_s_4k = 1.2 }
write = { latency_us_4k = 20.0, gb_per_s_4k = 1.0 }
cite = { "read.latency_us_4k" = "datasheet, 4 KiB random read at QD1" }
"#;
        let p: ProfileSpec = toml::from_str(text).unwrap();
        p.model().unwrap();
        assert_eq!(
            p.citation("read.latency_us_4k"),
            "datasheet, 4 KiB random read at QD1"
        );
        assert_eq!(p.citation("write.gb_per_s_4k"), "vendor datasheet, 2024");
    }

    /// Every parameter of every built-in profile names its own source.
    #[test]
    fn every_builtin_parameter_cites_its_source() {
        for p in builtin_profiles()
            .into_iter()
            .chain(find_builtin("fixed:100"))
        {
            for (name, _) in p.parameters() {
                assert!(
                    p.cite.contains_key(&name),
                    "{}: {name} cites nothing",
                    p.name
                );
            }
        }
        let mut p = find_builtin("optane-905p").unwrap();
        p.cite
            .insert("read.latency_us_16k".into(), "a datasheet".into());
        let e = p.model().unwrap_err();
        assert_eq!(e.field, "cite.read.latency_us_16k");
        assert!(e.message.contains("names no parameter"), "{e}");
    }

    /// A profile's percentile ratios come out of its model at one
    /// operation in flight, with the latency point as the median.
    #[test]
    fn tails_reproduce_their_percentiles() {
        let mut p = find_builtin("flash-970pro").unwrap();
        p.read.p99_over_p50 = Some(4.0);
        p.read.p999_over_p50 = Some(12.0);
        let mut d = crate::model::SimDevice::seeded(p.model().unwrap(), 3);
        let mut now = 0u64;
        let mut lat: Vec<f64> = (0..50_000u64)
            .map(|i| {
                let done = d.submit(now, tiermux_core::Op::Read, 4096, i, 0);
                d.complete(tiermux_core::Op::Read);
                let l = (done - now) as f64;
                now = done;
                l
            })
            .collect();
        lat.sort_by(f64::total_cmp);
        let pct = |q: f64| lat[(q * lat.len() as f64) as usize];
        let p50 = pct(0.5);
        assert!((p50 / 1e3 - p.read.latency_us_4k).abs() < 0.01 * p.read.latency_us_4k);
        assert!((pct(0.99) / p50 - 4.0).abs() < 0.01, "{}", pct(0.99) / p50);
        assert!(
            (pct(0.999) / p50 - 12.0).abs() < 0.01,
            "{}",
            pct(0.999) / p50
        );
    }
}
