//! `tiermux kv serve` with real Redis clients: redis-benchmark with
//! pipelining, the Python `redis` library checked against a model,
//! malformed traffic that must cost only its own connection, and a stop
//! with a client connected.
//!
//! The clients come from the Debian packages redis-tools and python3-redis,
//! which `.ci/run` installs. Without them these tests fail (set
//! TIERMUX_SKIP_REDIS_CLIENTS=1 to skip them).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::kv_server;
use kv_server::{have_clients, python, redis_benchmark, serve, tempdir};
use tiermux_server::resp_client::{self, Reply, ReplyReader};

const CONFIG: &str = r#"
size = "128MiB"

[[device]]
name = "fast"
path = "fast.img"
size = "32MiB"

[[device]]
name = "slow"
path = "slow.img"

[policy]
name = "nhc"

[kv]
listen = "tcp:127.0.0.1:0"
dram = "1MiB"
region = "1MiB"
"#;

fn talk(s: &mut TcpStream, send: &[u8]) -> String {
    s.write_all(send).expect("send");
    let mut buf = vec![0; 4096];
    let n = s.read(&mut buf).expect("reply");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn redis_benchmark_runs_get_and_set_with_pipelining() {
    if !have_clients() {
        return;
    }
    let dir = tempdir("bench");
    let s = serve(&dir, CONFIG);
    for rps in redis_benchmark(s.port, 20_000, 512) {
        assert!(rps > 1000.0, "{rps} requests per second");
    }
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
    let info = talk(&mut c, b"INFO\r\n");
    let field = |name: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {info}"))
    };
    assert!(
        field("get_commands") >= 20_000 && field("set_commands") >= 20_000,
        "{info}"
    );
    assert!(
        field("to_small_object_cache") > 0,
        "the DRAM cache never spilled to flash: {info}"
    );
}

const MODEL_SCRIPT: &str = r#"
import random, sys, time, redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]))
rng = random.Random(7)
model = {}
hits = gets = 0
for i in range(6000):
    key = "k%d" % rng.randrange(400)
    op = rng.random()
    if op < 0.45:
        size = rng.choice([rng.randrange(1, 300), rng.randrange(3000, 40000)])
        value = (("%d:" % i) * (size // 4 + 1)).encode()[:size]
        assert r.set(key, value) is True
        model[key] = value
    elif op < 0.9:
        got = r.get(key)
        gets += key in model
        if got is not None:
            hits += 1
            assert got == model.get(key), "GET %s returned a value it never held" % key
    elif op < 0.95:
        n = r.delete(key)
        assert n in (0, 1) and (n == 0 or key in model)
        model.pop(key, None)
    else:
        keys = ["k%d" % rng.randrange(400) for _ in range(5)]
        for k, got in zip(keys, r.mget(keys)):
            assert got is None or got == model.get(k), "MGET %s" % k
r.set("short", b"lived", px=50)
assert r.get("short") == b"lived"
time.sleep(0.2)
assert r.get("short") is None, "an expired key was returned"
assert r.exists("short") == 0
try:
    r.execute_command("NOSUCH", "x")
    raise SystemExit("an unknown command was accepted")
except redis.exceptions.ResponseError as e:
    assert "unknown command" in str(e)
print("hits", hits, "gets", gets)
# Everything fits: only a key pushed out of a full 4 KiB bucket may miss.
assert hits >= 0.98 * gets, (hits, gets)
"#;

#[test]
fn a_python_client_reads_what_it_wrote() {
    if !have_clients() {
        return;
    }
    let dir = tempdir("python");
    let s = serve(&dir, CONFIG);
    python(&dir, MODEL_SCRIPT, s.port);
}

#[test]
fn malformed_protocol_closes_only_its_own_connection() {
    let dir = tempdir("bad");
    let s = serve(&dir, CONFIG);
    let mut good = TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
    good.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    assert_eq!(talk(&mut good, b"PING\r\n"), "+PONG\r\n");
    for bad in [
        &b"*1\r\n$-5\r\n"[..],
        b"*x\r\n",
        b"*1\r\n$99999999999\r\n",
        b"*1\r\n:1\r\n",
    ] {
        let mut c = TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let reply = talk(&mut c, bad);
        assert!(
            reply.starts_with("-ERR Protocol error"),
            "{reply:?} for {:?}",
            bad.escape_ascii().to_string()
        );
        let mut rest = Vec::new();
        c.read_to_end(&mut rest)
            .expect("the server closes the connection");
    }
    // A command of many large arguments is cut off at its limit (128 MiB).
    let mut huge = TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
    huge.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut writer = huge.try_clone().expect("clone");
    let sender = std::thread::spawn(move || {
        let arg = vec![b'x'; 50 << 20];
        let _ = writer.write_all(b"*4\r\n$3\r\nSET\r\n");
        for _ in 0..3 {
            let _ = writer.write_all(format!("${}\r\n", arg.len()).as_bytes());
            let _ = writer.write_all(&arg);
            let _ = writer.write_all(b"\r\n");
        }
    });
    let mut reply = String::new();
    let _ = BufReader::new(&mut huge).read_line(&mut reply);
    assert!(
        reply.starts_with("-ERR Protocol error: command longer than"),
        "{reply:?}"
    );
    drop(huge);
    sender.join().expect("sender");
    assert_eq!(talk(&mut good, b"PING\r\n"), "+PONG\r\n");
    // Errors that keep the connection: unknown commands, wrong arity, a
    // value larger than the cache stores, a bad expiry.
    let big = vec![b'v'; 2 << 20];
    let mut set_big = Vec::new();
    resp_client::command(&mut set_big, &[b"SET", b"k", &big]);
    for (send, expect) in [
        (&b"FLUSHALL\r\n"[..], "-ERR unknown command 'FLUSHALL'"),
        (
            b"GET\r\n",
            "-ERR wrong number of arguments for 'get' command",
        ),
        (
            &set_big[..],
            "-ERR value of 2097152 bytes is larger than the cache stores",
        ),
        (b"SET k v EX -1\r\n", "-ERR invalid expire time"),
        (b"SET k v KEEPTTL\r\n", "-ERR syntax error"),
    ] {
        let mut reply = talk(&mut good, send);
        while !reply.ends_with("\r\n") {
            reply += &talk(&mut good, b"");
        }
        assert!(reply.starts_with(expect), "{reply:?}, expected {expect:?}");
    }
    assert_eq!(
        talk(&mut good, b"SET k v\r\nGET k\r\n").replace("\r\n", "|"),
        "+OK|$1|v|"
    );
}

/// SIGTERM ends the server while a client stays connected and idle, on a
/// volume whose policy never ticks (nothing but the stop wakes its loop).
#[test]
fn a_stop_with_an_idle_client_connected_ends_the_server() {
    let dir = tempdir("stop");
    let config = CONFIG
        .replace("name = \"nhc\"", "name = \"passthrough\"")
        .replace(
            "[[device]]\nname = \"fast\"\npath = \"fast.img\"\nsize = \"32MiB\"\n\n",
            "",
        );
    let mut s = serve(&dir, &config);
    let mut idle = TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
    idle.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    assert_eq!(talk(&mut idle, b"PING\r\n"), "+PONG\r\n");
    std::thread::sleep(Duration::from_millis(200));
    stop_within_10_s(&mut s, "with an idle client connected");
}

/// SIGTERM ends a server no client has reached, in either mode (a store
/// opens its volume before any command asks it to).
#[test]
fn a_stop_before_any_client_ends_the_server() {
    for (mode, config) in [("cache", CONFIG.to_string()), ("store", store_config())] {
        let dir = tempdir(&format!("stop-{mode}"));
        let mut s = serve(&dir, &config);
        std::thread::sleep(Duration::from_millis(500));
        stop_within_10_s(&mut s, &format!("in {mode} mode before any client"));
    }
}

/// Sends SIGTERM to the server and waits for it to exit with success.
fn stop_within_10_s(s: &mut kv_server::Served, when: &str) {
    let pid = s.child.id().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let t0 = std::time::Instant::now();
    loop {
        if let Some(st) = s.child.try_wait().expect("wait") {
            assert!(st.success(), "the server exited with {st}");
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the server did not stop {when}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// [`CONFIG`]'s volume with a store on it.
fn store_config() -> String {
    let volume = CONFIG.split("[kv]").next().expect("a volume before [kv]");
    format!("{volume}[kv]\nmode = \"store\"\nlisten = \"tcp:127.0.0.1:0\"\nindex = \"1MiB\"\nmax_write = \"256KiB\"\n")
}

/// Sends `input` from a thread of its own, then half-closes when `close`;
/// returns every byte the server sends until it closes the connection or
/// `until` appears at the end of what it sent.
fn pipeline(port: u16, input: Vec<u8>, close: bool, until: &[u8]) -> Vec<u8> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut writer = c.try_clone().expect("clone");
    let sender = std::thread::spawn(move || {
        writer.write_all(&input).expect("send the pipeline");
        if close {
            writer
                .shutdown(std::net::Shutdown::Write)
                .expect("half-close");
        }
    });
    let mut got = Vec::new();
    let mut buf = vec![0; 1 << 16];
    while until.is_empty() || !got.ends_with(until) {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => panic!(
                "no more replies after {} bytes ({e}): the server stalled",
                got.len()
            ),
        }
    }
    sender.join().expect("sender");
    got
}

/// A client may send more commands at once than a connection takes in
/// flight (`MAX_COMMANDS_PER_CONN`, 1024): the server answers them all, in
/// order, in cache and store mode, and answers every command a client sent
/// before half-closing its side.
#[test]
fn a_client_may_pipeline_more_commands_than_a_connection_takes_at_once() {
    const N: usize = 3 * 1024 + 7;
    for (mode, config) in [("cache", CONFIG.to_string()), ("store", store_config())] {
        let dir = tempdir(&format!("pipeline-{mode}"));
        let s = serve(&dir, &config);
        let mut input = Vec::new();
        for i in 0..N {
            input.extend_from_slice(format!("SET key{i} value{i}\r\n").as_bytes());
        }
        for i in 0..N {
            input.extend_from_slice(format!("GET key{i}\r\n").as_bytes());
        }
        input.extend_from_slice(b"ECHO end-of-pipeline\r\n");
        let got = pipeline(s.port, input, false, b"end-of-pipeline\r\n");
        let mut want = "+OK\r\n".repeat(N);
        for i in 0..N {
            let v = format!("value{i}");
            want += &format!("${}\r\n{v}\r\n", v.len());
        }
        want += "$15\r\nend-of-pipeline\r\n";
        assert!(
            got == want.as_bytes(),
            "{mode}: {} bytes of replies, {} expected",
            got.len(),
            want.len()
        );
        let pings = "PING\r\n".repeat(N).into_bytes();
        let got = pipeline(s.port, pings, true, b"");
        assert_eq!(
            got,
            "+PONG\r\n".repeat(N).into_bytes(),
            "{mode}: every command sent before the half-close is answered"
        );
    }
}

/// A command whose reply would pass `MAX_REPLY_BYTES` (256 MiB), such as
/// an MGET naming a large value many times, gets an error instead of
/// making the server hold the whole reply (one such command of 30,000
/// keys would hold 30 GB); the connection goes on.
#[test]
fn a_reply_too_large_to_hold_is_refused() {
    let dir = tempdir("large-reply");
    let s = serve(&dir, CONFIG);
    let value = vec![b'v'; 1_000_000];
    let mut set = Vec::new();
    resp_client::command(&mut set, &[b"SET", b"big", &value]);
    let mget = |n: usize| {
        let mut v = format!("*{}\r\n$4\r\nMGET\r\n", n + 1).into_bytes();
        for _ in 0..n {
            v.extend_from_slice(b"$3\r\nbig\r\n");
        }
        v
    };
    let mut input = set;
    input.extend_from_slice(&mget(300));
    input.extend_from_slice(b"ECHO after\r\n");
    let got = pipeline(s.port, input, false, b"$5\r\nafter\r\n");
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with("+OK\r\n-ERR the reply would pass 256 MiB"),
        "{:?}",
        &text[..text.len().min(200)]
    );
    // Under the limit the reply comes whole: 200 values of 1 MB.
    let got = pipeline(s.port, mget(200), true, b"");
    let mut want = b"*200\r\n".to_vec();
    for _ in 0..200 {
        want.extend_from_slice(b"$1000000\r\n");
        want.extend_from_slice(&value);
        want.extend_from_slice(b"\r\n");
    }
    assert!(got == want, "{} bytes, {} expected", got.len(), want.len());
}

/// The server's resident memory, MiB (Linux).
fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb >> 10)
}

/// An MGET naming a value on flash a thousand times reads it a bounded
/// number of times at once (`MAX_PARTS_IN_FLIGHT_PER_CONN`): the server
/// stays under 1 GiB, where it used to read all thousand copies at once
/// (about 2.2 GB) before refusing the reply.
#[test]
fn a_command_of_many_keys_reads_flash_a_few_at_a_time() {
    let dir = tempdir("parts");
    let s = serve(&dir, CONFIG);
    let value = vec![b'v'; 1_000_000];
    let mut input = Vec::new();
    for key in ["big", "other1", "other2"] {
        input.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n",
                key.len(),
                value.len()
            )
            .as_bytes(),
        );
        input.extend_from_slice(&value);
        input.extend_from_slice(b"\r\n");
    }
    let got = pipeline(s.port, input, false, b"+OK\r\n+OK\r\n+OK\r\n");
    assert_eq!(got, b"+OK\r\n+OK\r\n+OK\r\n", "the sets");
    let pid = s.child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(rss_mib(pid));
                std::thread::sleep(Duration::from_millis(2));
            }
            peak
        })
    };
    let mut mget = b"*1001\r\n$4\r\nMGET\r\n".to_vec();
    for _ in 0..1000 {
        mget.extend_from_slice(b"$3\r\nbig\r\n");
    }
    let got = pipeline(s.port, mget, true, b"");
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak = sampler.join().expect("sampler");
    assert!(
        got.starts_with(b"-ERR the reply would pass 256 MiB"),
        "{:?}",
        String::from_utf8_lossy(&got[..got.len().min(100)])
    );
    assert!(peak > 0 && peak < 1024, "the server peaked at {peak} MiB");
}

/// Sets key `big` to a 1 MB value on the server at `port`; returns it.
fn set_big(port: u16) -> Vec<u8> {
    let value = vec![b'v'; 1_000_000];
    let mut set = Vec::new();
    resp_client::command(&mut set, &[b"SET", b"big", &value]);
    assert_eq!(pipeline(port, set, false, b"+OK\r\n"), b"+OK\r\n");
    value
}

/// `n` pipelined GETs of key `big`.
fn gets_of_big(n: usize) -> Vec<u8> {
    let mut gets = Vec::new();
    for _ in 0..n {
        resp_client::command(&mut gets, &[b"GET", b"big"]);
    }
    gets
}

/// A client that pipelines many GETs of a large value and does not read
/// its replies holds the server to a bounded amount of memory: the
/// server takes no more of the connection's commands to the machine
/// while the replies it holds unsent pass the connection's limit, and
/// answers every one, whole and in order, once the client reads.
#[test]
fn replies_a_client_does_not_read_stay_bounded() {
    let dir = tempdir("unread");
    let s = serve(&dir, CONFIG);
    let value = set_big(s.port);
    const GETS: usize = 1000;
    let gets = gets_of_big(GETS);
    let c = TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    (&c).write_all(&gets).expect("send");
    // 1 GB of replies: were they all built, the server would hold them.
    let mut peak = 0;
    for _ in 0..150 {
        peak = peak.max(rss_mib(s.child.id()));
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!("{GETS} GETs of 1 MB unread: the server peaked at {peak} MiB");
    let mut replies = ReplyReader::new(&c);
    for i in 0..GETS {
        let r = replies.next_reply().expect("a reply");
        assert!(r == Reply::Bulk(Some(value.clone())), "GET {i}");
    }
    assert!(peak > 0 && peak < 512, "the server peaked at {peak} MiB");
}

/// Many clients that pipeline GETs of a large value and do not read hold
/// the server to its reply memory (`reply_memory`, here 128 MiB) over all
/// connections, where each alone may hold up to 128 MiB (64 MiB unsent
/// and 64 MiB gathered): a client that reads is still answered meanwhile,
/// and every reply comes back whole and in order once the clients read.
#[test]
fn replies_many_clients_do_not_read_stay_within_the_servers_reply_memory() {
    const CLIENTS: usize = 8;
    const GETS: usize = 80;
    let dir = tempdir("unread-many");
    let config = CONFIG.replace("[kv]", "[kv]\nreply_memory = \"128MiB\"");
    let s = serve(&dir, &config);
    let value = set_big(s.port);
    let before = rss_mib(s.child.id());
    let gets = gets_of_big(GETS);
    let clients: Vec<TcpStream> = (0..CLIENTS)
        .map(|_| {
            let c = TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
            c.set_read_timeout(Some(Duration::from_secs(30)))
                .expect("timeout");
            (&c).write_all(&gets).expect("send");
            c
        })
        .collect();
    // 640 MB of replies asked for: were each client held only to its own
    // limit, the server would build nearly all of them.
    let mut peak = 0;
    for _ in 0..150 {
        peak = peak.max(rss_mib(s.child.id()));
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!(
        "{CLIENTS} clients x {GETS} GETs of 1 MB unread: {before} MiB before, peak {peak} MiB"
    );
    let small = b"SET small v\r\nGET small\r\n".to_vec();
    assert_eq!(
        pipeline(s.port, small, false, b"$1\r\nv\r\n"),
        b"+OK\r\n$1\r\nv\r\n"
    );
    for (n, c) in clients.iter().enumerate() {
        let mut replies = ReplyReader::new(c);
        for i in 0..GETS {
            let r = replies.next_reply().expect("a reply");
            assert!(r == Reply::Bulk(Some(value.clone())), "client {n}, GET {i}");
        }
    }
    assert!(
        peak > before && peak - before < 320,
        "the server grew from {before} to {peak} MiB"
    );
}

/// More clients than the process's file descriptors allow: those past the
/// server's limit are told so in Redis's words and closed, the server
/// answers the ones it holds, takes new ones once they close, and does
/// not spin on failed accepts (its log stays a few lines long; it used to
/// write "Too many open files" some 70,000 times a second).
#[test]
fn clients_past_the_descriptor_limit_are_refused_and_the_server_goes_on() {
    const CLIENTS: usize = 100;
    let dir = tempdir("fd-limit");
    let mut s = kv_server::serve_with_fd_limit(&dir, CONFIG, 64);
    let mut conns: Vec<TcpStream> = (0..CLIENTS)
        .map(|_| TcpStream::connect(("127.0.0.1", s.port)).expect("connect"))
        .collect();
    let (mut served, mut refused, mut first_served) = (0, 0, CLIENTS);
    // The server has answered every connection by then.
    std::thread::sleep(Duration::from_millis(500));
    for (i, c) in conns.iter_mut().enumerate() {
        match spoken_first(c, Duration::ZERO) {
            Some(told) => {
                assert_eq!(told, "-ERR max number of clients reached\r\n");
                refused += 1;
            }
            None => {
                assert_eq!(talk(c, b"PING\r\n"), "+PONG\r\n");
                served += 1;
                first_served = first_served.min(i);
            }
        }
    }
    assert!(
        served >= 1 && refused >= 1,
        "{served} served, {refused} refused"
    );
    assert_eq!(served + refused, CLIENTS);
    // INFO counts them under Redis's names.
    let info = talk(&mut conns[first_served], b"INFO\r\n");
    let field = |name: &str| -> usize {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {info}"))
    };
    assert_eq!(field("connected_clients"), served, "{info}");
    assert_eq!(field("rejected_connections"), refused, "{info}");
    assert_eq!(field("maxclients"), served, "{info}");
    drop(conns);
    // The places come back when the clients leave.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
        if spoken_first(&mut c, Duration::from_millis(200)).is_none() {
            assert_eq!(talk(&mut c, b"PING\r\n"), "+PONG\r\n");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still refused");
        std::thread::sleep(Duration::from_millis(50));
    }
    stop_within_10_s(&mut s, "after the flood");
    let log = std::fs::read_to_string(dir.join("serve.log")).expect("log");
    assert!(log.lines().count() < 30, "{log}");
    // Every refusal is counted (the retries above may add some).
    let counted: usize = log
        .split(" refused as over the limit")
        .next()
        .and_then(|head| head.rsplit('(').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of refusals in {log}"));
    assert!(
        counted >= refused,
        "{counted} counted, {refused} seen\n{log}"
    );
}

/// What the server has sent a new connection before being asked
/// anything, if anything, once it has had `wait` to say it.
fn spoken_first(c: &mut TcpStream, wait: Duration) -> Option<String> {
    std::thread::sleep(wait);
    c.set_nonblocking(true).expect("nonblocking");
    let mut buf = [0u8; 64];
    let told = c.read(&mut buf).unwrap_or(0);
    c.set_nonblocking(false).expect("blocking");
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    (told > 0).then(|| String::from_utf8_lossy(&buf[..told]).into_owned())
}
