//! Entry points for fuzzing the key-value server with whole client byte
//! streams. The `fuzz/` crate's `kv_connection` target calls them under
//! `cargo fuzz` (nightly); a stable test here runs them on random input,
//! so they stay built and working.
//!
//! - [`KvTarget`]: a real key-value server (cache or store mode) on the
//!   small write-back volume of the NBD target, in this process.
//!   [`KvTarget::connection`] sends one connection's bytes, half-closes,
//!   and reads until the server closes; a panic anywhere in the server
//!   aborts the process, and a server that stops answering fails the
//!   read's timeout.
//! - [`KvTarget::session`]: commands decoded from the input (SET, GET,
//!   MGET, DEL, EXISTS, PING, ECHO, SCAN over a few keys of its own), sent
//!   in pipelines, every reply checked against a model of the keys: the
//!   store answers exactly what was last acknowledged, the cache that or
//!   nothing (never what a later SET of the same pipeline wrote: a
//!   connection's commands answer in order); never another value.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use tiermux_engine::config::Listen;
use tiermux_engine::reactor::build_reactor;
use tiermux_engine::{Runtime, Volume, VolumeConfig};
use tiermux_kv::{CacheConfig, Machine, MachineConfig, StoreConfig};

use crate::fuzzing::{connect, fresh_dir, read_to_close, send_and_read_to_close, CONFIG};
use crate::kv::{KvServer, KvServerStats, KvShutdown};
use crate::resp_client::{command, Reply, ReplyReader};

/// Which key-value machine the fuzzed server runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvMode {
    /// CacheLib's shape: DRAM, small-object buckets, large-object regions.
    Cache,
    /// Orthus-KV's shape: a value log and a key index.
    Store,
}

/// The machine's config: small enough that a few hundred commands reach
/// the volume (DRAM evictions, region writes, log cleaning).
fn machine_config(mode: KvMode) -> MachineConfig {
    match mode {
        KvMode::Cache => MachineConfig::Cache(CacheConfig {
            volume_bytes: 8 << 20,
            dram_bytes: 16 << 10,
            region_bytes: 256 << 10,
            max_write_bytes: 64 << 10,
            insert_queue_bytes: 1 << 20,
            ..CacheConfig::default()
        }),
        KvMode::Store => MachineConfig::Store(StoreConfig {
            volume_bytes: 8 << 20,
            index_bytes: 256 << 10,
            checkpoint_every_bytes: 1 << 20,
            max_write_bytes: 64 << 10,
            ..StoreConfig::default()
        }),
    }
}

/// A key-value server on a small volume, served by a thread of this process
/// until dropped.
pub struct KvTarget {
    mode: KvMode,
    dir: PathBuf,
    sock: PathBuf,
    shutdown: KvShutdown,
    thread: Option<std::thread::JoinHandle<KvServerStats>>,
    sessions: AtomicU64,
}

impl KvTarget {
    /// Starts the server in a fresh directory (in memory when `/dev/shm`
    /// exists).
    pub fn start(mode: KvMode) -> KvTarget {
        let dir = fresh_dir(&format!("tiermux-kv-fuzz-{mode:?}"));
        let cfg = VolumeConfig::parse(CONFIG, &dir).expect("the fuzz volume config");
        let mut reactor = build_reactor(cfg.reactor).expect("a reactor");
        let vol = Volume::open(&cfg, reactor.as_mut()).expect("the fuzz volume");
        let machine = Machine::new(machine_config(mode)).expect("the fuzz machine");
        let listen = Listen::parse("unix:kv.sock", &dir).expect("the socket path");
        let mut server = KvServer::new(listen, machine);
        server.bind(reactor.waker()).expect("the fuzz socket");
        let shutdown = server.shutdown_handle();
        let mut rt = Runtime::new(vol, reactor);
        let thread =
            std::thread::spawn(move || server.run(&mut rt).expect("the fuzzed server failed"));
        KvTarget {
            mode,
            sock: dir.join("kv.sock"),
            dir,
            shutdown,
            thread: Some(thread),
            sessions: AtomicU64::new(0),
        }
    }

    /// Sends one connection's bytes, half-closes and reads every reply
    /// until the server closes the connection; returns the bytes received.
    /// Panics if the server does not close it within 20 s.
    pub fn connection(&self, input: &[u8]) -> Vec<u8> {
        send_and_read_to_close(&self.sock, input)
    }

    /// Decodes commands from `data` and sends them in chunks, each a
    /// pipeline whose replies come back before the next is sent (so that
    /// some reads find their values on the volume), then `data`'s
    /// undecoded tail as garbage; checks every reply against the model of
    /// the session's keys. Returns the number of commands checked and of
    /// values read. Panics on a reply the server should not give.
    pub fn session(&self, data: &[u8]) -> (usize, usize) {
        let id = self.sessions.fetch_add(1, Ordering::Relaxed);
        let (cmds, tail) = decode_commands(data, self.mode);
        let key = |k: u8| format!("s{id}:k{k}").into_bytes();
        let c = connect(&self.sock);
        let mut replies = ReplyReader::new(&c);
        let mut model = Model::new(self.mode);
        let mut values = 0;
        for chunk in cmds.split_inclusive(|(_, ends_chunk)| *ends_chunk) {
            let mut input = Vec::new();
            for (cmd, _) in chunk {
                encode_command(cmd, &key, &mut input);
            }
            (&c).write_all(&input).expect("send a chunk of the session");
            for (cmd, _) in chunk {
                let reply = replies.next_reply().unwrap_or_else(|why| {
                    panic!(
                        "{:?}: {cmd:?}: no whole reply within 20 s: {why}",
                        self.mode
                    )
                });
                if let Err(why) = model.check(cmd, &reply) {
                    panic!("{:?}: {cmd:?}: {why}", self.mode);
                }
                values += matches!(reply, Reply::Bulk(Some(_))) as usize;
            }
        }
        // Leave the store as it was: the keys go, whatever the model says.
        let mut input = Vec::new();
        encode_command(&Cmd::Del((0..KEYS).collect()), &key, &mut input);
        input.extend_from_slice(tail);
        let _ = (&c).write_all(&input);
        let _ = c.shutdown(std::net::Shutdown::Write);
        read_to_close(c, Vec::new());
        (cmds.len(), values)
    }
}

impl KvTarget {
    /// Stops the server; returns its counters.
    pub fn stop(mut self) -> KvServerStats {
        self.shutdown.trigger();
        let t = self.thread.take().expect("a running server");
        t.join().expect("the fuzzed server")
    }
}

impl Drop for KvTarget {
    fn drop(&mut self) {
        self.shutdown.trigger();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Keys a session uses (its own, named for the session).
const KEYS: u8 = 16;

/// A command of a session, over key numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Cmd {
    Set {
        key: u8,
        value: Vec<u8>,
        expiry: Option<(&'static str, u64)>,
    },
    Get(u8),
    Mget(Vec<u8>),
    Del(Vec<u8>),
    Exists(Vec<u8>),
    Ping,
    Echo(Vec<u8>),
    Scan {
        count: u32,
        pattern: Option<Vec<u8>>,
    },
}

/// Most commands a session sends: more than a connection takes in flight
/// (`kv::MAX_COMMANDS_PER_CONN`), so that one pipeline can pass that limit.
const MAX_SESSION_COMMANDS: usize = 1500;

/// Commands from `data`, three bytes each (at most
/// [`MAX_SESSION_COMMANDS`]), each with whether
/// it ends a chunk of the session (a first byte of 240 to 254), and the
/// bytes from the first whose first byte is 255 (sent as they are).
fn decode_commands(data: &[u8], mode: KvMode) -> (Vec<(Cmd, bool)>, &[u8]) {
    let mut cmds = Vec::new();
    let mut at = 0;
    while at + 3 <= data.len() && cmds.len() < MAX_SESSION_COMMANDS {
        let (op, a, b) = (data[at], data[at + 1], data[at + 2]);
        let key = a % KEYS;
        let keys = || {
            (0..1 + b % 4)
                .map(|i| (a.wrapping_add(i * 5)) % KEYS)
                .collect()
        };
        if op == u8::MAX {
            break;
        }
        let cmd = match op % 16 {
            0..=4 => Cmd::Set {
                key,
                value: value_bytes(a, b),
                expiry: match op / 16 {
                    0 => Some(("EX", 100)),
                    1 => Some(("PX", 1 + b as u64 % 5)),
                    _ => None,
                },
            },
            5..=8 => Cmd::Get(key),
            9 => Cmd::Mget(keys()),
            // Deletes are rarer than writes, so that keys live long
            // enough to leave DRAM and be read from the volume.
            10 if a % 4 == 0 => Cmd::Del(keys()),
            11 => Cmd::Exists(keys()),
            12 => Cmd::Ping,
            13 => Cmd::Echo(vec![b'e'; b as usize]),
            14 | 15 if mode == KvMode::Store => Cmd::Scan {
                count: 1 + b as u32 % 20,
                pattern: (a % 2 == 0).then(|| b"s*:k1*".to_vec()),
            },
            _ => Cmd::Get(key),
        };
        cmds.push((cmd, op >= 0xF0));
        at += 3;
    }
    (cmds, &data[at..])
}

/// A value of a length from `b` (up to about 6 KiB, past the small-object
/// limit), its bytes named for `a` and `b` so that values differ.
fn value_bytes(a: u8, b: u8) -> Vec<u8> {
    let len = match b % 4 {
        0 => b as usize,
        1 => 100 + b as usize * 8,
        2 => 2000 + b as usize * 16,
        _ => 1,
    };
    (0..len)
        .map(|i| a ^ b.wrapping_mul(31) ^ (i as u8))
        .collect()
}

fn encode_command(c: &Cmd, key: &dyn Fn(u8) -> Vec<u8>, out: &mut Vec<u8>) {
    let mut args: Vec<Vec<u8>> = Vec::new();
    let with_keys = |name: &str, ks: &[u8]| {
        let mut a = vec![name.as_bytes().to_vec()];
        a.extend(ks.iter().map(|&k| key(k)));
        a
    };
    match c {
        Cmd::Set {
            key: k,
            value,
            expiry,
        } => {
            args = vec![b"SET".to_vec(), key(*k), value.clone()];
            if let Some((unit, n)) = expiry {
                args.push(unit.as_bytes().to_vec());
                args.push(n.to_string().into_bytes());
            }
        }
        Cmd::Get(k) => args = with_keys("GET", &[*k]),
        Cmd::Mget(ks) => args = with_keys("MGET", ks),
        Cmd::Del(ks) => args = with_keys("DEL", ks),
        Cmd::Exists(ks) => args = with_keys("EXISTS", ks),
        Cmd::Ping => args.push(b"PING".to_vec()),
        Cmd::Echo(m) => args = vec![b"ECHO".to_vec(), m.clone()],
        Cmd::Scan { count, pattern } => {
            args = vec![b"SCAN".to_vec(), b"0".to_vec(), b"COUNT".to_vec()];
            args.push(count.to_string().into_bytes());
            if let Some(p) = pattern {
                args.push(b"MATCH".to_vec());
                args.push(p.clone());
            }
        }
    }
    command(out, &args.iter().map(Vec::as_slice).collect::<Vec<_>>());
}

/// What a key may read as: the values a GET may return (`None`: nothing).
type Allowed = Vec<Option<Vec<u8>>>;

/// The session's keys as the server must show them.
struct Model {
    mode: KvMode,
    keys: BTreeMap<u8, Allowed>,
    /// What each key went through: the commands that wrote it and their
    /// replies, for the report of a wrong read.
    history: BTreeMap<u8, Vec<String>>,
}

impl Model {
    fn new(mode: KvMode) -> Model {
        Model {
            mode,
            keys: BTreeMap::new(),
            history: BTreeMap::new(),
        }
    }

    fn allowed(&self, k: u8) -> Allowed {
        self.keys.get(&k).cloned().unwrap_or_else(|| vec![None])
    }

    /// Sets what `k` may read as after a write of `v` (`None`: a delete)
    /// that the server acknowledged (`done`) or failed.
    fn write(&mut self, k: u8, v: Option<Vec<u8>>, done: bool, may_vanish: bool) {
        let mut allowed = if done { vec![] } else { self.allowed(k) };
        if !allowed.contains(&v) {
            allowed.push(v);
        }
        // A cache may drop any item (and expire one with a time to live).
        if (self.mode == KvMode::Cache || may_vanish) && !allowed.contains(&None) {
            allowed.push(None);
        }
        self.keys.insert(k, allowed);
    }

    fn value_ok(&self, k: u8, got: &Reply) -> Result<(), String> {
        let allowed = self.allowed(k);
        match got {
            Reply::Bulk(v) if allowed.contains(v) => Ok(()),
            _ => Err(format!(
                "key {k} read as {}, where it may be {}; its writes: {}",
                shown(got),
                allowed
                    .iter()
                    .map(|v| shown(&Reply::Bulk(v.clone())))
                    .collect::<Vec<_>>()
                    .join(" or "),
                self.history
                    .get(&k)
                    .map(|h| h.join("; "))
                    .unwrap_or_default()
            )),
        }
    }

    /// Checks `reply` to `c` and moves the model past `c`.
    fn check(&mut self, c: &Cmd, reply: &Reply) -> Result<(), String> {
        let store = self.mode == KvMode::Store;
        self.note(c, reply);
        match (c, reply) {
            (Cmd::Set { key, value, expiry }, Reply::Simple(s)) if s == "OK" => {
                self.write(*key, Some(value.clone()), true, expiry.is_some());
            }
            (Cmd::Set { expiry, .. }, Reply::Error(_)) if store && expiry.is_some() => {}
            (Cmd::Set { key, value, .. }, Reply::Error(_)) if !store => {
                self.write(*key, Some(value.clone()), false, true);
            }
            (Cmd::Get(k), r) => self.value_ok(*k, r)?,
            (Cmd::Mget(ks), Reply::Array(vs)) if vs.len() == ks.len() => {
                for (k, v) in ks.iter().zip(vs) {
                    self.value_ok(*k, v).map_err(|e| {
                        let others: Vec<String> = ks
                            .iter()
                            .map(|k| format!("key {k}: {:?}", self.history.get(k)))
                            .collect();
                        format!("{e} (MGET of {})", others.join(", "))
                    })?;
                }
            }
            (Cmd::Del(ks) | Cmd::Exists(ks), Reply::Int(n)) => {
                self.check_count(c, ks, *n)?;
            }
            (Cmd::Ping, Reply::Simple(s)) if s == "PONG" => {}
            (Cmd::Echo(m), Reply::Bulk(Some(v))) if v == m => {}
            (Cmd::Scan { .. }, Reply::Array(parts)) if scan_shaped(parts) => {}
            _ => return Err(format!("unexpected reply {}", shown(reply))),
        }
        Ok(())
    }

    /// Adds `c` to the history of the keys it writes.
    fn note(&mut self, c: &Cmd, reply: &Reply) {
        let (keys, what) = match c {
            Cmd::Set { key, value, expiry } => (
                vec![*key],
                format!(
                    "SET {} {expiry:?}",
                    shown(&Reply::Bulk(Some(value.clone())))
                ),
            ),
            Cmd::Del(ks) => (ks.clone(), "DEL".into()),
            _ => return,
        };
        for k in keys {
            let h = self.history.entry(k).or_default();
            h.push(format!("{what} -> {}", shown(reply)));
        }
    }

    /// DEL counts the keys it removed, EXISTS those present (each time a
    /// key is named): exactly in the store, at most that in the cache
    /// (which may have dropped a key).
    fn check_count(&mut self, c: &Cmd, ks: &[u8], n: i64) -> Result<(), String> {
        let del = matches!(c, Cmd::Del(_));
        let (mut least, mut most) = (0, 0);
        let mut gone = Vec::new();
        for k in ks {
            let present = !(del && gone.contains(k));
            let allowed = self.allowed(*k);
            most += (present && allowed.iter().any(Option::is_some)) as i64;
            least += (present && !allowed.contains(&None)) as i64;
            gone.push(*k);
        }
        if del {
            for k in ks {
                self.write(*k, None, true, false);
            }
        }
        if (least..=most).contains(&n) {
            Ok(())
        } else {
            Err(format!("counted {n}, where {least} to {most} is right"))
        }
    }
}

/// A SCAN reply: a cursor and an array of keys.
fn scan_shaped(parts: &[Reply]) -> bool {
    match parts {
        [Reply::Bulk(Some(cursor)), Reply::Array(keys)] => {
            std::str::from_utf8(cursor).is_ok_and(|c| c.parse::<u64>().is_ok())
                && keys.iter().all(|k| matches!(k, Reply::Bulk(Some(_))))
        }
        _ => false,
    }
}

fn shown(r: &Reply) -> String {
    match r {
        Reply::Bulk(Some(v)) if v.len() > 24 => {
            format!(
                "{} bytes ({:?}...)",
                v.len(),
                String::from_utf8_lossy(&v[..24])
            )
        }
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiermux_core::rng::Rng;

    /// Random sessions (and their garbage tails) on both machines; the
    /// model finds nothing wrong, and raw random bytes end every
    /// connection.
    #[test]
    fn the_kv_fuzz_entry_points_survive_random_input() {
        let mut rng = Rng::new(11);
        for mode in [KvMode::Cache, KvMode::Store] {
            let t = KvTarget::start(mode);
            let (mut commands, mut values) = (0, 0);
            for _ in 0..60 {
                let len = 3 * rng.below(300) as usize + rng.below(4) as usize;
                let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                let (c, v) = t.session(&data);
                commands += c;
                values += v;
            }
            assert!(commands > 2000, "{mode:?}: {commands} commands checked");
            assert!(values > 500, "{mode:?}: {values} values read");
            // One pipeline past the connection's limit on commands in
            // flight: sets and gets of small values, no chunk break.
            let long: Vec<u8> = (0..1100u32)
                .flat_map(|i| [(i % 9) as u8, (i * 7) as u8, 4 * (i % 50) as u8])
                .collect();
            assert_eq!(t.session(&long).0, 1100);
            let alphabet = b"*$\r\n-0123456789 GETSMDLPINXC";
            for _ in 0..100 {
                let input: Vec<u8> = (0..rng.below(300))
                    .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize])
                    .collect();
                t.connection(&input);
            }
            let s = t.stop().summary;
            assert!(
                s.flash_hits > 100 && s.volume_reads > 100,
                "{mode:?}: the volume is hardly read ({s:?})"
            );
        }
    }

    /// The model catches a wrong value: a session whose GET is answered
    /// by another key's value fails.
    #[test]
    fn the_model_refuses_a_value_never_written() {
        let mut m = Model::new(KvMode::Store);
        let set = Cmd::Set {
            key: 1,
            value: b"one".to_vec(),
            expiry: None,
        };
        assert!(m.check(&set, &Reply::Simple("OK".into())).is_ok());
        let good = Reply::Bulk(Some(b"one".to_vec()));
        assert!(m.check(&Cmd::Get(1), &good).is_ok());
        assert!(m.check(&Cmd::Get(1), &Reply::Bulk(None)).is_err());
        assert!(m.check(&Cmd::Get(2), &good).is_err());
        assert!(m.check(&Cmd::Exists(vec![1, 1, 2]), &Reply::Int(2)).is_ok());
        assert!(m.check(&Cmd::Del(vec![1, 1]), &Reply::Int(2)).is_err());
        let mut cache = Model::new(KvMode::Cache);
        assert!(cache.check(&set, &Reply::Simple("OK".into())).is_ok());
        assert!(cache.check(&Cmd::Get(1), &Reply::Bulk(None)).is_ok());
        let stale = Reply::Bulk(Some(b"old".to_vec()));
        assert!(cache.check(&Cmd::Get(1), &stale).is_err());
    }
}
