//! Starting `tiermux kv serve` for a test, and the Redis clients the tests
//! drive it with.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A running server, killed when dropped.
pub struct Served {
    pub child: Child,
    pub port: u16,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Serves `config` (a volume config with a `[kv]` table listening on
/// port 0) from `dir`, and waits until it listens.
pub fn serve(dir: &Path, config: &str) -> Served {
    serve_with(dir, config, &[])
}

/// Like [`serve`], with more arguments for `tiermux kv serve`.
pub fn serve_with(dir: &Path, config: &str, extra: &[&str]) -> Served {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tiermux"));
    cmd.args(["kv", "serve", "kv.toml"]).args(extra);
    launch(dir, config, cmd)
}

/// Like [`serve`], in a process that may open at most `fd_limit` files
/// (its soft and hard limits, set by the shell's `ulimit -n`).
pub fn serve_with_fd_limit(dir: &Path, config: &str, fd_limit: u32) -> Served {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(format!(
            "ulimit -n {fd_limit} && exec \"$0\" kv serve kv.toml"
        ))
        .arg(env!("CARGO_BIN_EXE_tiermux"));
    launch(dir, config, cmd)
}

/// Writes `config` to `dir` and runs `cmd` there, waiting until it listens.
fn launch(dir: &Path, config: &str, mut cmd: Command) -> Served {
    std::fs::write(dir.join("kv.toml"), config).expect("config");
    let mut child = cmd
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("serve.log")).expect("serve.log"))
        .spawn()
        .expect("tiermux runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("a line");
    let port = line
        .trim()
        .strip_prefix("tiermux kv: listening on tcp:127.0.0.1:")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| {
            let log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
            panic!("server said: {line}\nits log:\n{log}")
        });
    Served { child, port }
}

/// A fresh directory for one test, removed when the test ends; kept, and
/// its path printed, when the test fails, for the server's log.
pub struct TestDir(Option<tempfile::TempDir>);

impl std::ops::Deref for TestDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.as_ref().expect("the directory until drop").path()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let dir = self.0.take().expect("dropped once");
        if std::thread::panicking() {
            eprintln!("the failed test's directory: {}", dir.keep().display());
        }
    }
}

/// A fresh directory for one test, named for it.
pub fn tempdir(name: &str) -> TestDir {
    let dir = tempfile::Builder::new()
        .prefix(&format!("tiermux-kv-{name}-"))
        .tempdir()
        .expect("temp dir");
    TestDir(Some(dir))
}

/// Whether redis-benchmark and python3-redis are here; panics if not,
/// unless TIERMUX_SKIP_REDIS_CLIENTS is set.
pub fn have_clients() -> bool {
    let bench = Command::new("redis-benchmark")
        .arg("--version")
        .output()
        .is_ok();
    let py = Command::new("/usr/bin/python3")
        .args(["-c", "import redis"])
        .status()
        .is_ok_and(|s| s.success());
    if bench && py {
        return true;
    }
    if std::env::var_os("TIERMUX_SKIP_REDIS_CLIENTS").is_some() {
        eprintln!("skipped: redis-benchmark or python3-redis missing");
        return false;
    }
    panic!("missing redis-benchmark or python3-redis: install redis-tools and python3-redis (bash .ci/run does), or set TIERMUX_SKIP_REDIS_CLIENTS=1");
}

/// Runs redis-benchmark's SET and GET against `port` and returns each
/// one's requests per second.
pub fn redis_benchmark(port: u16, keys: u32, value_bytes: u32) -> [f64; 2] {
    let out = Command::new("redis-benchmark")
        .args([
            "-p",
            &port.to_string(),
            "-t",
            "set,get",
            "-n",
            "20000",
            "-P",
            "16",
        ])
        .args([
            "-c",
            "8",
            "-r",
            &keys.to_string(),
            "-d",
            &value_bytes.to_string(),
        ])
        .args(["-q", "--csv"])
        .output()
        .expect("redis-benchmark runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "redis-benchmark failed: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    ["\"SET\"", "\"GET\""].map(|test| {
        let row = text
            .lines()
            .find(|l| l.starts_with(test))
            .unwrap_or_else(|| panic!("no {test} row in {text}"));
        row.split(',')
            .nth(1)
            .and_then(|f| f.trim_matches('"').parse().ok())
            .expect("a rate")
    })
}

/// Runs a Python script with the port as its argument; asserts it passed.
pub fn python(dir: &Path, script: &str, port: u16) {
    std::fs::write(dir.join("model.py"), script).expect("script");
    let out = Command::new("/usr/bin/python3")
        .arg(dir.join("model.py"))
        .arg(port.to_string())
        .output()
        .expect("python runs");
    eprintln!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(
        out.status.success(),
        "python client: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
