//! Large NBD requests over the raw protocol (no client tools needed): a
//! write's payload that arrives in many small pieces, with pauses, is
//! received straight into its own buffer; a connection that ends in the
//! middle of a payload applies nothing of it; large unaligned writes merge
//! with the blocks around them; and large reads return exactly what was
//! written, whatever devices the blocks sit on.

use std::io::Write;
use std::time::Duration;

use tiermux_core::rng::Rng;

#[path = "common/nbd_served.rs"]
mod nbd_served;
use nbd_served::*;
#[path = "common/nbd_wire.rs"]
mod nbd_wire;
use nbd_wire::{connect, reply, request};

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
        s.stop();
        let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
        assert!(
            !log.contains(" 0 device operations merged"),
            "{name}: no device operation merged blocks: {log}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
