//! The ready volumes in `examples/` serve as their comments say: each
//! opens, takes writes from an NBD client, and reads them back after a
//! clean stop and after `kill -9`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::kv_server;
use crate::common::nbd_served;
use nbd_served::{have_tools, run, Served};

/// The example volumes: NHC, MOST, Hibachi, TICA, and the emulated
/// RAID-5 that flush logs are replayed on.
const EXAMPLES: [&str; 5] = [
    "volume.toml",
    "most-volume.toml",
    "hibachi-volume.toml",
    "tica-volume.toml",
    "raid5-array.toml",
];

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

/// Starts `tiermux serve` on the example with `dir` as its data
/// directory, once it listens.
fn serve(config: &Path, dir: &Path) -> Served {
    let (served, line) = Served::spawn_config(config, dir, &[]);
    assert!(
        line.contains("listening on unix:"),
        "{}: {line}{}",
        config.display(),
        std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default()
    );
    served
}

/// Runs qemu-io's commands on the volume served in `dir`.
fn qemu_io(dir: &Path, commands: &[&str]) -> String {
    let uri = format!(
        "nbd+unix:///tiermux?socket={}",
        dir.join("tiermux.sock").display()
    );
    let mut cmd = Command::new("qemu-io");
    cmd.args(["-f", "raw", &uri]);
    for c in commands {
        cmd.args(["-c", c]);
    }
    let out = run(&mut cmd);
    assert!(!out.contains("Pattern verification failed"), "{out}");
    out
}

const WRITE: [&str; 3] = [
    "write -P 0x5a 0 1M",
    "write -P 0xa5 512M 256K",
    "write -P 0x3c 1020M 4M",
];
const READ: [&str; 3] = [
    "read -P 0x5a 0 1M",
    "read -P 0xa5 512M 256K",
    "read -P 0x3c 1020M 4M",
];

#[test]
fn example_volumes_serve_and_keep_their_data() {
    if !have_tools(&["qemu-io"]) {
        return;
    }
    for name in EXAMPLES {
        let dir = kv_server::tempdir(name.trim_end_matches(".toml"));
        let config = example(name);
        let s = serve(&config, &dir);
        qemu_io(&dir, &WRITE);
        qemu_io(&dir, &READ);
        s.stop();
        let s = serve(&config, &dir);
        qemu_io(&dir, &READ);
        s.kill9();
        let s = serve(&config, &dir);
        qemu_io(&dir, &READ);
        s.stop();
    }
}

/// The MOST example, fresh: qemu-io reads the volume's first blocks when
/// it opens it, then writes there. A segment is placed at its first write,
/// so the write lands on the performance device; the read before it finds
/// nothing written to place.
#[test]
fn a_fresh_most_volume_takes_its_first_writes_on_the_performance_device() {
    if !have_tools(&["qemu-io"]) {
        return;
    }
    let dir = kv_server::tempdir("most-first-write");
    let config = example("most-volume.toml");
    let (s, line) = Served::spawn_config(&config, &dir, &["--metrics", "127.0.0.1:0"]);
    let addr = nbd_served::metrics_addr(&line);
    qemu_io(&dir, &["read 0 4K", "write -P 0x5a 0 1M"]);
    let written = |m: &str, device: &str| {
        nbd_served::must(
            m,
            &format!("tiermux_device_bytes_total{{device=\"{device}\",dir=\"write\"}}"),
        )
    };
    // The server publishes its counters on an interval: wait until they
    // show the whole write.
    let mib = (1 << 20) as f64;
    let t0 = std::time::Instant::now();
    let m = loop {
        let (_, m) = nbd_served::get(&addr, "/metrics");
        if written(&m, "optane") + written(&m, "nvme") >= mib {
            break m;
        }
        assert!(t0.elapsed().as_secs() < 20, "the write never showed:\n{m}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(written(&m, "optane") >= mib, "{m}");
    assert_eq!(written(&m, "nvme"), 0.0, "{m}");
    qemu_io(&dir, &["read -P 0x5a 0 1M"]);
    s.stop();
}
