//! Volume configuration files (TOML), as `tiermux serve` reads them.
//!
//! ```toml
//! size = "1GiB"            # client-visible size (bytes or a string with a unit)
//! block_size = 4096        # bytes, a multiple of 4096
//! listen = "unix:tiermux.sock"   # or "tcp:127.0.0.1:10809"; relative to --data-dir
//! export = "tiermux"       # NBD export name
//! metadata = "meta"        # metadata directory, relative to --data-dir
//! volatile_ok = false      # accept devices in memory (tmpfs) holding the only
//!                          # copy of writes over a persistent home device
//! spin_us = 50             # the event loop polls this long before it sleeps
//!                          # while requests keep coming (0: never; io_uring;
//!                          # default 50, or 0 when a device is emulated)
//! structured_replies = true  # NBD: offer structured replies, with which a large
//!                          # read is sent in pieces as they are read (default:
//!                          # offered unless every device is a file in memory
//!                          # without emulated timing, where reads complete at
//!                          # once and the chunks only cost the client time)
//! read_ahead = true        # NBD: read the next range of a connection's
//!                          # sequential reads of 64 KiB or more while the
//!                          # reply to the last one travels (default: as for
//!                          # structured_replies)
//!
//! [[device]]               # fastest first; the last one holds the volume
//! name = "fast"
//! path = "fast.img"        # file or block device, relative to --data-dir
//! size = "256MiB"          # required for every device but the last
//! profile = "emu-optane"   # optional: emulated timing (built-in or [[profile]])
//! array = "raid5-hibachi"  # or: an emulated disk array (six 7,200 rpm disks, RAID-5)
//! role = "cache"           # optional: cache, tier or home (default: every
//!                          # device caches the next one; the last is home)
//! discard = true           # optional: TRIM the space the volume stops using
//!                          # (dropped or moved copies) once a mark makes the
//!                          # release durable (default false)
//! [device.faults]          # optional, for testing: operations reported failed
//! read_error_rate = 0.01   # (also write_error_rate, sync_error_rate: 0 to 1,
//! start_after_ops = 1000   #  and operations that succeed first)
//!
//! [policy]
//! name = "nhc"             # any policy of `tiermux policies`
//! write_mode = "wb"        # ...and its parameters
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tiermux_core::{DeviceRole, Params};
use tiermux_device::lookup_profile;
use tiermux_device::ProfileSpec;

use crate::reactor::ReactorKind;

/// A configuration problem, naming the field.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConfigError {
    /// The offending field.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn cerr(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        message: message.into(),
    }
}

/// A size: a number of bytes or a string such as "256MiB" or "1G".
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum SizeValue {
    /// Bytes.
    Bytes(u64),
    /// A number with a unit (K, M, G, T with optional "iB"/"B"; powers of 1024).
    Text(String),
}

impl SizeValue {
    /// The size in bytes.
    pub fn bytes(&self, field: &str) -> Result<u64, ConfigError> {
        match self {
            SizeValue::Bytes(b) => Ok(*b),
            SizeValue::Text(s) => parse_size(s).ok_or_else(|| {
                cerr(
                    field,
                    format!("'{s}' is not a size (examples: 4096, \"256MiB\", \"1G\")"),
                )
            }),
        }
    }
}

/// Parses "123", "4k", "256MiB", "1.5G" (binary units).
pub fn parse_size(s: &str) -> Option<u64> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return None,
    };
    let v = n * mult as f64;
    (v.is_finite() && v >= 0.0 && v.fract() == 0.0).then_some(v as u64)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeviceFile {
    name: String,
    path: String,
    #[serde(default)]
    size: Option<SizeValue>,
    #[serde(default)]
    profile: Option<String>,
    #[serde(default)]
    array: Option<String>,
    #[serde(default)]
    direct: Option<bool>,
    #[serde(default)]
    role: Option<DeviceRole>,
    #[serde(default)]
    faults: Option<crate::faults::FaultSpec>,
    #[serde(default)]
    discard: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VolumeFile {
    size: SizeValue,
    #[serde(default)]
    block_size: Option<u32>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    listen: Option<String>,
    #[serde(default)]
    export: Option<String>,
    #[serde(default)]
    metadata: Option<String>,
    #[serde(default)]
    reactor: Option<String>,
    #[serde(default)]
    volatile_ok: bool,
    #[serde(default)]
    spin_us: Option<u64>,
    #[serde(default)]
    structured_replies: Option<bool>,
    #[serde(default)]
    read_ahead: Option<bool>,
    #[serde(default)]
    request_memory: Option<SizeValue>,
    #[serde(default)]
    device: Vec<DeviceFile>,
    policy: BTreeMap<String, toml::Value>,
    #[serde(default)]
    profile: Vec<ProfileSpec>,
}

/// Where the server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    /// A Unix socket path.
    Unix(PathBuf),
    /// A TCP address.
    Tcp(String),
}

impl Listen {
    /// Parses "unix:PATH", "tcp:HOST:PORT" or a bare path; relative paths
    /// are taken relative to `base`.
    pub fn parse(s: &str, base: &Path) -> Result<Listen, ConfigError> {
        if let Some(addr) = s.strip_prefix("tcp:") {
            if addr
                .rsplit_once(':')
                .is_none_or(|(_, p)| p.parse::<u16>().is_err())
            {
                return Err(cerr("listen", format!("'{s}': expected tcp:HOST:PORT")));
            }
            return Ok(Listen::Tcp(addr.to_string()));
        }
        let path = s.strip_prefix("unix:").unwrap_or(s);
        if path.is_empty() {
            return Err(cerr("listen", "empty socket path"));
        }
        Ok(Listen::Unix(base.join(path)))
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Unix(p) => write!(f, "unix:{}", p.display()),
            Listen::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

/// One device, resolved.
#[derive(Clone, Debug)]
pub struct DeviceConfig {
    /// Name.
    pub name: String,
    /// Absolute or data-dir-relative path, resolved.
    pub path: PathBuf,
    /// Bytes the volume uses.
    pub size_bytes: u64,
    /// Emulated timing.
    pub profile: Option<ProfileSpec>,
    /// Emulated disk-array timing (`array = "raid5-hibachi"`), instead of
    /// a profile.
    pub array: Option<String>,
    /// Try O_DIRECT.
    pub direct: bool,
    /// What the device is for (default: every device caches the next, the
    /// last is home).
    pub role: DeviceRole,
    /// Errors to inject (`[device.faults]`, for testing).
    pub faults: Option<crate::faults::FaultSpec>,
    /// Discard (TRIM) the space the volume stops using on this device,
    /// once a mark makes its release durable (`volume/discards.rs`).
    pub discard: bool,
}

impl DeviceConfig {
    /// Whether the device has emulated timing (a profile or an array).
    pub fn emulated(&self) -> bool {
        self.profile.is_some() || self.array.is_some()
    }
}

/// A resolved volume configuration.
#[derive(Clone, Debug)]
pub struct VolumeConfig {
    /// Client-visible size, bytes (a multiple of the block size).
    pub size_bytes: u64,
    /// Block size, bytes.
    pub block_size: u32,
    /// Seed of policies that hash or sample.
    pub seed: u64,
    /// Where to listen.
    pub listen: Listen,
    /// NBD export name.
    pub export: String,
    /// Metadata directory.
    pub metadata_dir: PathBuf,
    /// Which reactor to use.
    pub reactor: ReactorKind,
    /// Devices, fastest first.
    pub devices: Vec<DeviceConfig>,
    /// Policy name.
    pub policy: String,
    /// Policy parameters.
    pub params: Params,
    /// Accept devices in memory that may hold the only copy of
    /// acknowledged writes while home is persistent (a power cut then
    /// loses those writes).
    pub volatile_ok: bool,
    /// How long the event loop polls for completions before it sleeps,
    /// while they keep coming, µs ([`crate::reactor::Reactor::set_spin_ns`]).
    pub spin_us: u64,
    /// Whether the NBD server offers structured replies; `None`: decided
    /// by [`VolumeConfig::offers_structured_replies`].
    pub structured_replies: Option<bool>,
    /// Whether the NBD server reads ahead of sequential reads; `None`:
    /// decided by [`VolumeConfig::reads_ahead`].
    pub read_ahead: Option<bool>,
    /// Bytes the NBD server's connections may hold together (request data
    /// in flight and replies not yet sent) before new requests wait;
    /// `None`: the server's default.
    pub request_memory_bytes: Option<u64>,
}

/// Default of [`VolumeConfig::spin_us`]: on the 2-core virtual machines of
/// `docs/performance.md`, 30 µs of polling doubled the 4 KiB requests per
/// second at one in flight; 50 leaves room for a slower client. A volume
/// with an emulated device does not poll unless asked to: the loop then
/// mostly waits for the emulation's timers, which wake it on time, and
/// polling took CPU from the client on the same machine (7.0k against
/// 7.8k requests per second at one in flight, three times the CPU).
pub const DEFAULT_SPIN_US: u64 = 50;

/// Largest [`VolumeConfig::spin_us`] accepted.
pub const MAX_SPIN_US: u64 = 10_000;

impl VolumeConfig {
    /// Parses TOML text; relative paths are resolved against `data_dir`.
    pub fn parse(text: &str, data_dir: &Path) -> Result<VolumeConfig, ConfigError> {
        let f: VolumeFile = serde_path_to_error::deserialize(toml::Deserializer::new(text))
            .map_err(|e: serde_path_to_error::Error<toml::de::Error>| {
                // The path to the value at fault ("." for the file itself).
                let field = match e.path().to_string() {
                    p if p == "." => "config".to_string(),
                    p => p,
                };
                let message = e.inner().message();
                match e.inner().span() {
                    Some(span) => {
                        let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                        cerr(field, format!("line {line}: {message}"))
                    }
                    None => cerr(field, message.to_string()),
                }
            })?;
        let block_size = f.block_size.unwrap_or(4096);
        if block_size == 0 || !block_size.is_multiple_of(4096) || block_size > 1 << 20 {
            return Err(cerr(
                "block_size",
                format!("must be a multiple of 4096 up to 1 MiB, got {block_size}"),
            ));
        }
        let size_bytes = f.size.bytes("size")?;
        if size_bytes == 0 || size_bytes % block_size as u64 != 0 {
            return Err(cerr(
                "size",
                format!(
                    "must be a positive multiple of block_size ({block_size}), got {size_bytes}"
                ),
            ));
        }
        if f.device.is_empty() {
            return Err(cerr("device", "at least one [[device]] is needed"));
        }
        for p in &f.profile {
            p.model()
                .map_err(|e| cerr(format!("profile.{}", p.name), e.to_string()))?;
        }
        let devices = parse_devices(&f, size_bytes, block_size, data_dir)?;
        let (policy, params) = parse_policy(&f.policy)?;
        let reactor = parse_reactor(f.reactor.as_deref())?;
        let emulated = devices.iter().any(DeviceConfig::emulated);
        let spin_us = f
            .spin_us
            .unwrap_or(if emulated { 0 } else { DEFAULT_SPIN_US });
        if spin_us > MAX_SPIN_US {
            return Err(cerr(
                "spin_us",
                format!("{spin_us} µs: at most {MAX_SPIN_US} (0 turns polling off)"),
            ));
        }
        let request_memory_bytes = match &f.request_memory {
            Some(v) => match v.bytes("request_memory")? {
                0 => return Err(cerr("request_memory", "must be more than zero")),
                bytes => Some(bytes),
            },
            None => None,
        };
        Ok(VolumeConfig {
            size_bytes,
            block_size,
            seed: f.seed.unwrap_or(1),
            listen: Listen::parse(f.listen.as_deref().unwrap_or("unix:tiermux.sock"), data_dir)?,
            export: f.export.unwrap_or_else(|| "tiermux".into()),
            metadata_dir: data_dir.join(f.metadata.as_deref().unwrap_or("meta")),
            reactor,
            devices,
            policy,
            params,
            volatile_ok: f.volatile_ok,
            spin_us,
            structured_replies: f.structured_replies,
            read_ahead: f.read_ahead,
            request_memory_bytes,
        })
    }

    /// Whether the NBD server offers structured replies, given whether
    /// every device's file turned out to be in memory: as configured, else
    /// when a read can wait on a device (a file on a disk, or emulated
    /// timing). A volume whose reads all complete at once gains nothing
    /// from sending a read in pieces, and its clients pay for parsing
    /// chunks (`docs/performance.md`).
    pub fn offers_structured_replies(&self, all_files_in_memory: bool) -> bool {
        self.structured_replies
            .unwrap_or_else(|| self.reads_wait(all_files_in_memory))
    }

    /// Whether the NBD server reads ahead of sequential reads: as
    /// configured, else when a read can wait on a device, as for
    /// [`VolumeConfig::offers_structured_replies`]. Where every read
    /// completes at once there is no wait to overlap, and a read ahead
    /// that no client asks for is a wasted copy.
    pub fn reads_ahead(&self, all_files_in_memory: bool) -> bool {
        self.read_ahead
            .unwrap_or_else(|| self.reads_wait(all_files_in_memory))
    }

    /// Whether a read can wait on a device: a file on a disk, or emulated
    /// timing.
    fn reads_wait(&self, all_files_in_memory: bool) -> bool {
        !all_files_in_memory || self.devices.iter().any(DeviceConfig::emulated)
    }

    /// Reads and parses a config file.
    pub fn load(path: &Path, data_dir: &Path) -> Result<VolumeConfig, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| cerr(path.display().to_string(), format!("cannot read: {e}")))?;
        Self::parse(&text, data_dir)
            .map_err(|e| cerr(format!("{}: {}", path.display(), e.field), e.message))
    }
}

/// The `[[device]]` tables, resolved: sizes checked against the volume,
/// profiles looked up, roles defaulted.
fn parse_devices(
    f: &VolumeFile,
    size_bytes: u64,
    block_size: u32,
    data_dir: &Path,
) -> Result<Vec<DeviceConfig>, ConfigError> {
    let n = f.device.len();
    tiermux_core::policy::check_device_count(n).map_err(|e| cerr("device", e))?;
    let mut devices = Vec::new();
    for (i, d) in f.device.iter().enumerate() {
        let field = format!("device[{i}] ({})", d.name);
        let size = match &d.size {
            Some(s) => s.bytes(&format!("{field}.size"))?,
            None if i == n - 1 => size_bytes,
            None => {
                return Err(cerr(
                    format!("{field}.size"),
                    "required for every device but the last",
                ))
            }
        };
        if i == n - 1 && size < size_bytes {
            return Err(cerr(
                format!("{field}.size"),
                format!("the last device holds the volume: needs {size_bytes} bytes, got {size}"),
            ));
        }
        if size == 0 || size % block_size as u64 != 0 {
            return Err(cerr(
                format!("{field}.size"),
                format!("must be a positive multiple of block_size ({block_size}), got {size}"),
            ));
        }
        let profile = match &d.profile {
            Some(name) => Some(lookup_profile(name, &f.profile).ok_or_else(|| {
                cerr(format!("{field}.profile"), format!("unknown profile '{name}' (define it in a [[profile]] table or see `tiermux profiles`)"))
            })?),
            None => None,
        };
        if let Some(a) = &d.array {
            if profile.is_some() {
                return Err(cerr(
                    format!("{field}.array"),
                    "a device has a profile or an array, not both",
                ));
            }
            tiermux_device::array::parse_array(a).map_err(|e| cerr(format!("{field}.array"), e))?;
        }
        if let Some(f) = &d.faults {
            f.check().map_err(|e| cerr(format!("{field}.faults"), e))?;
        }
        if devices.iter().any(|x: &DeviceConfig| x.name == d.name) {
            return Err(cerr(format!("{field}.name"), "device names must be unique"));
        }
        devices.push(DeviceConfig {
            name: d.name.clone(),
            path: data_dir.join(&d.path),
            size_bytes: size,
            profile,
            array: d.array.clone(),
            direct: d.direct.unwrap_or(true),
            role: d.role.unwrap_or(DeviceRole::defaults(n)[i]),
            faults: d.faults,
            discard: d.discard,
        });
    }
    Ok(devices)
}

/// The `[policy]` table: its name and parameters.
fn parse_policy(table: &BTreeMap<String, toml::Value>) -> Result<(String, Params), ConfigError> {
    let mut policy_table = table.clone();
    let policy = match policy_table.remove("name") {
        Some(toml::Value::String(s)) => s,
        Some(_) => return Err(cerr("policy.name", "must be a string")),
        None => return Err(cerr("policy.name", "missing (for example name = \"nhc\")")),
    };
    let params = Params::deserialize(toml::Value::Table(policy_table.into_iter().collect()))
        .map_err(|e| cerr("policy", e.message()))?;
    Ok((policy, params))
}

fn parse_reactor(name: Option<&str>) -> Result<ReactorKind, ConfigError> {
    let reactor = match name.unwrap_or("auto") {
        "auto" => ReactorKind::Auto,
        "io_uring" => ReactorKind::Uring,
        "threads" => ReactorKind::Threads,
        other => {
            return Err(cerr(
                "reactor",
                format!("'{other}': expected auto, io_uring or threads"),
            ))
        }
    };
    Ok(reactor)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
size = "1MiB"
[[device]]
name = "fast"
path = "f.img"
size = "256KiB"
profile = "optane-905p"
[[device]]
name = "slow"
path = "s.img"
[policy]
name = "nhc"
write_mode = "wb"
"#;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("256MiB"), Some(256 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("1.5k"), Some(1536));
        assert_eq!(parse_size("12 parsecs"), None);
    }

    #[test]
    fn parses_and_resolves() {
        let c = VolumeConfig::parse(GOOD, Path::new("/data")).unwrap();
        assert_eq!(c.size_bytes, 1 << 20);
        assert_eq!(c.devices[1].size_bytes, 1 << 20);
        assert_eq!(c.devices[0].path, Path::new("/data/f.img"));
        assert_eq!(c.listen, Listen::Unix("/data/tiermux.sock".into()));
        assert_eq!(c.policy, "nhc");
        assert!(c.devices[0].profile.is_some());
        // An emulated device: no polling unless asked for.
        assert_eq!(c.spin_us, 0);
        let plain = GOOD.replace("profile = \"optane-905p\"\n", "");
        let c = VolumeConfig::parse(&plain, Path::new("/d")).unwrap();
        assert_eq!(c.spin_us, DEFAULT_SPIN_US);
        let asked = GOOD.replace("size = \"1MiB\"", "size = \"1MiB\"\nspin_us = 7");
        assert_eq!(
            VolumeConfig::parse(&asked, Path::new("/d"))
                .unwrap()
                .spin_us,
            7
        );
        let off = GOOD.replace("size = \"1MiB\"", "size = \"1MiB\"\nspin_us = 0");
        assert_eq!(
            VolumeConfig::parse(&off, Path::new("/d")).unwrap().spin_us,
            0
        );
        // The server's request memory: its default unless given.
        let c = VolumeConfig::parse(GOOD, Path::new("/d")).unwrap();
        assert_eq!(c.request_memory_bytes, None);
        let given = GOOD.replace(
            "size = \"1MiB\"",
            "size = \"1MiB\"\nrequest_memory = \"256MiB\"",
        );
        let c = VolumeConfig::parse(&given, Path::new("/d")).unwrap();
        assert_eq!(c.request_memory_bytes, Some(256 << 20));
        // Structured replies: offered when a read can wait on a device.
        let c = VolumeConfig::parse(GOOD, Path::new("/d")).unwrap();
        assert!(c.offers_structured_replies(true), "emulated");
        let c = VolumeConfig::parse(&plain, Path::new("/d")).unwrap();
        assert!(c.offers_structured_replies(false), "a file on a disk");
        assert!(!c.offers_structured_replies(true), "files in memory");
        let on = plain.replace(
            "size = \"1MiB\"",
            "size = \"1MiB\"\nstructured_replies = true",
        );
        let c = VolumeConfig::parse(&on, Path::new("/d")).unwrap();
        assert!(c.offers_structured_replies(true));
        let off = GOOD.replace(
            "size = \"1MiB\"",
            "size = \"1MiB\"\nstructured_replies = false",
        );
        let c = VolumeConfig::parse(&off, Path::new("/d")).unwrap();
        assert!(!c.offers_structured_replies(false));
    }

    #[test]
    fn errors_name_the_field() {
        let extra: String = (0..8)
            .map(|i| format!("[[device]]\nname = \"d{i}\"\npath = \"d{i}\"\nsize = \"1MiB\"\n"))
            .collect();
        let nine_devices = extra + "[[device]]\nname = \"slow\"";
        let cases = [
            (
                GOOD.replace("size = \"256KiB\"\n", ""),
                "device[0] (fast).size",
            ),
            (
                GOOD.replace("optane-905p", "warp-drive"),
                "unknown profile 'warp-drive'",
            ),
            (
                GOOD.replace("profile = \"optane-905p\"", "array = \"raid5-2x64k\""),
                "device[0] (fast).array: array 'raid5-2x64k': a RAID-5 here has 3 to 32 disks",
            ),
            (
                GOOD.replace("profile = \"optane-905p\"", "array = \"raid9\""),
                "unknown array 'raid9' (known: raid5-hibachi, disk-st6000, or raid5-<disks>x<chunk>",
            ),
            (
                GOOD.replace(
                    "profile = \"optane-905p\"",
                    "[device.faults]\nread_error_rate = 1.5",
                ),
                "device[0] (fast).faults: read_error_rate must be between 0 and 1, got 1.5",
            ),
            (
                GOOD.replace(
                    "profile = \"optane-905p\"",
                    "[device.faults]\nread_rate = 0.5",
                ),
                "unknown field `read_rate`",
            ),
            (
                GOOD.replace("size = \"1MiB\"", "size = \"1MiB\"\nblock_size = 1000"),
                "block_size",
            ),
            (
                GOOD.replace("size = \"1MiB\"", "size = \"lots\""),
                "'lots' is not a size",
            ),
            (GOOD.replace("name = \"nhc\"\n", ""), "policy.name"),
            (
                GOOD.replace(
                    "size = \"1MiB\"",
                    "size = \"1MiB\"\nlisten = \"tcp:localhost\"",
                ),
                "expected tcp:HOST:PORT",
            ),
            (
                GOOD.replace("[policy]", "colour = 3\n[policy]"),
                "unknown field `colour`",
            ),
            (
                GOOD.replace("size = \"1MiB\"", "size = \"1MiB\"\nspin_us = 20000"),
                "spin_us: 20000 µs: at most 10000",
            ),
            (
                GOOD.replace("size = \"1MiB\"", "size = \"1MiB\"\nrequest_memory = \"0B\""),
                "request_memory: must be more than zero",
            ),
            (
                GOOD.replace("size = \"1MiB\"", "size = \"1MiB\"\nrequest_memory = \"lots\""),
                "request_memory: 'lots' is not a size",
            ),
            (
                GOOD.replace("[[device]]\nname = \"slow\"", &nine_devices),
                "a volume has 1 to 8 devices (the placement map's limit), this one has 10",
            ),
            // A value of the wrong type is named by its path and line.
            (
                GOOD.replace("size = \"1MiB\"", "size = \"1MiB\"\nblock_size = \"big\""),
                "block_size: line 3: invalid type: string \"big\"",
            ),
            (
                GOOD.replace(
                    "profile = \"optane-905p\"",
                    "[device.faults]\nread_error_rate = \"often\"",
                ),
                "device[0].faults.read_error_rate: line",
            ),
        ];
        for (text, want) in cases {
            let e = VolumeConfig::parse(&text, Path::new("/d"))
                .expect_err(want)
                .to_string();
            assert!(e.contains(want), "{e} should mention {want}");
        }
    }
}
