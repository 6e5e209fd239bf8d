//! Tests of the journal, checkpoints, quarantine and recovery.

use super::*;
use crate::reactor::sim::SimReactor;
use tiermux_core::rng::Rng;

fn shape() -> VolumeShape {
    VolumeShape {
        format: FORMAT,
        block_size: 4096,
        num_blocks: 1000,
        devices: vec![("fast".into(), 100), ("slow".into(), 1000)],
        policy_family: "cache".into(),
        seed: 1,
    }
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tiermux-journal-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn random_entry(rng: &mut Rng) -> Entry {
    match rng.below(3) {
        0 => Entry {
            present: 0b10,
            ..Entry::default()
        },
        1 => Entry {
            present: 0b11,
            loc: [rng.below(100) as u32, 0, 0],
            ..Entry::default()
        },
        _ => Entry {
            present: 0b111,
            dirty: 0b101,
            loc: [rng.below(100) as u32, 0, u32::MAX - rng.below(100) as u32],
            flags: 1,
            ..Entry::default()
        },
    }
}

fn as_sorted(map: &PlacementMap) -> Vec<(u64, Entry)> {
    let mut v: Vec<_> = map.iter().collect();
    v.sort_by_key(|x| x.0);
    v
}

#[test]
fn recovers_exactly_what_was_committed_across_checkpoints() {
    let dir = tmpdir("roundtrip");
    let mut r = SimReactor::new(1, 1, 0).unwrap();
    let mut rng = Rng::new(5);
    let mut model = PlacementMap::new(1);
    for round in 0..4 {
        let (mut m, map, rec) = Metadata::open(&dir, &shape(), 1, "boot-1").unwrap();
        assert_eq!(rec.fresh, round == 0);
        assert_eq!(as_sorted(&map), as_sorted(&model), "round {round}");
        m.checkpoint_every_records = 500;
        for i in 0..3000 {
            let b = rng.below(300);
            let e = random_entry(&mut rng);
            m.record(b, e);
            model.set(b, strip(e));
            if i % 7 == 0 {
                m.commit(&mut r).unwrap();
            }
        }
        m.commit(&mut r).unwrap();
        assert!(m.checkpoints > 0 || m.checkpointing.is_some());
        if round % 2 == 0 {
            drop(m); // a crash: no final checkpoint
        } else {
            m.close(&mut r).unwrap();
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Copies on a device in memory are forgotten after a reboot (not
/// after a restart of the process alone), copies on a device created
/// at open always; a block whose newest data was only there reads its
/// home copy; and the forgetting is in the checkpoint.
#[test]
fn copies_on_devices_that_lost_their_contents_are_forgotten() {
    let dir = tmpdir("lost");
    let mut r = SimReactor::new(1, 1, 0).unwrap();
    let e = |present: u8, dirty: u8| Entry {
        present,
        dirty,
        loc: [7, 0, 9],
        ..Entry::default()
    };
    let home_only = e(0b010, 0);
    let (mut m, _, _) = Metadata::open(&dir, &shape(), 1, "boot-1").unwrap();
    let start = [
        (1, e(0b011, 0)),     // clean on 0
        (2, e(0b111, 0b101)), // dirty on 0 and 2
        (3, e(0b110, 0)),     // clean on 2
        (4, e(0b011, 0b001)), // dirty on 0 only
    ];
    for (b, en) in start {
        m.record(b, en);
    }
    m.close(&mut r).unwrap();
    let in_memory = Lost {
        created: 0,
        in_memory: 0b001,
    };
    let (m, map, rec) = Metadata::open_forgetting(&dir, &shape(), 1, "boot-1", in_memory).unwrap();
    assert_eq!((rec.lost_devices, rec.forgotten_copies), (0, 0));
    assert_eq!(map.get(4), start[3].1);
    drop(m);
    let (m, map, rec) = Metadata::open_forgetting(&dir, &shape(), 1, "boot-2", in_memory).unwrap();
    assert_eq!(
        (rec.lost_devices, rec.forgotten_copies, rec.lost_blocks),
        (0b001, 3, 1)
    );
    let after = [home_only, e(0b110, 0b100), start[2].1, home_only];
    for (b, want) in (1..=4).zip(after) {
        assert_eq!(map.get(b).present, want.present, "block {b}");
        assert_eq!(map.get(b).dirty, want.dirty, "block {b}");
    }
    drop(m);
    let (m, map2, rec) = Metadata::open(&dir, &shape(), 1, "boot-2").unwrap();
    assert_eq!(rec.forgotten_copies, 0);
    assert_eq!(as_sorted(&map2), as_sorted(&map), "the checkpoint forgot");
    drop(m);
    let created = Lost {
        created: 0b110,
        in_memory: 0,
    };
    let (_, map, rec) = Metadata::open_forgetting(&dir, &shape(), 1, "boot-2", created).unwrap();
    // Home is never lost.
    assert_eq!((rec.lost_devices, rec.lost_blocks), (0b100, 1));
    assert!(map.is_empty(), "{:?}", as_sorted(&map));
    std::fs::remove_dir_all(&dir).ok();
}

/// After a reboot only the records below the last mark come back;
/// after a crash of the process alone, all of them.
#[test]
fn a_reboot_replays_up_to_the_last_mark() {
    let e = |slot| Entry {
        present: 0b11,
        loc: [slot, 0, 0],
        ..Entry::default()
    };
    for (boot, want) in [
        ("boot-1", vec![(5, e(9)), (6, e(3))]),
        ("boot-2", vec![(5, e(9))]),
    ] {
        let dir = tmpdir(&format!("marks-{boot}"));
        let mut r = SimReactor::new(1, 1, 0).unwrap();
        let (mut m, _, _) = Metadata::open(&dir, &shape(), 1, "boot-1").unwrap();
        m.record(5, e(9));
        m.commit(&mut r).unwrap();
        let seq = m.next_seq();
        m.record(6, e(3));
        m.commit(&mut r).unwrap();
        // The mark covers the first record only, though written after both.
        m.append_mark(seq, &mut r).unwrap();
        drop(m);
        let (_, map, rec) = Metadata::open(&dir, &shape(), 1, boot).unwrap();
        assert_eq!(as_sorted(&map), want, "{boot}");
        assert_eq!(rec.rebooted, boot == "boot-2");
        assert_eq!(rec.unmarked_records, if boot == "boot-2" { 1 } else { 0 });
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// A record that drops a copy quarantines the places of every copy the
/// entry had, until a mark covers it.
#[test]
fn dropping_a_copy_quarantines_its_places_until_a_mark() {
    let dir = tmpdir("quarantine");
    let mut r = SimReactor::new(1, 1, 0).unwrap();
    let (mut m, _, _) = Metadata::open(&dir, &shape(), 1, "boot-1").unwrap();
    let cached = Entry {
        present: 0b11,
        loc: [9, 0, 0],
        ..Entry::default()
    };
    m.record(5, cached);
    assert!(!m.quarantined(0, 9), "adding a copy quarantines nothing");
    m.record(
        5,
        Entry {
            present: 0b10,
            ..Entry::default()
        },
    );
    // The slot on device 0 and the block's home address on device 1.
    assert!(m.quarantined(0, 9) && m.quarantined(1, 5));
    assert!(!m.quarantined(0, 8) && !m.quarantined(1, 6));
    m.commit(&mut r).unwrap();
    let seq = m.next_seq();
    m.append_mark(seq, &mut r).unwrap();
    assert!(m.quarantined(0, 9), "the mark is not durable yet");
    m.marked(seq);
    assert!(!m.quarantined(0, 9) && !m.quarantined(1, 5) && !m.has_quarantine());
    std::fs::remove_dir_all(&dir).ok();
}

/// Two equal copies of which one stops being current without I/O (a
/// mirrored block keeping only its fast copy): both places wait for a
/// mark, so that the kept copy is not rewritten while a power cut could
/// bring back the entry that calls them equal.
#[test]
fn giving_up_one_of_two_equal_copies_quarantines_both() {
    let dir = tmpdir("quarantine-equal");
    let (mut m, _, _) = Metadata::open(&dir, &shape(), 1, "boot-1").unwrap();
    let mirrored = Entry {
        present: 0b11,
        loc: [9, 0, 0],
        ..Entry::default()
    };
    m.record(5, mirrored);
    m.record(
        5,
        Entry {
            dirty: 0b01,
            ..mirrored
        },
    );
    assert!(m.quarantined(0, 9) && m.quarantined(1, 5));
    // One current copy that becomes dirty elsewhere is not a pair.
    m.record(
        6,
        Entry {
            present: 0b10,
            ..Entry::default()
        },
    );
    m.record(
        6,
        Entry {
            present: 0b11,
            dirty: 0b01,
            loc: [3, 0, 0],
            ..Entry::default()
        },
    );
    assert!(!m.quarantined(0, 3) && !m.quarantined(1, 6));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn torn_tail_is_discarded_and_uncommitted_records_lost() {
    let dir = tmpdir("torn");
    let mut r = SimReactor::new(1, 1, 0).unwrap();
    let (mut m, _, _) = Metadata::open(&dir, &shape(), 1, "boot-1").unwrap();
    let e = Entry {
        present: 0b11,
        loc: [9, 0, 0],
        ..Entry::default()
    };
    m.record(5, e);
    m.commit(&mut r).unwrap();
    m.record(6, e);
    m.commit(&mut r).unwrap();
    m.record(7, e); // never committed
    let g = m.generation;
    drop(m);
    // Tear the last committed record.
    let jp = journal_path(&dir, g);
    let len = std::fs::metadata(&jp).unwrap().len();
    let f = OpenOptions::new().write(true).open(&jp).unwrap();
    f.set_len(len - 5).unwrap();
    let (_, map, rec) = Metadata::open(&dir, &shape(), 1, "boot-1").unwrap();
    assert_eq!(map.get(5), e);
    assert!(!map.has_entry(6) && !map.has_entry(7));
    assert_eq!(
        (rec.journal_records, rec.discarded_bytes),
        (1, CURRENT.record_bytes as u64 - 5)
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A format-1 directory, written byte by byte as format 1 defines it:
/// a checkpoint with block 3 in cache slot 7, and a journal record
/// putting block 4 dirty in slot 8.
fn write_format_1(dir: &Path, format: u32) {
    std::fs::create_dir_all(dir).unwrap();
    let shape = VolumeShape { format, ..shape() };
    std::fs::write(dir.join("volume.json"), serde_json::to_vec(&shape).unwrap()).unwrap();
    let entry = |block: u64, present: u8, dirty: u8, slot: u32| {
        let mut b = block.to_le_bytes().to_vec();
        b.extend_from_slice(&[present, dirty, 0, 0]);
        b.extend_from_slice(&slot.to_le_bytes());
        b
    };
    let mut ck = b"TMXCKPT1".to_vec();
    for word in [1u64, 0, 1] {
        ck.extend_from_slice(&word.to_le_bytes());
    }
    ck.extend(entry(3, 0b11, 0, 7));
    let crc = crc32fast::hash(&ck);
    ck.extend_from_slice(&crc.to_le_bytes());
    std::fs::write(dir.join("checkpoint"), ck).unwrap();
    let mut r = 0u64.to_le_bytes().to_vec();
    r.extend(entry(4, 0b11, 0b01, 8));
    r.extend_from_slice(&[0; 4]);
    let crc = crc32fast::hash(&r);
    r.extend_from_slice(&crc.to_le_bytes());
    std::fs::write(journal_path(dir, 1), r).unwrap();
}

#[test]
fn format_1_is_read_and_upgraded_and_unknown_formats_refused() {
    let dir = tmpdir("format1");
    write_format_1(&dir, 1);
    let slot = |loc: u32| [loc, 0, 0];
    for round in 0..2 {
        let (m, map, rec) = Metadata::open(&dir, &shape(), 1, "boot-1").unwrap();
        assert_eq!(
            as_sorted(&map),
            vec![
                (
                    3,
                    Entry {
                        present: 0b11,
                        loc: slot(7),
                        ..Entry::default()
                    }
                ),
                (
                    4,
                    Entry {
                        present: 0b11,
                        dirty: 0b01,
                        loc: slot(8),
                        ..Entry::default()
                    }
                ),
            ],
            "round {round}"
        );
        assert_eq!(rec.journal_records, if round == 0 { 1 } else { 0 });
        drop(m);
        let json = std::fs::read_to_string(dir.join("volume.json")).unwrap();
        assert!(json.contains("\"format\": 2"), "upgraded: {json}");
    }
    std::fs::remove_dir_all(&dir).ok();
    write_format_1(&dir, 9);
    let e = Metadata::open(&dir, &shape(), 1, "boot-1")
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("has format 9") && e.contains("reads formats 1 and 2"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn other_shapes_and_damaged_checkpoints_are_refused() {
    let dir = tmpdir("shape");
    drop(Metadata::open(&dir, &shape(), 1, "boot-1").unwrap());
    let mut other = shape();
    other.num_blocks = 2000;
    other.seed = 3;
    let e = Metadata::open(&dir, &other, 1, "boot-1")
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("size 1000 vs 2000 blocks") && e.contains("seed 1 vs 3"),
        "{e}"
    );
    let cp = dir.join("checkpoint");
    let mut bytes = std::fs::read(&cp).unwrap();
    let n = bytes.len();
    bytes[n - 1] ^= 0xff;
    std::fs::write(&cp, bytes).unwrap();
    let e = Metadata::open(&dir, &shape(), 1, "boot-1")
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("checkpoint is corrupt: checksum mismatch"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
