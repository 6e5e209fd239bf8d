//! The NBD path alone: pass-through tiermux and `nbdkit file` over the same
//! file, and fio on the file directly.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::config::{BenchConfig, BenchWorkload, Reference};
use super::fio::{fio, random_args};
use super::report::Row;
use super::session::{fresh_dir, volume_config};
use crate::serve::Background;

/// Kills a child process when dropped.
pub(super) struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The NBD path alone: pass-through over one file, `nbdkit file` over the
/// same file, and fio on the file.
pub(super) fn reference(
    cfg: &BenchConfig,
    r: &Reference,
    data: &Path,
    say: &mut dyn FnMut(String),
) -> Result<Vec<Row>> {
    let dir = data.join("reference");
    fresh_dir(&dir)?;
    let size = r.size.bytes("reference.size")?;
    write_zeros(&dir.join("file.img"), size)?;
    let vc = volume_config(
        cfg,
        &dir,
        size,
        &[("file", None, None)],
        "passthrough",
        &BTreeMap::new(),
    )?;
    let server = Background::start(vc)?;
    let (kit, kit_uri) = start_nbdkit(&dir)?;
    say(format!(
        "## The NBD path: pass-through over one {} MiB file against nbdkit\n\n| in flight | server | ops/s | read mean µs | read p99 µs | vs nbdkit |\n|---|---|---|---|---|---|",
        size >> 20
    ));
    let reads = BenchWorkload {
        name: "random read".into(),
        read_percent: 100,
    };
    let mut rows = Vec::new();
    for &level in &r.levels {
        // Both servers see the same offsets.
        let seed = 1000 + level as u64;
        let t = fio(
            &dir,
            &random_args(&server.uri, &reads, 4096, level, size, r.runtime_s, seed),
        )?;
        let k = fio(
            &dir,
            &random_args(&kit_uri, &reads, 4096, level, size, r.runtime_s, seed),
        )?;
        let d = fio(&dir, &direct_args(&dir, size, level, r.runtime_s))?;
        for (name, f, vs) in [
            (
                "tiermux serve",
                t,
                format!("{:.2}x", t.ops_per_s / k.ops_per_s),
            ),
            ("nbdkit file", k, "1.00x".into()),
            ("fio on the file (no NBD)", d, "-".into()),
        ] {
            say(format!(
                "| {level} | {name} | {:.0} | {:.1} | {:.1} | {vs} |",
                f.ops_per_s, f.read_mean_us, f.read_p99_us
            ));
            rows.push(Row {
                section: "reference".into(),
                workload: reads.name.clone(),
                config: name.into(),
                inflight: level,
                ops_per_s: f.ops_per_s,
                read_mean_us: f.read_mean_us,
                read_p99_us: f.read_p99_us,
                ..Row::default()
            });
        }
    }
    drop(kit);
    server.stop()?;
    Ok(rows)
}

/// Writes a file of `size` real zero bytes (pages, not a hole).
fn write_zeros(path: &Path, size: u64) -> Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::create(path)?;
    let chunk = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    Ok(())
}

/// Starts `nbdkit file` on `dir/file.img` behind a Unix socket and waits
/// for the socket; returns the process (killed on drop) and its URI.
fn start_nbdkit(dir: &Path) -> Result<(KillOnDrop, String)> {
    let kit_sock = dir.join("nbdkit.sock");
    let kit = KillOnDrop(
        Command::new("nbdkit")
            .args(["--foreground", "-U"])
            .arg(&kit_sock)
            .arg("file")
            .arg(dir.join("file.img"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start nbdkit")?,
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !kit_sock.exists() {
        if Instant::now() > deadline {
            bail!("nbdkit did not create {} within 10 s", kit_sock.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((kit, format!("nbd+unix:///?socket={}", kit_sock.display())))
}

/// fio arguments for random reads of the file itself at `level` in flight
/// (psync at 1, io_uring above).
fn direct_args(dir: &Path, size: u64, level: u32, runtime_s: f64) -> Vec<String> {
    let mut args = vec![
        "--name=file".to_string(),
        format!("--filename={}", dir.join("file.img").display()),
        "--rw=randread".into(),
        "--bs=4096".into(),
        format!("--size={size}"),
        "--time_based".into(),
        format!("--runtime={}ms", (runtime_s * 1000.0).round() as u64),
    ];
    if level == 1 {
        args.push("--ioengine=psync".into());
    } else {
        args.push("--ioengine=io_uring".into());
        args.push(format!("--iodepth={level}"));
    }
    args
}
