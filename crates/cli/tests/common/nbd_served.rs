//! Starting `tiermux serve` on a test volume, the tools the NBD tests
//! drive it with, and reading its Prometheus metrics.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An NHC volume in write-back over a small fast device and a slow home
/// device, both emulated, served on `nbd.sock`. The fast device discards
/// the space the volume stops using, so every test on this volume checks
/// data with discards running.
pub const CONFIG: &str = r#"
size = "64MiB"
listen = "unix:nbd.sock"

[[device]]
name = "fast"
path = "fast.img"
size = "1MiB"
profile = "fast-test"
discard = true

[[device]]
name = "slow"
path = "slow.img"
profile = "slow-test"

[policy]
name = "nhc"
write_mode = "wb"
window_ms = 5.0
min_window_ops = 16
dirty_high_ratio = 0.5
dirty_low_ratio = 0.3

[[profile]]
name = "fast-test"
source = "test device: small waits so that emulation timers run"
[profile.read]
latency_us_4k = 20.0
gb_per_s_4k = 1.0
[profile.write]
latency_us_4k = 20.0
gb_per_s_4k = 1.0

[[profile]]
name = "slow-test"
source = "test device"
channels = 8
[profile.read]
latency_us_4k = 60.0
gb_per_s_4k = 1.0
[profile.write]
latency_us_4k = 40.0
gb_per_s_4k = 1.0
"#;

/// `CONFIG` with its devices and policy replaced by `devices_and_policy`.
pub fn with_devices(devices_and_policy: &str) -> String {
    let devices_start = CONFIG.find("[[device]]").unwrap();
    let profiles_start = CONFIG.find("[[profile]]").unwrap();
    format!(
        "{}{devices_and_policy}{}",
        &CONFIG[..devices_start],
        &CONFIG[profiles_start..]
    )
}

/// `[[device]]` tables of `(name, size)` on the fast test profile, each
/// discarding freed space, then the slow home device.
pub fn cache_devices(caches: &[(&str, &str)]) -> String {
    let mut s = String::new();
    for (name, size) in caches {
        s += &format!(
            "[[device]]\nname = \"{name}\"\npath = \"{name}.img\"\nsize = \"{size}\"\nprofile = \"fast-test\"\ndiscard = true\n\n"
        );
    }
    s + "[[device]]\nname = \"slow\"\npath = \"slow.img\"\nprofile = \"slow-test\"\n\n"
}

/// A Hibachi volume over three devices: DRAM (clean pages), NVRAM (dirty
/// pages, and clean ones it lends) and home, with the NVRAM kept small so
/// that flushes, runs and migrations happen within the tests.
pub fn hibachi_config() -> String {
    with_devices(&format!(
        "{}[policy]\nname = \"hibachi\"\nrun_threshold = 4\nreserve_blocks = 8\n\n",
        cache_devices(&[("dram", "512KiB"), ("nvram", "512KiB")])
    ))
}

/// A TICA volume over four devices: DRAM, a read- and a write-optimized
/// SSD, and home, small enough that moves, demotions and flushes happen
/// within the tests (TICA-A, switching between EF and WED).
pub fn tica_config() -> String {
    with_devices(&format!(
        "{}[policy]\nname = \"tica-a\"\nreserve_blocks = 8\nsmbi_steps = 1\n\n",
        cache_devices(&[("dram", "256KiB"), ("ro", "512KiB"), ("wo", "512KiB")])
    ))
}

/// The volumes the client tests run on: NHC over two devices, Hibachi
/// over three, TICA over four.
pub fn configs() -> [(&'static str, String); 3] {
    [
        ("nhc", CONFIG.to_string()),
        ("hibachi", hibachi_config()),
        ("tica", tica_config()),
    ]
}

pub fn data_dir(tag: &str) -> PathBuf {
    data_dir_with(tag, CONFIG)
}

pub fn data_dir_with(tag: &str, config: &str) -> PathBuf {
    let base = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let d = base.join(format!(
        "tiermux-nbd-{tag}-{}-{}",
        std::process::id(),
        super::next_dir_number()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("volume.toml"), config).unwrap();
    d
}

pub struct Served {
    pub child: Child,
    pub dir: PathBuf,
}

impl Served {
    /// Starts `tiermux serve` on `dir`'s volume.toml; returns it with the
    /// line where it says where it listens.
    pub fn spawn(dir: &Path) -> (Served, String) {
        Served::spawn_with(dir, &[])
    }
    /// Like [`Served::spawn`], with more arguments for `tiermux serve`.
    pub fn spawn_with(dir: &Path, extra: &[&str]) -> (Served, String) {
        Served::spawn_config(Path::new("volume.toml"), dir, extra)
    }
    /// Starts `tiermux serve CONFIG` (relative to `dir`, or absolute)
    /// with `dir` as its data directory and more arguments; returns it
    /// with the line where it says where it listens.
    pub fn spawn_config(config: &Path, dir: &Path, extra: &[&str]) -> (Served, String) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tiermux"))
            .arg("serve")
            .arg(config)
            .args(["--data-dir", "."])
            .args(extra)
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("serve.log")).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let served = Served {
            child,
            dir: dir.to_path_buf(),
        };
        (served, line)
    }
    pub fn start(dir: &Path) -> Served {
        let (served, line) = Served::spawn(dir);
        assert!(line.contains("listening on unix:"), "server said: {line}");
        served
    }
    pub fn sock(&self) -> PathBuf {
        self.dir.join("nbd.sock")
    }
    pub fn uri(&self) -> String {
        format!("nbd+unix:///tiermux?socket={}", self.sock().display())
    }
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
    pub fn stop(mut self) {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                assert!(st.success(), "server exited with {st}");
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "server did not stop"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn have_tools(tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| {
            Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .output()
                .map(|o| !o.status.success())
                .unwrap_or(true)
        })
        .collect();
    if missing.is_empty() {
        return true;
    }
    if std::env::var_os("TIERMUX_SKIP_NBD_CLIENTS").is_some() {
        eprintln!("skipped: missing {missing:?}");
        return false;
    }
    panic!("missing {missing:?}: install libnbd-bin, python3-libnbd, qemu-utils and fio (bash .ci/run does), or set TIERMUX_SKIP_NBD_CLIENTS=1");
}

pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed: {text}");
    text
}

/// Status line and body of `GET path` on `addr`.
pub fn get(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// The metrics address `tiermux serve` printed.
pub fn metrics_addr(line: &str) -> String {
    let url = line
        .split("metrics on http://")
        .nth(1)
        .unwrap_or_else(|| panic!("no metrics address in: {line}"));
    url.trim().trim_end_matches("/metrics").to_string()
}

/// The value of the sample that starts with `name` (with its labels) in
/// a metrics text.
pub fn value(metrics: &str, name: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
}

/// [`value`], which must be there.
pub fn must(metrics: &str, name: &str) -> f64 {
    value(metrics, name).unwrap_or_else(|| panic!("no {name} in\n{metrics}"))
}

/// Starts fio on `s`'s volume: verified random reads and writes of 4 KiB
/// (half each, 8 in flight) over its first `size` at `rate_iops`, slow
/// enough for a test to act while it runs. Its output is piped.
pub fn spawn_fio_verify(s: &Served, size: &str, rate_iops: u32) -> Child {
    Command::new("fio")
        .current_dir(&s.dir)
        .args([
            "--name=verify",
            "--ioengine=nbd",
            &format!("--uri={}", s.uri()),
            "--rw=randrw",
            "--rwmixread=50",
            "--bs=4k",
            "--iodepth=8",
            &format!("--size={size}"),
            &format!("--rate_iops={rate_iops}"),
            "--verify=crc32c",
            "--do_verify=1",
            "--verify_fatal=1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The peak resident memory (VmHWM) of process `pid`, KiB.
pub fn peak_memory_kib(pid: u32) -> u64 {
    memory_status_kib(pid, "VmHWM:")
}

/// The resident memory (VmRSS) of process `pid` now, KiB.
pub fn resident_memory_kib(pid: u32) -> u64 {
    memory_status_kib(pid, "VmRSS:")
}

/// The value of the `/proc/PID/status` line starting with `key`, KiB.
fn memory_status_kib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} line in /proc/{pid}/status"))
}
