//! `tiermux kv serve` in store mode: redis-benchmark with pipelining, the
//! Python `redis` library checked against a model (SCAN included), and
//! 200 `kill -9` points and 100 simulated power cuts after which every
//! acknowledged SET and DEL must still hold.
//!
//! The clients come from the Debian packages redis-tools and python3-redis,
//! which `.ci/run` installs. Without them the client tests fail (set
//! TIERMUX_SKIP_REDIS_CLIENTS=1 to skip them); the kill test needs none.

use std::collections::HashMap;
use std::io::Write;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::kv_server;
use kv_server::{have_clients, python, redis_benchmark, tempdir, Served};
use tiermux_server::resp_client::{self, Reply, ReplyReader};

/// Serves a store on `policy` (a `[policy]` table's lines) from `dir`.
fn serve(dir: &std::path::Path, policy: &str) -> Served {
    kv_server::serve(dir, &CONFIG.replace("POLICY", policy))
}

const CONFIG: &str = r#"
size = "64MiB"

[[device]]
name = "fast"
path = "fast.img"
size = "16MiB"

[[device]]
name = "slow"
path = "slow.img"

[policy]
POLICY

[kv]
mode = "store"
listen = "tcp:127.0.0.1:0"
index = "1MiB"
checkpoint_every = "2MiB"
max_write = "256KiB"
"#;

/// Orthus-KV's block cache: classic caching in write-around.
const CLASSIC_WA: &str = "name = \"classic\"\nwrite_mode = \"wa\"";
const NHC: &str = "name = \"nhc\"";

#[test]
fn redis_benchmark_runs_against_the_store() {
    if !have_clients() {
        return;
    }
    let dir = tempdir("store-bench");
    let s = serve(&dir, CLASSIC_WA);
    for rps in redis_benchmark(s.port, 5000, 1000) {
        assert!(rps > 1000.0, "{rps} requests per second");
    }
}

const MODEL_SCRIPT: &str = r#"
import random, sys, redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]))
rng = random.Random(11)
model = {}
for i in range(5000):
    key = "k%03d" % rng.randrange(300)
    op = rng.random()
    if op < 0.45:
        size = rng.choice([rng.randrange(0, 300), rng.randrange(3000, 40000)])
        value = (("%d:" % i) * (size // 2 + 1)).encode()[:size]
        assert r.set(key, value) is True
        model[key] = value
    elif op < 0.85:
        assert r.get(key) == model.get(key), "GET %s" % key
    elif op < 0.92:
        assert r.delete(key) == (1 if key in model else 0)
        model.pop(key, None)
    elif op < 0.97:
        keys = ["k%03d" % rng.randrange(300) for _ in range(5)]
        assert r.mget(keys) == [model.get(k) for k in keys]
    else:
        assert r.exists(key) == (1 if key in model else 0)
    if i % 1000 == 999:
        got = [k.decode() for k in r.scan_iter(count=rng.randrange(1, 60))]
        assert got == sorted(model), "SCAN answered %d keys of %d" % (len(got), len(model))
        some = [k.decode() for k in r.scan_iter(match="k1*", count=50)]
        assert some == sorted(k for k in model if k.startswith("k1"))
try:
    r.set("x", "y", ex=5)
    raise SystemExit("a store took an expiry")
except redis.exceptions.ResponseError as e:
    assert "expiry" in str(e), e
info = r.info()
assert info["tiermux_mode"] == "store" and info["keys"] == len(model), info
print("keys", len(model), "log writes", info["log_writes"])
"#;

#[test]
fn a_python_client_reads_what_it_wrote_and_scans_in_order() {
    if !have_clients() {
        return;
    }
    let dir = tempdir("store-python");
    let s = serve(&dir, NHC);
    python(&dir, MODEL_SCRIPT, s.port);
}

/// A command as clients send it.
fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    resp_client::command(&mut out, args);
    out
}

/// Value number `id` of `key`: its own name and number, then filler of a
/// length that follows from them.
fn value(key: usize, id: u64) -> Vec<u8> {
    let len = 20 + ((id * 2654435761 + key as u64 * 40503) % 6000) as usize;
    let mut v = format!("{key}:{id}:").into_bytes();
    v.resize(len, b'a' + (id % 26) as u8);
    v
}

/// What each key was sent: (id, acknowledged); id 0 is a delete.
type Log = Arc<Mutex<HashMap<usize, Vec<(u64, bool)>>>>;

const KEYS: usize = 300;

/// Writers at once; writer `i` owns the keys `i` modulo this, so each
/// key's commands reach the server in the order the log notes them.
const WRITERS: u64 = 3;

/// Sends pipelined SETs and DELs until the server dies, noting each
/// command before it is sent and its acknowledgement when it comes.
fn writer(port: u16, which: u64, seed: u64, log: Log, next_id: Arc<Mutex<u64>>) {
    let Ok(s) = TcpStream::connect(("127.0.0.1", port)) else {
        return;
    };
    let mut w = s.try_clone().expect("clone");
    let mut r = ReplyReader::new(s);
    let mut rng = seed;
    loop {
        let mut batch = Vec::new();
        let mut bytes = Vec::new();
        for _ in 0..16 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = ((rng >> 33) as usize % (KEYS / WRITERS as usize)) * WRITERS as usize
                + which as usize;
            let id = {
                let mut n = next_id.lock().expect("ids");
                *n += 1;
                *n
            };
            let k = format!("key{key}");
            let del = (rng >> 20).is_multiple_of(10);
            let id = if del { 0 } else { id };
            let cmd = if del {
                command(&[b"DEL", k.as_bytes()])
            } else {
                command(&[b"SET", k.as_bytes(), &value(key, id)])
            };
            bytes.extend_from_slice(&cmd);
            let mut l = log.lock().expect("log");
            let entries = l.entry(key).or_default();
            entries.push((id, false));
            batch.push((key, entries.len() - 1));
        }
        if w.write_all(&bytes).is_err() {
            return;
        }
        for (key, at) in batch {
            match r.next_reply() {
                Ok(Reply::Simple(_) | Reply::Int(_)) => {
                    log.lock().expect("log").get_mut(&key).expect("a key")[at].1 = true
                }
                Ok(other) => panic!("a write answered {other:?}"),
                Err(_) => return,
            }
        }
    }
}

/// Checks every key holds its last acknowledged value or one sent after
/// it; returns what they hold, as the log for the next round.
fn check(port: u16, log: &Log) -> HashMap<usize, Vec<(u64, bool)>> {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut w = s.try_clone().expect("clone");
    let mut r = ReplyReader::new(s);
    let names: Vec<String> = (0..KEYS).map(|k| format!("key{k}")).collect();
    let mut args: Vec<&[u8]> = vec![b"MGET"];
    args.extend(names.iter().map(|n| n.as_bytes()));
    w.write_all(&command(&args)).expect("send");
    let Reply::Array(values) = r.next_reply().expect("MGET") else {
        panic!("MGET answered no array");
    };
    let log = log.lock().expect("log");
    let mut held = HashMap::new();
    for (key, v) in values.into_iter().enumerate() {
        let Reply::Bulk(v) = v else { panic!("{v:?}") };
        let id = v.as_ref().map_or(0, |v| {
            let text = String::from_utf8_lossy(v);
            let id: u64 = text
                .split(':')
                .nth(1)
                .and_then(|i| i.parse().ok())
                .expect("an id");
            assert_eq!(v, &value(key, id), "key{key} holds a damaged value");
            id
        });
        let sent = log.get(&key).cloned().unwrap_or_else(|| vec![(0, true)]);
        let last_acked = sent.iter().rposition(|e| e.1).unwrap_or(0);
        let allowed: Vec<u64> = sent[last_acked..].iter().map(|e| e.0).collect();
        let allowed = if sent.iter().any(|e| e.1) {
            allowed
        } else {
            [vec![0], allowed].concat()
        };
        assert!(
            allowed.contains(&id),
            "key{key} holds {id}; allowed {allowed:?}"
        );
        held.insert(key, vec![(id, true)]);
    }
    held
}

#[test]
fn acknowledged_writes_survive_200_kill_9() {
    survive(200, "store-kill", &|s| {
        s.child.kill().expect("kill -9");
        s.child.wait().expect("reaped");
    });
}

/// A simulated power cut (`--simulate-power-loss`: writes not yet synced
/// are lost, kept or torn) instead of `kill -9`: the store's writes must be
/// durable before it acknowledges, and its recovery must find them.
#[test]
fn acknowledged_writes_survive_100_power_cuts() {
    survive(100, "store-power", &|s| {
        let pid = s.child.id().to_string();
        let sent = std::process::Command::new("kill")
            .args(["-USR1", &pid])
            .status()
            .expect("kill runs");
        assert!(sent.success());
        let status = s.child.wait().expect("reaped");
        assert_eq!(status.code(), Some(86), "the power cut's exit status");
    });
}

/// `rounds` times: serve the store (with power-loss simulation), check
/// every key against the log, write from three connections, and `stop`
/// the server at a point that moves from round to round.
fn survive(rounds: u64, name: &str, stop: &dyn Fn(&mut Served)) {
    let dir = tempdir(name);
    let log: Log = Arc::new(Mutex::new(HashMap::new()));
    let next_id = Arc::new(Mutex::new(0u64));
    let mut acked_total = 0;
    let power = ["--simulate-power-loss", "power.state"];
    for round in 0..rounds {
        let policy = if round % 2 == 0 { NHC } else { CLASSIC_WA };
        let mut s = kv_server::serve_with(&dir, &CONFIG.replace("POLICY", policy), &power);
        let held = check(s.port, &log);
        *log.lock().expect("log") = held;
        let writers: Vec<_> = (0..WRITERS)
            .map(|i| {
                let (log, ids, port) = (log.clone(), next_id.clone(), s.port);
                std::thread::spawn(move || writer(port, i, round * 7 + i, log, ids))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(20 + (round * 37) % 80));
        stop(&mut s);
        for w in writers {
            w.join().expect("a writer");
        }
        // Each key's first entry is what the round began with.
        let log = log.lock().expect("log");
        acked_total += log
            .values()
            .flat_map(|v| v.iter().skip(1))
            .filter(|e| e.1)
            .count();
    }
    let s = kv_server::serve_with(&dir, &CONFIG.replace("POLICY", NHC), &power);
    check(s.port, &log);
    eprintln!("{name}: {acked_total} writes acknowledged over {rounds} rounds");
    assert!(
        acked_total > 25 * rounds as usize,
        "only {acked_total} writes were acknowledged"
    );
}

/// `tiermux ctl` with its arguments against the store's control socket:
/// (succeeded, stdout, stderr).
fn ctl(dir: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tiermux"))
        .arg("ctl")
        .arg(dir.join("ctl.sock"))
        .args(args)
        .output()
        .expect("tiermux ctl runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// `tiermux kv serve --control`: the volume policy's parameters read and
/// changed while clients write, a refused change named, and every value
/// still read back.
#[test]
fn the_store_takes_live_changes_on_its_control_socket() {
    let dir = tempdir("store-control");
    let config = CONFIG.replace("POLICY", NHC);
    let s = kv_server::serve_with(&dir, &config, &["--control", "ctl.sock"]);
    let (ok, text, _) = ctl(&dir, &["get"]);
    assert!(ok && text.contains("name = \"nhc\""), "{text}");
    assert!(
        text.contains("can change while running: write_mode"),
        "{text}"
    );
    let log: Log = Arc::new(Mutex::new(HashMap::new()));
    let ids = Arc::new(Mutex::new(0u64));
    let port = s.port;
    let (l, i) = (log.clone(), ids.clone());
    let w = std::thread::spawn(move || writer(port, 0, 11, l, i));
    std::thread::sleep(Duration::from_millis(100));
    let (ok, _, err) = ctl(&dir, &["set", "write_mode", "wt", "dirty_low_ratio", "0.3"]);
    assert!(ok, "{err}");
    let (_, text, _) = ctl(&dir, &["get", "write_mode"]);
    assert_eq!(text, "write_mode = \"wt\"\n");
    let (ok, _, err) = ctl(&dir, &["set", "cache_blocks", "16"]);
    assert!(
        !ok && err.contains("cannot change while the volume runs"),
        "{err}"
    );
    let (ok, _, err) = ctl(&dir, &["stats"]);
    assert!(!ok && err.contains("keeps no metrics"), "{err}");
    std::thread::sleep(Duration::from_millis(100));
    let mut s = s;
    s.child.kill().expect("kill -9");
    s.child.wait().expect("reaped");
    w.join().expect("the writer");
    // Restarted (without the change: the config decides), every key
    // holds its last acknowledged value or a later one.
    let s = kv_server::serve(&dir, &config);
    check(s.port, &log);
    assert!(log.lock().expect("log").values().flatten().any(|e| e.1));
}
