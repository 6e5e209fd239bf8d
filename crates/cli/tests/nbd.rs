//! `tiermux serve` with real NBD clients: nbdinfo, qemu-io (patterns,
//! across restarts), nbdcopy (checksum round trip), fio (verify), a crash
//! test that kills the server at random moments of a write-back workload,
//! and malformed traffic.
//!
//! The clients come from the Debian packages libnbd-bin, python3-libnbd,
//! qemu-utils and fio, which `.ci/run` installs. Without them these tests fail (set
//! TIERMUX_SKIP_NBD_CLIENTS=1 to skip the ones that need them).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tiermux_core::rng::Rng;

use crate::common::nbd_served;
use crate::common::nbd_wire;
use nbd_served::*;
use nbd_wire::{connect, read_blocks, reply, request};

#[test]
fn real_clients_read_what_they_wrote() {
    if !have_tools(&["nbdinfo", "nbdcopy", "qemu-io", "fio"]) {
        return;
    }
    for (name, config) in configs() {
        clients_read_what_they_wrote(&data_dir_with(&format!("clients-{name}"), &config));
    }
}

/// nbdinfo, qemu-io, nbdcopy and fio with verification on the volume in
/// `dir`, across a clean restart and kill -9.
fn clients_read_what_they_wrote(dir: &Path) {
    let dir = dir.to_path_buf();
    let s = Served::start(&dir);
    let info = run(Command::new("nbdinfo").arg(s.uri()));
    assert!(info.contains("export-size: 67108864"), "{info}");
    assert!(
        info.contains("can_flush: true") && info.contains("can_fua: true"),
        "{info}"
    );
    // qemu-io: aligned and unaligned pattern writes, then reads that verify.
    let qio = |s: &Served, cmds: &[&str]| {
        let mut c = Command::new("qemu-io");
        c.args(["-f", "raw", &s.uri()]);
        for x in cmds {
            c.args(["-c", x]);
        }
        let out = run(&mut c);
        assert!(!out.contains("Pattern verification failed"), "{out}");
        out
    };
    qio(
        &s,
        &[
            "write -P 0xab 0 2M",
            "write -P 0x5c 1000 3000",
            "write -P 0x17 40M 1M",
            // The largest request, far larger than a connection's receive
            // buffer.
            "write -P 0x6e 8M 32M",
            "flush",
        ],
    );
    qio(
        &s,
        &[
            "read -P 0xab 0 1000",
            "read -P 0x5c 1000 3000",
            "read -P 0xab 4000 100k",
            "read -P 0x17 40M 1M",
            "read -P 0x6e 8M 32M",
        ],
    );
    // Across a clean restart and across kill -9.
    s.stop();
    let s = Served::start(&dir);
    qio(
        &s,
        &[
            "read -P 0x5c 1000 3000",
            "read -P 0x17 40M 1M",
            "write -P 0x33 8M 512k",
        ],
    );
    s.kill9();
    let s = Served::start(&dir);
    qio(
        &s,
        &[
            "read -P 0xab 4000 100k",
            "read -P 0x33 8M 512k",
            "read -P 0x6e 8704k 32256k",
        ],
    );
    // nbdcopy round trip of a random image.
    let img = dir.join("img.bin");
    let mut rng = Rng::new(4);
    let bytes: Vec<u8> = (0..16 << 20).map(|_| rng.next_u64() as u8).collect();
    std::fs::write(&img, &bytes).unwrap();
    run(Command::new("nbdcopy").arg(&img).arg(s.uri()));
    let back = dir.join("back.bin");
    run(Command::new("nbdcopy").arg(s.uri()).arg(&back));
    let back_bytes = std::fs::read(&back).unwrap();
    assert_eq!(back_bytes.len(), 64 << 20);
    assert!(
        back_bytes[..16 << 20] == bytes[..],
        "nbdcopy round trip differs"
    );
    // fio: mixed random reads and writes with verification.
    // fio writes its verify state file to its working directory.
    let out = run(Command::new("fio").current_dir(&dir).args([
        "--name=verify",
        "--ioengine=nbd",
        &format!("--uri={}", s.uri()),
        "--rw=randrw",
        "--rwmixread=50",
        "--bs=4k",
        "--iodepth=16",
        "--size=16M",
        "--offset=24M",
        "--verify=crc32c",
        "--do_verify=1",
        "--verify_fatal=1",
    ]));
    assert!(out.contains("err= 0"), "{out}");
    // fio's trims (after which a block reads as undefined, here as its
    // home copy), through cache devices that discard what they drop; data
    // outside the trimmed range stays.
    let out = run(Command::new("fio").current_dir(&dir).args([
        "--name=trim",
        "--ioengine=nbd",
        &format!("--uri={}", s.uri()),
        "--rw=randtrim",
        "--bs=64k",
        "--size=16M",
        "--offset=24M",
    ]));
    assert!(out.contains("err= 0"), "{out}");
    qio(&s, &["read -P 0x17 40M 1M", "flush"]);
    run(Command::new("nbdcopy").arg(s.uri()).arg(&back));
    let back_bytes = std::fs::read(&back).unwrap();
    assert!(back_bytes[..16 << 20] == bytes[..], "the image changed");
    s.stop();
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
    let discards = log
        .lines()
        .find_map(|l| l.strip_prefix("tiermux: ")?.split_once(" discards freed "))
        .and_then(|(n, _)| n.parse::<u64>().ok());
    assert!(
        discards.is_some_and(|n| n > 0),
        "no discards at exit:\n{log}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Protocol conformance with libnbd's Python binding (`nbd/conformance.py`):
/// FUA on every command, write-zeroes and trim above the 32 MiB request
/// limit, zeros read back, FAST_ZERO refused with ENOTSUP.
#[test]
fn libnbd_conformance() {
    if !have_tools(&["nbdsh"]) {
        return;
    }
    let dir = data_dir("conformance");
    let s = Served::start(&dir);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nbd/conformance.py");
    let out = run(Command::new("/usr/bin/python3").arg(&script).arg(s.uri()));
    assert!(out.contains("conformance ok"), "{out}");
    s.stop();
    std::fs::remove_dir_all(&dir).ok();
}

/// The configuration of a server whose cache device fails as `faults` (a
/// TOML table body) says, in `write_mode`.
fn failing_cache_config(write_mode: &str, faults: &str) -> String {
    format!(
        r#"
size = "8MiB"
listen = "unix:nbd.sock"
[[device]]
name = "fast"
path = "fast.img"
size = "1MiB"
[device.faults]
{faults}
[[device]]
name = "slow"
path = "slow.img"
[policy]
name = "classic"
write_mode = "{write_mode}"
"#
    )
}

/// Injected errors on the real server's cache device
/// (`[device.faults]`): write-through fails no request and returns only
/// data written; a write-back cache that dies is taken out of service, its
/// blocks at risk are reported, and no read returns wrong data. The
/// server's summary at exit counts all of it.
#[test]
fn a_failing_cache_device_never_returns_wrong_data() {
    if !have_tools(&["nbdsh"]) {
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nbd/errors.py");
    let runs = [
        ("wt", "read_error_rate = 0.05\nwrite_error_rate = 0.05", "spared"),
        ("wb", "read_error_rate = 1.0\nwrite_error_rate = 1.0\nsync_error_rate = 1.0\nstart_after_ops = 3000", "degraded"),
    ];
    for (i, (wm, faults, mode)) in runs.iter().enumerate() {
        let dir = data_dir(&format!("errors{i}"));
        std::fs::write(dir.join("volume.toml"), failing_cache_config(wm, faults)).unwrap();
        let s = Served::start(&dir);
        let size = (8 << 20).to_string();
        let out = run(Command::new("/usr/bin/python3")
            .arg(&script)
            .args([&s.uri(), &size, *mode]));
        assert!(out.contains("errors ok"), "{out}");
        s.stop();
        let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
        let summary = log
            .lines()
            .find(|l| l.contains("device errors:"))
            .unwrap_or_else(|| panic!("{wm}: no device error summary in:\n{log}"));
        println!("{wm}: {out}{summary}");
        if *mode == "spared" {
            assert!(
                summary.contains(" 0 requests answered with an error"),
                "{summary}"
            );
            assert!(!summary.contains(" 0 block reads tried again"), "{summary}");
        } else {
            assert!(
                summary.contains("device 'fast' out of service"),
                "{summary}"
            );
            assert!(log.contains("taken out of service"), "{log}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// TCP on loopback: the server reports the port it bound, and two clients
/// at once write and read back their own ranges.
#[test]
fn tcp_clients_read_what_they_wrote() {
    if !have_tools(&["nbdinfo", "qemu-io"]) {
        return;
    }
    let dir = data_dir("tcp");
    let cfg = CONFIG.replace("listen = \"unix:nbd.sock\"", "listen = \"tcp:127.0.0.1:0\"");
    assert_ne!(cfg, CONFIG);
    std::fs::write(dir.join("volume.toml"), cfg).unwrap();
    let (served, line) = Served::spawn(&dir);
    let addr = line
        .strip_prefix("tiermux: listening on tcp:")
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("server said: {line}"))
        .to_string();
    assert!(!addr.ends_with(":0"), "the bound port is reported: {addr}");
    let uri = format!("nbd://{addr}/tiermux");
    let info = run(Command::new("nbdinfo").arg(&uri));
    assert!(info.contains("67108864"), "{info}");
    let clients: Vec<Child> = [(0x21, "0"), (0x7e, "8M")]
        .iter()
        .map(|(pattern, offset)| {
            Command::new("qemu-io")
                .args(["-f", "raw", &uri])
                .args(["-c", &format!("write -P {pattern:#x} {offset} 2M")])
                .args(["-c", &format!("read -P {pattern:#x} {offset} 2M")])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in clients {
        let out = c.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("read 2097152/2097152"), "{text}");
        assert!(!text.contains("Pattern verification failed"), "{text}");
    }
    served.stop();
    std::fs::remove_dir_all(&dir).ok();
}

/// A client that sends many large reads and never reads the replies: the
/// server stops reading from it at its per-connection limits, so its memory
/// stays bounded, and it serves another client meanwhile; every reply
/// arrives once the first client reads.
#[test]
fn a_client_that_never_reads_its_replies_gets_back_pressure() {
    let dir = data_dir("noread");
    let s = Served::start(&dir);
    let pid = s.child.id();
    let (n, len) = (400u64, 4u32 << 20);
    let mut a = connect(&s.sock());
    let mut a_writer = a.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        for i in 0..n {
            let offset = (i * len as u64) % (60 << 20);
            a_writer.write_all(&request(0, 0, i, offset, len)).unwrap();
        }
    });
    std::thread::sleep(Duration::from_secs(3));
    // Another client is served while the first one stalls.
    let mut b = connect(&s.sock());
    b.write_all(&request(0, 0, 7, 0, 4096)).unwrap();
    let (handle, err, _) = reply(&mut b, 4096).unwrap();
    assert_eq!((handle, err), (7, 0));
    // The replies asked for are 1.6 GiB; the server holds at most 64 MiB
    // for the connection, plus one request and its receive buffer.
    let peak_kib = peak_memory_kib(pid);
    assert!(peak_kib < 320 << 10, "server peak memory {peak_kib} KiB");
    let mut seen = vec![false; n as usize];
    for _ in 0..n {
        let (handle, err, data) = reply(&mut a, len as usize).unwrap();
        assert_eq!((err, data.len()), (0, len as usize));
        assert!(
            !std::mem::replace(&mut seen[handle as usize], true),
            "reply {handle} twice"
        );
    }
    sender.join().unwrap();
    println!(
        "never-reading client: server peak memory {} MiB",
        peak_kib >> 10
    );
    s.stop();
    std::fs::remove_dir_all(&dir).ok();
}

const BS: usize = 4096;
const CRASH_BLOCKS: u64 = 2048;

fn stamp(block: u64, seq: u64) -> Vec<u8> {
    let mut b = vec![(seq % 251) as u8; BS];
    b[0..8].copy_from_slice(&block.to_le_bytes());
    b[8..16].copy_from_slice(&seq.to_le_bytes());
    b
}

#[test]
fn no_acknowledged_write_is_lost_over_200_crashes() {
    for (name, config) in configs() {
        survives_200_crashes(name, &data_dir_with(&format!("crash-{name}"), &config));
    }
}

/// Writes with up to 16 in flight, kill -9 at a random moment, 200 times;
/// every block must hold its last acknowledged write or one in flight.
fn survives_200_crashes(name: &str, dir: &Path) {
    let dir = dir.to_path_buf();
    let mut rng = Rng::new(2026);
    // Per block: the last acknowledged sequence number and the sequence
    // numbers in flight when the server was killed.
    let mut acked: Vec<u64> = vec![0; CRASH_BLOCKS as usize];
    let mut uncertain: Vec<Vec<u64>> = vec![Vec::new(); CRASH_BLOCKS as usize];
    let mut seq = 0u64;
    let (mut checked, mut lost, mut acks_total) = (0u64, 0u64, 0u64);
    let crashes = 200;
    for round in 0..crashes {
        let s = Served::start(&dir);
        // Verify everything written so far (the reads pipelined).
        let written: Vec<u64> = (0..CRASH_BLOCKS)
            .filter(|&b| acked[b as usize] > 0 || !uncertain[b as usize].is_empty())
            .collect();
        let contents = read_blocks(&s.sock(), &written, BS as u32);
        for (&b, data) in written.iter().zip(&contents) {
            let got_block = u64::from_le_bytes(data[0..8].try_into().unwrap());
            let got_seq = u64::from_le_bytes(data[8..16].try_into().unwrap());
            let whole = *data == stamp(got_block, got_seq) || data.iter().all(|&x| x == 0);
            let a = acked[b as usize];
            let ok = if got_seq == a && whole && (a == 0 || got_block == b) {
                true
            } else {
                // Only a write in flight at the crash may have replaced it.
                uncertain[b as usize].contains(&got_seq)
            };
            if a > 0 || !ok {
                checked += 1;
            }
            if !ok {
                lost += 1;
                eprintln!("round {round}: block {b} holds seq {got_seq}, last acknowledged {a}");
            } else {
                acked[b as usize] = got_seq;
            }
            uncertain[b as usize].clear();
        }
        // Write with up to 16 in flight until the server is killed.
        let mut c = connect(&s.sock());
        let mut reader = c.try_clone().unwrap();
        let inflight = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashMap::<
            u64,
            (u64, u64),
        >::new()));
        let acks = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(u64, u64)>::new()));
        let (inf2, acks2) = (inflight.clone(), acks.clone());
        let rd = std::thread::spawn(move || {
            while let Ok((h, err, _)) = reply(&mut reader, 0) {
                if let Some((b, sq)) = inf2.lock().unwrap().remove(&h) {
                    if err == 0 {
                        acks2.lock().unwrap().push((b, sq));
                    }
                }
            }
        });
        let kill_after = Duration::from_micros(2_000 + rng.below(40_000));
        let t0 = Instant::now();
        let mut handle = 0u64;
        while t0.elapsed() < kill_after {
            if inflight.lock().unwrap().len() >= 16 {
                std::thread::yield_now();
                continue;
            }
            handle += 1;
            if rng.below(50) == 0 {
                let _ = c.write_all(&request(3, 0, handle, 0, 0));
                continue;
            }
            let b = rng.below(CRASH_BLOCKS);
            seq += 1;
            inflight.lock().unwrap().insert(handle, (b, seq));
            let mut msg = request(1, 0, handle, b * BS as u64, BS as u32);
            msg.extend(stamp(b, seq));
            if c.write_all(&msg).is_err() {
                break;
            }
        }
        s.kill9();
        let _ = c.shutdown(std::net::Shutdown::Both);
        rd.join().unwrap();
        for (b, sq) in acks.lock().unwrap().drain(..) {
            acks_total += 1;
            if sq > acked[b as usize] {
                acked[b as usize] = sq;
            }
        }
        for (_, (b, sq)) in inflight.lock().unwrap().drain() {
            uncertain[b as usize].push(sq);
        }
        // An acknowledged write older than one in flight is still required
        // unless that newer write landed.
        for (b, u) in uncertain.iter_mut().enumerate() {
            u.retain(|&sq| sq > acked[b]);
        }
    }
    println!("crash test ({name}): {crashes} crash points, {acks_total} acknowledged writes, {checked} block checks, {lost} lost acknowledged writes");
    assert!(acks_total > 10_000, "too few writes: {acks_total}");
    assert_eq!(lost, 0);
    std::fs::remove_dir_all(&dir).ok();
}

/// What the power-cut test knows about a block: every sequence number
/// written to it, and the newest one that must have survived.
#[derive(Clone, Default)]
struct BlockHistory {
    written: Vec<u64>,
    durable: u64,
}

/// Reads every block written so far after a power cut: each holds zeros or
/// a whole stamp of its own, no older than its durable write; returns how
/// many blocks were checked. What it holds becomes durable (recovery syncs
/// the devices before it serves).
fn check_after_power_cut(s: &Served, blocks: &mut [BlockHistory], round: usize) -> u64 {
    let written: Vec<u64> = (0..blocks.len() as u64)
        .filter(|&b| !blocks[b as usize].written.is_empty())
        .collect();
    let contents = read_blocks(&s.sock(), &written, BS as u32);
    for (&b, data) in written.iter().zip(&contents) {
        let h = &mut blocks[b as usize];
        let got = if data.iter().all(|&x| x == 0) {
            0
        } else {
            let seq = u64::from_le_bytes(data[8..16].try_into().unwrap());
            assert!(
                *data == stamp(b, seq) && h.written.contains(&seq),
                "round {round}: block {b} holds data never written to it"
            );
            seq
        };
        assert!(
            got >= h.durable,
            "round {round}: block {b} holds {got}, older than its durable write {}",
            h.durable
        );
        h.durable = got;
    }
    written.len() as u64
}

/// What a request of the power-cut test was: a write (block, seq, fua),
/// or a flush with the number of replies received before it was sent.
type Sent = std::collections::HashMap<u64, Result<(u64, u64, bool), usize>>;

/// Applies a round's replies (in arrival order) to the blocks' durable
/// writes: a completed flush makes durable every write whose reply the
/// client had received before sending it (the server had sent those
/// replies before it received the flush); a FUA write is durable when
/// acknowledged. Returns the flushes completed and the writes made durable.
fn note_durable(replies: &[(u64, u32)], sent: &Sent, blocks: &mut [BlockHistory]) -> (u64, u64) {
    let (mut flushes, mut durable_acks) = (0, 0);
    let mut make_durable = |b: u64, sq: u64| {
        let d = &mut blocks[b as usize].durable;
        *d = (*d).max(sq);
        durable_acks += 1;
    };
    for &(h, err) in replies {
        match sent[&h] {
            Ok((b, sq, true)) if err == 0 => make_durable(b, sq),
            Err(before) if err == 0 => {
                flushes += 1;
                for &(wh, werr) in &replies[..before] {
                    if let (Ok((b, sq, _)), 0) = (sent[&wh], werr) {
                        make_durable(b, sq);
                    }
                }
            }
            _ => {}
        }
    }
    (flushes, durable_acks)
}

/// Power cuts on real files: `tiermux serve --simulate-power-loss` keeps
/// the writes not yet synced apart and, on SIGUSR1, drops, keeps or tears
/// each of them on the real device and journal files and exits, in the
/// middle of a write-back workload with flushes and FUA writes. After each
/// of 100 cuts every block written reads back a whole write of its own, no
/// older than the last one acknowledged before a completed flush or with
/// FUA.
#[test]
fn flushed_writes_survive_100_power_cuts_on_real_files() {
    let dir = data_dir("powercut");
    let mut rng = Rng::new(4242);
    let mut blocks = vec![BlockHistory::default(); CRASH_BLOCKS as usize];
    let mut seq = 0u64;
    let (mut checked, mut durable_acks, mut flushes) = (0u64, 0u64, 0u64);
    let rounds = 100;
    for round in 0..rounds {
        let (mut s, line) = Served::spawn_with(&dir, &["--simulate-power-loss", "power.state"]);
        assert!(line.contains("listening on unix:"), "server said: {line}");
        checked += check_after_power_cut(&s, &mut blocks, round);
        let mut c = connect(&s.sock());
        let mut reader = c.try_clone().unwrap();
        // Replies in arrival order: (handle, error).
        let replies = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(u64, u32)>::new()));
        let replies2 = replies.clone();
        let rd = std::thread::spawn(move || {
            while let Ok((h, err, _)) = reply(&mut reader, 0) {
                replies2.lock().unwrap().push((h, err));
            }
        });
        let mut sent = Sent::default();
        let cut_after = Duration::from_micros(3_000 + rng.below(30_000));
        let t0 = Instant::now();
        let mut handle = 0u64;
        while t0.elapsed() < cut_after {
            if sent.len() as u64 - replies.lock().unwrap().len() as u64 >= 16 {
                std::thread::yield_now();
                continue;
            }
            handle += 1;
            if rng.below(30) == 0 {
                sent.insert(handle, Err(replies.lock().unwrap().len()));
                let _ = c.write_all(&request(3, 0, handle, 0, 0));
                continue;
            }
            let b = rng.below(CRASH_BLOCKS);
            seq += 1;
            let fua = rng.below(10) == 0;
            blocks[b as usize].written.push(seq);
            sent.insert(handle, Ok((b, seq, fua)));
            let mut msg = request(1, u16::from(fua), handle, b * BS as u64, BS as u32);
            msg.extend(stamp(b, seq));
            if c.write_all(&msg).is_err() {
                break;
            }
        }
        Command::new("kill")
            .args(["-USR1", &s.child.id().to_string()])
            .status()
            .unwrap();
        let status = s.child.wait().unwrap();
        assert_eq!(
            status.code(),
            Some(86),
            "round {round}: the server did not cut the power: {status}"
        );
        let _ = c.shutdown(std::net::Shutdown::Both);
        rd.join().unwrap();
        let (f, d) = note_durable(&replies.lock().unwrap(), &sent, &mut blocks);
        flushes += f;
        durable_acks += d;
    }
    let s = Served::start(&dir);
    checked += check_after_power_cut(&s, &mut blocks, rounds);
    s.stop();
    println!("power cuts on real files: {rounds} cuts, {flushes} flushes, {durable_acks} durable write acknowledgements, {checked} block checks, 0 lost, 0 foreign");
    assert!(
        flushes > 100 && durable_acks > 1000,
        "too little was made durable"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A client that writes and reads back its own blocks (1000 to 1099) until
/// `stop`, asserting every reply; returns its write-read rounds.
fn spawn_bystander(
    sock: PathBuf,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut c = connect(&sock);
        let mut rounds = 0u64;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let block = 1000 + rounds % 100;
            let w = [request(1, 0, 1, block * 4096, 4096), stamp(block, rounds)].concat();
            c.write_all(&w).unwrap();
            assert_eq!(reply(&mut c, 0).unwrap().1, 0, "bystander write");
            c.write_all(&request(0, 0, 2, block * 4096, 4096)).unwrap();
            let (_, err, data) = reply(&mut c, 4096).unwrap();
            assert_eq!((err, data), (0, stamp(block, rounds)), "bystander read");
            rounds += 1;
        }
        rounds
    })
}

/// Opens `n` connections that never handshake, and returns the server's
/// thread count while they are open (the handshake pool bounds it).
fn threads_under_stalled_handshakes(s: &Served, n: usize) -> u64 {
    let stalled: Vec<UnixStream> = (0..n)
        .map(|_| UnixStream::connect(s.sock()).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let status = std::fs::read_to_string(format!("/proc/{}/status", s.child.id())).unwrap();
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    drop(stalled);
    threads
}

#[test]
fn malformed_traffic_gets_errors_and_never_stops_the_server() {
    let dir = data_dir("fuzz");
    let s = Served::start(&dir);
    let mut rng = Rng::new(77);
    let size = 64u64 << 20;
    // A well-behaved client writes and reads back its own blocks all along.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let bystander = spawn_bystander(s.sock(), stop.clone());
    let mut malformed = 0u64;
    for i in 0..200 {
        let mut c = connect(&s.sock());
        let mut expect_replies = 0;
        let mut msg = Vec::new();
        for j in 0..rng.below(20) {
            let handle = (i << 16) | j;
            match rng.below(8) {
                // Out of range, oversized, unknown commands, bad flags.
                0 => msg.extend(request(0, 0, handle, size - 100 + rng.below(200), 4096)),
                1 => msg.extend(request(
                    0,
                    0,
                    handle,
                    0,
                    (64 << 20) + rng.below(1000) as u32,
                )),
                2 => msg.extend(request(9 + rng.below(100) as u16, 0, handle, 0, 0)),
                3 => msg.extend(request(0, 1 << rng.below(16), handle, 0, 512)),
                4 => {
                    // An oversized write whose payload must be skipped.
                    let len = (32 << 20) + 1 + rng.below(4096) as u32;
                    msg.extend(request(1, 0, handle, 0, len));
                    msg.extend(vec![0u8; len as usize]);
                }
                5 => msg.extend(request(4, 0, handle, size + rng.below(10), 1)),
                _ => msg.extend(request(
                    0,
                    0,
                    handle,
                    rng.below(size - 4096),
                    1 + rng.below(4096) as u32,
                )),
            }
            expect_replies += 1;
            malformed += 1;
        }
        // Half the connections end with garbage that breaks framing.
        let garbage = i % 2 == 1;
        if garbage {
            msg.extend((0..1 + rng.below(64)).map(|_| rng.next_u64() as u8));
        }
        c.write_all(&msg).unwrap();
        let mut got = 0;
        let mut buf = Vec::new();
        // Count error/ok replies (reads of valid ranges carry data).
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        if !garbage {
            c.write_all(&request(2, 0, 0, 0, 0)).unwrap();
        }
        // End of input: a partial header left by the garbage ends there.
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let _ = c.read_to_end(&mut buf);
        let mut p = 0;
        while p + 16 <= buf.len() {
            assert_eq!(
                u32::from_be_bytes(buf[p..p + 4].try_into().unwrap()),
                0x6744_6698,
                "reply framing"
            );
            got += 1;
            let err = u32::from_be_bytes(buf[p + 4..p + 8].try_into().unwrap());
            p += 16;
            if err == 0 {
                // Find the request's length from the handle: valid reads only.
                // Only valid reads succeed; their length is in the request
                // with this handle.
                let handle = u64::from_be_bytes(buf[p - 8..p].try_into().unwrap());
                let mut q = 0;
                let mut len = 0;
                while q + 28 <= msg.len() {
                    let h = u64::from_be_bytes(msg[q + 8..q + 16].try_into().unwrap());
                    let kind = u16::from_be_bytes(msg[q + 6..q + 8].try_into().unwrap());
                    let l = u32::from_be_bytes(msg[q + 24..q + 28].try_into().unwrap());
                    if h == handle {
                        len = if kind == 0 { l as usize } else { 0 };
                        break;
                    }
                    q += 28 + if kind == 1 { l as usize } else { 0 };
                }
                p += len;
            }
        }
        if !garbage {
            assert_eq!(
                got, expect_replies,
                "connection {i}: every request gets a reply"
            );
        }
    }
    // Garbage right after connecting, during the handshake.
    for _ in 0..50 {
        let mut c = UnixStream::connect(s.sock()).unwrap();
        let junk: Vec<u8> = (0..rng.below(200)).map(|_| rng.next_u64() as u8).collect();
        let _ = c.write_all(&junk);
        let _ = c.shutdown(std::net::Shutdown::Write);
        malformed += 1;
    }
    // A flood of connections that never handshake costs a bounded number
    // of threads (the handshake pool), not one each.
    let threads = threads_under_stalled_handshakes(&s, 400);
    assert!(
        threads < 40,
        "{threads} threads with 400 stalled handshakes"
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds = bystander
        .join()
        .expect("the bystander saw only correct replies");
    println!("{malformed} malformed messages, {threads} server threads under 400 stalled handshakes, {rounds} bystander write-read rounds");
    assert!(malformed >= 1000 && rounds > 0);
    // The server still serves.
    let mut c = connect(&s.sock());
    c.write_all(&[request(1, 1, 1, 8192, 4096), stamp(2, 9)].concat())
        .unwrap();
    assert_eq!(reply(&mut c, 0).unwrap().1, 0);
    c.write_all(&request(0, 0, 2, 8192, 4096)).unwrap();
    assert_eq!(reply(&mut c, 4096).unwrap().2, stamp(2, 9));
    s.stop();
    std::fs::remove_dir_all(&dir).ok();
}

/// A small bench: each device alone, classic and NHC at two levels, the
/// simulator's prediction and the nbdkit comparison, through the real
/// command. Speeds are not asserted (this machine is shared); the shape of
/// the report and the measured hit ratio, which the working-set sizing and
/// fio's per-run offsets decide, are.
#[test]
fn bench_reports_every_section() {
    if !have_tools(&["fio", "nbdkit"]) {
        return;
    }
    let dir = data_dir("bench");
    std::fs::create_dir_all(&dir).unwrap();
    let default = include_str!("../../../experiments/bench/optane-flash.toml");
    let small = default
        .replace("cache_size = \"256MiB\"", "cache_size = \"8MiB\"")
        .replace("volume_size = \"1GiB\"", "volume_size = \"32MiB\"")
        .replace(
            "[reference]\nsize = \"1GiB\"",
            "[reference]\nsize = \"16MiB\"",
        )
        .replace("sim_duration_s = 60.0", "sim_duration_s = 2.0")
        .replace("sim_warmup_s = 58.0", "sim_warmup_s = 1.0");
    assert_ne!(small, default);
    assert!(
        small.contains("sim_duration_s = 2.0") && small.contains("sim_warmup_s = 1.0"),
        "the bench file's simulated times changed: shorten them here again"
    );
    let file = dir.join("small.toml");
    std::fs::write(&file, small).unwrap();
    let out_dir = dir.join("out");
    let text = run(Command::new(env!("CARGO_BIN_EXE_tiermux")).args([
        "bench",
        file.to_str().unwrap(),
        "--levels",
        "1,32",
        "--runtime-s",
        "1",
        // As long as the run: a run replaying its ramp's offsets would
        // hit almost always.
        "--ramp-s",
        "1",
        "--data-dir",
        dir.join("data").to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]));
    for needle in [
        "## Each device alone",
        "Physical limit (sum of the two peaks)",
        "## read-only: 100 % reads",
        "## read-mostly: 95 % reads",
        "## Acceptance",
        "32 in flight, read-only: NHC / classic",
        "1 in flight, read-only: NHC differs from classic",
        "| 1 | tiermux serve |",
        "| 16 | nbdkit file |",
    ] {
        assert!(text.contains(needle), "missing '{needle}' in:\n{text}");
    }
    let md = std::fs::read_to_string(out_dir.join("bench.md")).unwrap();
    assert!(md.contains("## Acceptance"));
    let csv = std::fs::read_to_string(out_dir.join("bench.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|c| *c == name).unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    // 2 devices x 2 workloads x 2 levels, 2 policies x 2 workloads x 2
    // levels, 3 servers x 2 levels.
    let count = |section: &str| rows.iter().filter(|r| r[0] == section).count();
    assert_eq!(
        (count("device"), count("policy"), count("reference")),
        (8, 8, 6)
    );
    for r in rows.iter().filter(|r| r[0] != "reference") {
        let ops: f64 = r[col("ops_per_s")].parse().unwrap();
        assert!(ops > 100.0, "{r:?}");
    }
    // Uniform reads over cache / 0.95 hit 95 % once the cache is full; a
    // run that replayed its ramp's offsets would show more.
    for r in rows.iter().filter(|r| r[0] == "policy") {
        let hit: f64 = r[col("hit_ratio")].parse().unwrap();
        assert!((0.93..0.97).contains(&hit), "hit ratio {hit}: {r:?}");
        assert!(r[col("sim_ops_per_s")].parse::<f64>().unwrap() > 100.0);
    }
    // The data directory is removed afterwards.
    assert!(!dir.join("data").exists());
    std::fs::remove_dir_all(&dir).ok();
}

/// The Hibachi paper's method: the writes a cache sends to storage, logged
/// by `tiermux replay --flush-log`, replayed by fio through NBD onto a
/// volume whose device emulates the paper's RAID-5 array; fio finishes
/// and reports the throughput.
#[test]
fn a_flush_log_replays_through_nbd_on_an_emulated_array() {
    if !have_tools(&["fio"]) {
        return;
    }
    let config = r#"
size = "1GiB"
listen = "unix:nbd.sock"

[[device]]
name = "array"
path = "array.img"
array = "raid5-hibachi"

[policy]
name = "passthrough"
"#;
    let dir = data_dir_with("iolog", config);
    let trace =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/synthetic/wdev_0-50k.msr.zst");
    run(Command::new(env!("CARGO_BIN_EXE_tiermux")).args([
        "replay",
        trace.to_str().unwrap(),
        "--format",
        "msr",
        "--policy",
        "hibachi",
        "--dram-share",
        "0.5",
        "--cache-pages",
        "4096",
        "--flush-log",
        dir.join("flush").to_str().unwrap(),
    ]));
    let log = std::fs::read_to_string(dir.join("flush.4096")).unwrap();
    let writes: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("array write "))
        .collect();
    assert!(writes.len() > 1000, "{} storage writes", writes.len());
    // The first 200 writes, to keep the emulated disks' time short.
    let head = format!(
        "fio version 2 iolog\narray add\narray open\n{}\narray close\n",
        writes[..200].join("\n")
    );
    std::fs::write(dir.join("head.iolog"), head).unwrap();
    let s = Served::start(&dir);
    let out = run(Command::new("fio").current_dir(&dir).args([
        "--name=replay",
        "--ioengine=nbd",
        &format!("--uri={}", s.uri()),
        "--read_iolog=head.iolog",
    ]));
    assert!(
        out.contains("err= 0") && out.contains("write: IOPS="),
        "{out}"
    );
    let bw = out.lines().find(|l| l.contains("WRITE: bw=")).unwrap_or("");
    println!(
        "flush-log replay through NBD on the emulated array: {}",
        bw.trim()
    );
    s.stop();
    std::fs::remove_dir_all(&dir).ok();
}
