//! Reading ahead of sequential reads, over the raw protocol: a client that
//! reads a range one request at a time is answered from the server's read
//! ahead, and no read ever returns data older than a write, write-zeroes
//! or trim acknowledged before the read was sent, whichever connection
//! wrote and whether the read ahead was still running or done.

use std::io::Write;
use std::os::unix::net::UnixStream;

use tiermux_core::rng::Rng;

use crate::common::nbd_served;
use crate::common::nbd_wire;
use nbd_served::*;
use nbd_wire::{chunk, connect_with, reply, request};

const READ: u16 = 0;
const WRITE: u16 = 1;
const WRITE_ZEROES: u16 = 6;

/// Reads `len` bytes at `offset` on `c`, with simple or structured replies.
fn read(c: &mut UnixStream, structured: bool, handle: u64, offset: usize, len: usize) -> Vec<u8> {
    c.write_all(&request(READ, 0, handle, offset as u64, len as u32))
        .unwrap();
    read_reply(c, structured, handle, offset, len)
}

/// The reply to read `handle` of `len` bytes at `offset`: its data.
fn read_reply(
    c: &mut UnixStream,
    structured: bool,
    handle: u64,
    offset: usize,
    len: usize,
) -> Vec<u8> {
    if !structured {
        let (h, err, data) = reply(c, len).unwrap();
        assert_eq!((h, err), (handle, 0), "read at {offset}");
        return data;
    }
    let mut data = vec![0u8; len];
    loop {
        let ch = chunk(c).unwrap();
        assert_eq!((ch.handle, ch.error), (handle, 0), "read at {offset}");
        if let Some(o) = ch.offset {
            let at = o as usize - offset;
            data[at..at + ch.data.len()].copy_from_slice(&ch.data);
        }
        if ch.done {
            return data;
        }
    }
}

/// Reads `len` bytes at `offset` on `c` right after a write (handle
/// `write_handle`) whose reply is still to come: the write's reply comes
/// first (the volume orders the read after it), then the read's.
fn read_after_write(
    c: &mut UnixStream,
    structured: bool,
    write_handle: u64,
    offset: usize,
    len: usize,
) -> Vec<u8> {
    c.write_all(&request(
        READ,
        0,
        write_handle + 1,
        offset as u64,
        len as u32,
    ))
    .unwrap();
    let (h, err, _) = reply(c, 0).unwrap();
    assert_eq!((h, err), (write_handle, 0), "write at {offset}");
    read_reply(c, structured, write_handle + 1, offset, len)
}

/// Sends a write of `data` (or, with `None`, a write-zeroes of `len`
/// bytes) at `offset` on `c` and waits for its acknowledgement.
fn write(c: &mut UnixStream, handle: u64, offset: usize, data: Option<&[u8]>, len: usize) {
    let msg = match data {
        Some(d) => [
            request(WRITE, 0, handle, offset as u64, len as u32),
            d.to_vec(),
        ]
        .concat(),
        None => request(WRITE_ZEROES, 0, handle, offset as u64, len as u32),
    };
    c.write_all(&msg).unwrap();
    let (h, err, _) = reply(c, 0).unwrap();
    assert_eq!((h, err), (handle, 0), "write at {offset}");
}

/// One reader walks the volume in 128 KiB reads, one at a time, with
/// simple or structured replies; between its reads, a second connection
/// (or the reader itself) writes or zeroes ranges the next reads cover,
/// which the server has likely read ahead, and the reader sometimes jumps
/// elsewhere. Every read must return the model's bytes.
fn walk(name: &str, s: &Served, structured: bool, seed: u64, model: &mut [u8]) {
    let mut rng = Rng::new(seed);
    let mut reader = connect_with(&s.sock(), structured);
    let mut writer = connect_with(&s.sock(), false);
    let len = 128usize << 10;
    let span = model.len();
    let mut at = 0usize;
    let mut unacked: Option<(u64, usize, Vec<u8>)> = None;
    for step in 0..300u64 {
        let got = read(&mut reader, structured, step, at, len);
        if let Some(p) = (0..len).find(|&p| got[p] != model[at + p]) {
            panic!(
                "{name} (structured {structured}): step {step}: byte {} read {}, written {}",
                at + p,
                got[p],
                model[at + p]
            );
        }
        // A write sent before that read, to the range after it, is
        // acknowledged now, before the next read is sent. The read may have
        // started reading that range ahead while the write ran: submitted
        // after the write, the read ahead sees it.
        if let Some((handle, w_at, data)) = unacked.take() {
            let (h, err, _) = reply(&mut writer, 0).unwrap();
            assert_eq!((h, err), (handle, 0), "{name}: write at {w_at}");
            model[w_at..w_at + data.len()].copy_from_slice(&data);
        }
        at = (at + len) % span;
        // A range within the next two reads: a 4 KiB-aligned start and up
        // to 64 KiB, not past the end.
        let w_at = (at + 4096 * rng.below(2 * len as u64 / 4096) as usize).min(span - 4096);
        let w_len = (4096 * (1 + rng.below(16) as usize)).min(span - w_at);
        let handle = (1 << 32) | (step << 1);
        match rng.below(20) {
            0..=6 => {
                let data: Vec<u8> = (0..w_len).map(|_| rng.next_u64() as u8).collect();
                write(&mut writer, handle, w_at, Some(&data), w_len);
                model[w_at..w_at + w_len].copy_from_slice(&data);
            }
            7 | 8 => {
                write(&mut writer, handle, w_at, None, w_len);
                model[w_at..w_at + w_len].fill(0);
            }
            9 | 10 => {
                // The reader's own write, on its own connection.
                let data: Vec<u8> = (0..w_len).map(|_| rng.next_u64() as u8).collect();
                write(&mut reader, handle, w_at, Some(&data), w_len);
                model[w_at..w_at + w_len].copy_from_slice(&data);
            }
            11 | 12 => {
                // The reader's own write of the next read's first bytes,
                // sent together with that read: the volume orders the two,
                // so the read returns the write's data.
                let data: Vec<u8> = (0..4096).map(|_| rng.next_u64() as u8).collect();
                let msg = [request(WRITE, 0, handle, at as u64, 4096), data.clone()].concat();
                reader.write_all(&msg).unwrap();
                model[at..at + 4096].copy_from_slice(&data);
                let got = read_after_write(&mut reader, structured, handle, at, len);
                assert!(
                    got == model[at..at + len],
                    "{name}: a read sent after a write at {at}"
                );
                at = (at + len) % span;
            }
            13 | 14 if at + 2 * len <= span => {
                let w_at = at + len;
                let data: Vec<u8> = (0..4096).map(|_| rng.next_u64() as u8).collect();
                let msg = [request(WRITE, 0, handle, w_at as u64, 4096), data.clone()].concat();
                writer.write_all(&msg).unwrap();
                unacked = Some((handle, w_at, data));
            }
            15 => at = len * rng.below((span / len) as u64) as usize,
            _ => {}
        }
    }
}

/// How many client reads a stopped server answered from reads ahead (its
/// stop line in `serve.log`), and the log.
fn reads_answered_ahead(dir: &std::path::Path) -> (u64, String) {
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
    let answered = log
        .split(" reads ahead, ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no read-ahead count in {log}"));
    (answered, log)
}

#[test]
fn reads_ahead_never_overtake_an_acknowledged_write() {
    let plain = with_devices(
        "[[device]]\nname = \"disk\"\npath = \"disk.img\"\nprofile = \"slow-test\"\n\n[policy]\nname = \"passthrough\"\n\n",
    );
    let mut volumes = vec![("passthrough".to_string(), plain)];
    volumes.extend(configs().map(|(n, c)| (n.to_string(), c)));
    for (name, config) in volumes {
        let dir = data_dir_with(&format!("read-ahead-{name}"), &config);
        let s = Served::start(&dir);
        // The first 8 MiB of the 64 MiB volume, all zeros at first.
        let mut model = vec![0u8; 8 << 20];
        walk(&name, &s, true, 3, &mut model);
        walk(&name, &s, false, 4, &mut model);
        s.stop();
        let (answered, log) = reads_answered_ahead(&dir);
        // About half of the 600 reads follow a read of the range before
        // and find no write since (a third of the steps write).
        assert!(
            answered >= 150,
            "{name}: {answered} reads answered ahead: {log}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// An emulated device that fails 8 % of its block reads (each failed block
/// read is tried once more): a read ahead that fails answers nobody, and a
/// client read waiting for it (the device is slower than the client's turn
/// around) is carried out as any read. Sequential 128 KiB
/// reads with simple replies each either fail with EIO or return exactly
/// what was written; reads ahead keep answering between the failures.
#[test]
fn a_failed_read_ahead_answers_nobody_with_wrong_data() {
    let config = "read_ahead = true\n".to_string()
        + &with_devices(
            "[[device]]\nname = \"disk\"\npath = \"disk.img\"\nprofile = \"slow-test\"\n[device.faults]\nread_error_rate = 0.08\n\n[policy]\nname = \"passthrough\"\n\n",
        );
    let dir = data_dir_with("read-ahead-faults", &config);
    let s = Served::start(&dir);
    let mut rng = Rng::new(23);
    let span = 4usize << 20;
    let model: Vec<u8> = (0..span).map(|_| rng.next_u64() as u8).collect();
    let mut c = connect_with(&s.sock(), false);
    for (i, part) in model.chunks(1 << 20).enumerate() {
        write(&mut c, i as u64, i << 20, Some(part), part.len());
    }
    let len = 128usize << 10;
    let (mut good, mut failed) = (0, 0);
    for j in 0..(4 * span / len) {
        let at = j * len % span;
        c.write_all(&request(READ, 0, j as u64, at as u64, len as u32))
            .unwrap();
        let (h, err, data) = reply(&mut c, len).unwrap();
        assert_eq!(h, j as u64);
        if err == 0 {
            assert!(data == model[at..at + len], "read at {at}");
            good += 1;
        } else {
            assert_eq!(err, 5, "EIO");
            failed += 1;
        }
    }
    s.stop();
    let (answered, log) = reads_answered_ahead(&dir);
    println!("{good} reads returned data, {failed} failed, {answered} answered ahead");
    assert!(failed > 0 && good > 0, "{good} good, {failed} failed");
    assert!(answered > 40, "{answered} reads answered ahead: {log}");
    std::fs::remove_dir_all(&dir).ok();
}
