//! `tiermux profiles`: the built-in device profiles, their calibration
//! points, and throughput curves over concurrency.

use anyhow::{bail, Result};
use tiermux_core::Op;
use tiermux_device::calibrate::{closed_loop_throughput, peak_threads, qd1_latency_ns};
use tiermux_device::profile::{builtin_profiles, find_builtin};

/// The table of every built-in profile: targets and what the model measures.
pub fn table() {
    outln!(
        "Device profiles. Targets are the papers' numbers; 'model' is what the simulator measures."
    );
    outln!("Peak bandwidth is measured where its source measured it: 32 threads for MOST Table 1");
    outln!("points, the contention point for writers that contend, 256 otherwise.\n");
    outln!(
        "{:<14} {:>5} {:>6} {:>9} {:>9} {:>9} {:>9}   source",
        "profile",
        "dir",
        "size",
        "lat µs",
        "model",
        "GB/s",
        "model"
    );
    for p in builtin_profiles() {
        let m = p.model().expect("builtin profiles derive");
        for (dir, t) in [(Op::Read, &p.read), (Op::Write, &p.write)] {
            let mut sizes = vec![(4096u64, Some(t.latency_us_4k), t.gb_per_s_4k)];
            sizes.push((16384, t.latency_us_16k, t.gb_per_s_16k.unwrap_or(f64::NAN)));
            for (size, lat, gb) in sizes {
                let threads = peak_threads(&p, dir, size);
                let bw = closed_loop_throughput(&m, dir, size, threads) * size as f64 / 1e9;
                let l = qd1_latency_ns(&m, dir, size) / 1e3;
                let fmt = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
                outln!(
                    "{:<14} {:>5} {:>5}K {:>9} {:>9.2} {:>9} {:>9.2}   {}",
                    if dir == Op::Read && size == 4096 {
                        p.name.as_str()
                    } else {
                        ""
                    },
                    if size == 4096 {
                        format!("{dir:?}").to_lowercase()
                    } else {
                        String::new()
                    },
                    size / 1024,
                    fmt(lat),
                    l,
                    if gb.is_nan() {
                        "-".to_string()
                    } else {
                        format!("{gb:.2}")
                    },
                    bw,
                    if dir == Op::Read && size == 4096 {
                        p.source.as_str()
                    } else {
                        ""
                    }
                );
            }
        }
    }
    outln!("\nAlso: fixed:R, a device serving R ops/s one at a time (the Orthus paper's model).");
    outln!(
        "Disk arrays (array:NAME in the simulator, array = \"NAME\" in a volume): {}, or {}; docs/traces.md.",
        tiermux_device::array::ARRAYS.join(", "),
        tiermux_device::array::RAID5_SHAPE
    );
    outln!("Where each parameter comes from: tiermux profiles --sources.");
}

/// Concurrency levels of a curve (requests in flight).
const CURVE_CONCURRENCY: [u32; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/// Request sizes of a curve, bytes.
const CURVE_SIZES: [u64; 3] = [4096, 32768, 65536];

/// Prints closed-loop throughput (GB/s) over concurrency for each named
/// profile, reads and writes, at each curve size.
pub fn curves(names: &[String]) -> Result<()> {
    let mut models = Vec::new();
    for n in names {
        let Some(p) = find_builtin(n) else {
            bail!("--curve: no built-in profile named '{n}' (see `tiermux profiles`)");
        };
        models.push((n.clone(), p.model()?));
    }
    outln!("Closed-loop throughput, GB/s, random addresses, by requests in flight.\n");
    let mut head = format!("{:<14} {:>5} {:>5}", "profile", "dir", "size");
    for c in CURVE_CONCURRENCY {
        head += &format!(" {c:>6}");
    }
    outln!("{head}");
    for (name, m) in &models {
        for dir in [Op::Read, Op::Write] {
            for size in CURVE_SIZES {
                let mut line = format!(
                    "{:<14} {:>5} {:>4}K",
                    name,
                    format!("{dir:?}").to_lowercase(),
                    size / 1024
                );
                for c in CURVE_CONCURRENCY {
                    let gb = closed_loop_throughput(m, dir, size, c) * size as f64 / 1e9;
                    line += &format!(" {gb:>6.2}");
                }
                outln!("{line}");
            }
        }
    }
    Ok(())
}
