//! The ready volumes in `examples/` serve as their comments say: each
//! opens, takes writes from an NBD client, and reads them back after a
//! clean stop and after `kill -9`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "common/kv_server.rs"]
#[allow(dead_code)]
mod kv_server;
#[path = "common/nbd_served.rs"]
mod nbd_served;
use nbd_served::{have_tools, run};

/// The example volumes: NHC, MOST, Hibachi and TICA.
const EXAMPLES: [&str; 4] = [
    "volume.toml",
    "most-volume.toml",
    "hibachi-volume.toml",
    "tica-volume.toml",
];

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

/// Starts `tiermux serve` on the example with `dir` as its data
/// directory, once it listens.
fn serve(config: &Path, dir: &Path) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tiermux"))
        .arg("serve")
        .arg(config)
        .arg("--data-dir")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("serve.log")).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(
        line.contains("listening on unix:"),
        "{}: {line}{}",
        config.display(),
        std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default()
    );
    child
}

fn stop(mut child: Child) {
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(30), "did not stop");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(child.wait().unwrap().success());
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
        stop(s);
        let mut s = serve(&config, &dir);
        qemu_io(&dir, &READ);
        s.kill().unwrap();
        s.wait().unwrap();
        let s = serve(&config, &dir);
        qemu_io(&dir, &READ);
        stop(s);
    }
}
