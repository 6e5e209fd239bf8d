//! Large NBD requests over the raw protocol (no client tools needed): a
//! write's payload that arrives in many small pieces, with pauses, is
//! received straight into its own buffer; a connection that ends in the
//! middle of a payload applies nothing of it; large unaligned writes merge
//! with the blocks around them; and large reads return exactly what was
//! written, whatever devices the blocks sit on. With structured replies,
//! large reads come back in chunks that cover the request exactly once,
//! and a piece whose device read fails is reported at its offset.

use std::io::Write;
use std::time::Duration;

use tiermux_core::rng::Rng;

use crate::common::nbd_served;
use crate::common::nbd_wire;
use nbd_served::*;
use nbd_wire::{chunk, connect, connect_asking, connect_with, reply, request, Chunk};

const WRITE: u16 = 1;
const READ: u16 = 0;

fn pattern(rng: &mut Rng, len: usize) -> Vec<u8> {
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

#[test]
fn large_payloads_in_pieces_and_cut_short_keep_every_byte_right() {
    for (name, config) in configs() {
        let dir = data_dir_with(&format!("large-{name}"), &config);
        let s = Served::start(&dir);
        let mut rng = Rng::new(5);
        // A model of the first 48 MiB: everything starts as zeros.
        let span = 48usize << 20;
        let mut model = vec![0u8; span];
        let mut c = connect(&s.sock());
        for (i, &(offset, len)) in [
            (0usize, 1usize << 20),      // aligned, 1 MiB
            (3 << 20, (5 << 20) + 4096), // aligned, over 5 MiB
            (12_345, 3 << 20),           // unaligned at both ends
            (16 << 20, 32 << 20),        // the largest request
        ]
        .iter()
        .enumerate()
        {
            let data = pattern(&mut rng, len);
            let msg = [
                request(WRITE, 0, i as u64, offset as u64, len as u32),
                data.clone(),
            ]
            .concat();
            // The first half in pieces of up to 64 KiB with pauses, then
            // the rest at once.
            let mut at = 0;
            while at < msg.len() / 2 {
                let n = (1 + rng.below(64 << 10) as usize).min(msg.len() - at);
                c.write_all(&msg[at..at + n]).unwrap();
                at += n;
                if rng.below(8) == 0 {
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
            c.write_all(&msg[at..]).unwrap();
            let (handle, err, _) = reply(&mut c, 0).unwrap();
            assert_eq!((handle, err), (i as u64, 0), "{name}: write {i}");
            model[offset..offset + len].copy_from_slice(&data);
        }
        // A connection that ends in the middle of a 4 MiB payload: none of
        // it is written.
        let mut cut = connect(&s.sock());
        let partial = pattern(&mut rng, 3 << 20);
        cut.write_all(&request(WRITE, 0, 99, 20 << 20, 4 << 20))
            .unwrap();
        cut.write_all(&partial).unwrap();
        drop(cut);
        std::thread::sleep(Duration::from_millis(50));
        // Every byte reads back as the model has it, in 4 MiB reads and in
        // reads across the written ranges' edges.
        let mut reads = vec![(0usize, 4usize << 20)];
        reads.extend((0..span / (4 << 20)).map(|k| (k * (4 << 20), 4 << 20)));
        reads.extend([
            (12_000, 9_000),
            ((3 << 20) - 100, 5 << 20),
            (span - 777, 777),
        ]);
        for (j, &(offset, len)) in reads.iter().enumerate() {
            c.write_all(&request(
                READ,
                0,
                1000 + j as u64,
                offset as u64,
                len as u32,
            ))
            .unwrap();
            let (_, err, got) = reply(&mut c, len).unwrap();
            assert_eq!(err, 0, "{name}: read at {offset}");
            let want = &model[offset..offset + len];
            if let Some(p) = (0..len).find(|&p| got[p] != want[p]) {
                panic!(
                    "{name}: byte {} read {}, written {}",
                    offset + p,
                    got[p],
                    want[p]
                );
            }
        }
        read_back_in_chunks(name, &s, &reads, &model);
        s.stop();
        let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
        assert!(
            !log.contains(" 0 device operations merged"),
            "{name}: no device operation merged blocks: {log}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// A structured reply to one read, checked against the protocol: every
/// chunk carries the request's handle, only the last is marked done, and
/// data and errors lie inside the request without overlapping.
struct Chunked {
    data: Vec<u8>,
    /// Which bytes a data chunk covered.
    covered: Vec<bool>,
    data_chunks: usize,
    /// Error chunks: offset (None for the whole request), errno, message.
    errors: Vec<(Option<u64>, u32, String)>,
}

fn read_chunked(
    c: &mut std::os::unix::net::UnixStream,
    handle: u64,
    offset: usize,
    len: usize,
    flags: u16,
) -> Chunked {
    c.write_all(&request(READ, flags, handle, offset as u64, len as u32))
        .unwrap();
    let mut r = Chunked {
        data: vec![0u8; len],
        covered: vec![false; len],
        data_chunks: 0,
        errors: Vec::new(),
    };
    let mut claimed = vec![false; len];
    loop {
        let ch: Chunk = chunk(c).unwrap();
        assert_eq!(ch.handle, handle);
        let span = match (ch.kind, ch.offset) {
            (1, Some(o)) => Some((o as usize - offset, ch.data.len())),
            (0x8002, Some(o)) => {
                r.errors.push((Some(o), ch.error, ch.message.clone()));
                None
            }
            (0x8001, None) => {
                r.errors.push((None, ch.error, ch.message.clone()));
                None
            }
            (0, None) => None,
            other => panic!("unexpected chunk {other:?}"),
        };
        if let Some((at, n)) = span {
            assert!(at + n <= len, "a chunk past the request");
            assert!(
                claimed[at..at + n].iter().all(|&b| !b),
                "overlapping chunks"
            );
            claimed[at..at + n].iter_mut().for_each(|b| *b = true);
            r.covered[at..at + n].iter_mut().for_each(|b| *b = true);
            r.data[at..at + n].copy_from_slice(&ch.data);
            r.data_chunks += 1;
        }
        if ch.done {
            return r;
        }
    }
}

/// The reads of the test above again, on a connection with structured
/// replies; a read asking for one chunk gets one; a read outside the
/// export gets one error chunk, and the connection goes on.
fn read_back_in_chunks(name: &str, s: &Served, reads: &[(usize, usize)], model: &[u8]) {
    let mut c = connect_with(&s.sock(), true);
    for (j, &(offset, len)) in reads.iter().enumerate() {
        let r = read_chunked(&mut c, 2000 + j as u64, offset, len, 0);
        assert!(r.errors.is_empty(), "{name}: {:?}", r.errors);
        assert!(r.covered.iter().all(|&b| b), "{name}: bytes not sent");
        assert!(
            r.data == model[offset..offset + len],
            "{name}: read at {offset}"
        );
        // Pieces of 256 KiB, longer for reads over 2 MiB (at most 8, one
        // more when unaligned); but a read of the range after two
        // sequential reads of its length was read ahead, and is answered
        // in one chunk.
        let piece = (256 << 10) * len.div_ceil(2 << 20).max(1);
        let pieces = (offset + len).div_ceil(piece) - offset / piece;
        let read_ahead = j >= 2
            && reads[j - 1] == (offset - len.min(offset), len)
            && reads[j - 2] == (offset.saturating_sub(2 * len), len)
            && offset >= 2 * len;
        let want = if read_ahead { 1 } else { pieces.max(1) };
        assert_eq!(r.data_chunks, want, "{name}: chunks at {offset}");
    }
    const DONT_FRAGMENT: u16 = 1 << 2;
    let r = read_chunked(&mut c, 3000, 12_345, 3 << 20, DONT_FRAGMENT);
    assert_eq!(r.data_chunks, 1, "{name}");
    assert!(r.data == model[12_345..12_345 + (3 << 20)], "{name}");
    let r = read_chunked(&mut c, 3001, 64 << 20, 4096, 0);
    assert_eq!(r.data_chunks, 0, "{name}");
    assert_eq!(r.errors.len(), 1, "{name}");
    assert!(r.errors[0].0.is_none() && r.errors[0].1 != 0, "{name}");
    assert!(r.errors[0].2.contains("outside"), "{name}: {:?}", r.errors);
    let r = read_chunked(&mut c, 3002, 0, 1 << 20, 0);
    assert!(r.errors.is_empty() && r.data == model[..1 << 20], "{name}");
}

/// A device that fails 8 % of its block reads (the volume tries a failed
/// block read once more, so about a third of the 64-block pieces fail),
/// under reads split into pieces: each piece is either sent whole and
/// right or reported failed at its own offset; the rest of the reply
/// still arrives.
#[test]
fn a_failed_piece_of_a_large_read_is_reported_at_its_offset() {
    // A plain file in memory: structured replies only when asked for.
    let config = "structured_replies = true\n".to_string()
        + &with_devices(
        "[[device]]\nname = \"disk\"\npath = \"disk.img\"\n[device.faults]\nread_error_rate = 0.08\n\n[policy]\nname = \"passthrough\"\n\n",
    );
    let dir = data_dir_with("large-faults", &config);
    let s = Served::start(&dir);
    let mut rng = Rng::new(11);
    let span = 8usize << 20;
    let model = pattern(&mut rng, span);
    let mut c = connect(&s.sock());
    for (i, part) in model.chunks(1 << 20).enumerate() {
        let at = i << 20;
        let msg = [
            request(WRITE, 0, i as u64, at as u64, 1 << 20),
            part.to_vec(),
        ]
        .concat();
        c.write_all(&msg).unwrap();
        assert_eq!(reply(&mut c, 0).unwrap().1, 0, "write {i}");
    }
    let mut c = connect_with(&s.sock(), true);
    let (mut sent, mut failed) = (0, 0);
    for j in 0..40u64 {
        let offset = rng.below((span - (2 << 20)) as u64) as usize;
        let len = (1 << 20) + rng.below(1 << 20) as usize;
        let r = read_chunked(&mut c, j, offset, len, 0);
        for p in 0..len {
            if r.covered[p] {
                assert_eq!(r.data[p], model[offset + p], "byte {}", offset + p);
            }
        }
        for (at, errno, _) in &r.errors {
            let at = at.expect("a piece's error has its offset") as usize;
            assert_eq!(*errno, 5, "EIO");
            assert!(at >= offset && at < offset + len);
            assert!(!r.covered[at - offset], "an error where data was sent");
        }
        // Every byte is either sent or in a failed piece.
        let piece = 256usize << 10;
        for p in 0..len {
            let first = ((offset + p) / piece * piece).max(offset);
            let reported = r.errors.iter().any(|e| e.0 == Some(first as u64));
            assert!(
                r.covered[p] != reported,
                "byte {} sent {} failed {}",
                offset + p,
                r.covered[p],
                reported
            );
        }
        sent += r.data_chunks;
        failed += r.errors.len();
    }
    println!("{sent} pieces sent, {failed} failed");
    assert!(
        sent > 40 && failed > 10,
        "{sent} pieces sent, {failed} failed"
    );
    s.stop();
    std::fs::remove_dir_all(&dir).ok();
}

/// Structured replies are offered only where a read can wait on a device:
/// not on a plain file in memory (unless the config asks), but on an
/// emulated device in memory. Refused, the client reads with simple
/// replies.
#[test]
fn structured_replies_are_offered_where_reads_wait_on_a_device() {
    let plain =
        "[[device]]\nname = \"disk\"\npath = \"disk.img\"\n\n[policy]\nname = \"passthrough\"\n\n";
    let emulated = plain.replace("disk.img\"\n", "disk.img\"\nprofile = \"slow-test\"\n");
    for (tag, config, want) in [
        ("plain", with_devices(plain), !in_memory()),
        (
            "asked",
            "structured_replies = true\n".to_string() + &with_devices(plain),
            true,
        ),
        ("emulated", with_devices(&emulated), true),
    ] {
        let dir = data_dir_with(&format!("offer-{tag}"), &config);
        let s = Served::start(&dir);
        let (mut c, agreed) = connect_asking(&s.sock(), true);
        assert_eq!(agreed, want, "{tag}");
        c.write_all(&request(READ, 0, 1, 0, 1 << 20)).unwrap();
        if agreed {
            let mut got = 0;
            loop {
                let ch = chunk(&mut c).unwrap();
                got += ch.data.len();
                if ch.done {
                    break;
                }
            }
            assert_eq!(got, 1 << 20, "{tag}");
        } else {
            let (_, err, data) = reply(&mut c, 1 << 20).unwrap();
            assert_eq!((err, data.len()), (0, 1 << 20), "{tag}");
        }
        s.stop();
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// Whether the test volumes' files are in memory (`data_dir_with` puts
/// them in /dev/shm when it exists).
fn in_memory() -> bool {
    std::path::Path::new("/dev/shm").is_dir()
}

/// Thousands of small reads sent at once by a client that reads no reply
/// until all are sent: the server's replies fill the socket, so its
/// vectored writes of many replies stop part-way through one (in its
/// header or its data) and go on later. Every reply arrives once, whole,
/// with the bytes of the blocks it asked for.
#[test]
fn pipelined_replies_that_fill_the_socket_arrive_whole() {
    const BLOCK: usize = 4096;
    const BLOCKS: usize = 2048;
    for (name, config) in configs() {
        let dir = data_dir_with(&format!("pipelined-{name}"), &config);
        let s = Served::start(&dir);
        let mut rng = Rng::new(11);
        let model = pattern(&mut rng, BLOCKS * BLOCK);
        let mut c = connect(&s.sock());
        let mut writer = c.try_clone().unwrap();
        let writes: Vec<u8> = (0..BLOCKS)
            .flat_map(|b| {
                let at = b * BLOCK;
                let head = request(WRITE, 0, b as u64, at as u64, BLOCK as u32);
                [head, model[at..at + BLOCK].to_vec()].concat()
            })
            .collect();
        let sender = std::thread::spawn(move || writer.write_all(&writes).unwrap());
        for _ in 0..BLOCKS {
            let (_, err, _) = reply(&mut c, 0).unwrap();
            assert_eq!(err, 0, "{name}: a write failed");
        }
        sender.join().unwrap();
        // Reads of 1 to 3 blocks, so that replies differ in length and a
        // full socket cuts them at different places.
        let reads: Vec<(usize, usize)> = (0..3 * BLOCKS)
            .map(|_| {
                let blocks = 1 + rng.below(3) as usize;
                (rng.below((BLOCKS - blocks + 1) as u64) as usize, blocks)
            })
            .collect();
        let msgs: Vec<u8> = reads
            .iter()
            .enumerate()
            .flat_map(|(i, &(b, n))| {
                request(READ, 0, i as u64, (b * BLOCK) as u64, (n * BLOCK) as u32)
            })
            .collect();
        let mut writer = c.try_clone().unwrap();
        let sender = std::thread::spawn(move || writer.write_all(&msgs).unwrap());
        // Let the replies pile up in the socket before reading any.
        std::thread::sleep(Duration::from_millis(500));
        let mut seen = vec![false; reads.len()];
        for _ in 0..reads.len() {
            let mut head = [0u8; 16];
            std::io::Read::read_exact(&mut c, &mut head).unwrap();
            assert_eq!(&head[0..4], &0x6744_6698u32.to_be_bytes(), "{name}: magic");
            assert_eq!(&head[4..8], &[0; 4], "{name}: a read failed");
            let handle = u64::from_be_bytes(head[8..16].try_into().unwrap()) as usize;
            let (b, n) = reads[handle];
            assert!(
                !std::mem::replace(&mut seen[handle], true),
                "{name}: reply {handle} twice"
            );
            let mut data = vec![0u8; n * BLOCK];
            std::io::Read::read_exact(&mut c, &mut data).unwrap();
            assert!(
                data == model[b * BLOCK..(b + n) * BLOCK],
                "{name}: read {handle} of blocks {b}..{} returned other bytes",
                b + n
            );
        }
        sender.join().unwrap();
        s.stop();
        std::fs::remove_dir_all(&dir).ok();
    }
}
