//! fio as a child process: time-based random runs through NBD with their
//! own offsets, and the figures read from its JSON output.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use super::config::BenchWorkload;

/// A fio result.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Fio {
    pub(super) ops_per_s: f64,
    pub(super) read_mean_us: f64,
    pub(super) read_p99_us: f64,
}

/// Runs fio with `args` (plus JSON output) in `dir` and reads its result.
pub(super) fn fio(dir: &Path, args: &[String]) -> Result<Fio> {
    let out = dir.join("fio.json");
    let _ = std::fs::remove_file(&out);
    let res = Command::new("fio")
        .current_dir(dir)
        .args(args)
        .arg("--lat_percentiles=1")
        .arg("--output-format=json")
        .arg(format!("--output={}", out.display()))
        .stdin(Stdio::null())
        .output()
        .context("cannot run fio: install it (apt install fio)")?;
    if !res.status.success() {
        bail!(
            "fio {} failed: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&res.stdout),
            String::from_utf8_lossy(&res.stderr)
        );
    }
    let text = std::fs::read_to_string(&out).context("fio wrote no JSON output")?;
    let v: serde_json::Value = serde_json::from_str(&text).context("fio's JSON output")?;
    let job = &v["jobs"][0];
    let num = |x: &serde_json::Value| x.as_f64().unwrap_or(0.0);
    if num(&job["error"]) != 0.0 {
        bail!("fio {} reported error {}", args.join(" "), job["error"]);
    }
    let read = &job["read"];
    Ok(Fio {
        ops_per_s: num(&read["iops"]) + num(&job["write"]["iops"]),
        read_mean_us: num(&read["lat_ns"]["mean"]) / 1e3,
        read_p99_us: num(&read["lat_ns"]["percentile"]["99.000000"]) / 1e3,
    })
}

/// Seeds of fio's random offsets: every run draws a different sequence, so
/// that a measured run does not replay the blocks its ramp just read, and
/// the bench as a whole repeats. (fio 3.33 ignores `--randseed` for offsets
/// unless `--randrepeat=0` is given too; without it every run read the same
/// blocks, and classic caching showed 100 % hits on a 95 % working set.)
pub(super) struct Seeds(pub(super) u64);

impl Seeds {
    pub(super) fn next(&mut self) -> u64 {
        self.0 += 1;
        tiermux_core::rng::Rng::new(self.0).next_u64() >> 1
    }
}

/// fio arguments of a time-based random run through NBD, with offsets from
/// `seed`.
pub(super) fn random_args(
    uri: &str,
    w: &BenchWorkload,
    bs: u32,
    depth: u32,
    size: u64,
    secs: f64,
    seed: u64,
) -> Vec<String> {
    let mut a = vec![
        "--randrepeat=0".to_string(),
        format!("--randseed={seed}"),
        "--name=bench".to_string(),
        "--ioengine=nbd".to_string(),
        format!("--uri={uri}"),
        format!("--bs={bs}"),
        format!("--iodepth={depth}"),
        format!("--size={size}"),
        "--time_based".to_string(),
        format!("--runtime={}ms", (secs * 1000.0).round() as u64),
        "--norandommap".to_string(),
    ];
    if w.read_percent >= 100 {
        a.push("--rw=randread".into());
    } else {
        a.push("--rw=randrw".into());
        a.push(format!("--rwmixread={}", w.read_percent));
    }
    a
}
