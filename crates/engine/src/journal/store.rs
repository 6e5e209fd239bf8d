//! The metadata directory's files: reading and checking them at recovery
//! (shape, checkpoint, journal generations up to the last mark), and
//! writing them so that they survive a power cut (checkpoints, new journal
//! generations, the boot record).

use super::*;

/// Checks `volume.json` against `shape` and returns the format it was
/// written in, or writes it and returns `None` for a new directory.
pub(super) fn check_shape(
    dir: &Path,
    shape: &VolumeShape,
) -> Result<Option<&'static Layout>, MetaError> {
    let shape_path = dir.join("volume.json");
    let bytes = match std::fs::read(&shape_path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let json = serde_json::to_vec_pretty(shape).expect("shape serializes");
            write_atomically(dir, "volume.json", &json)?;
            return Ok(None);
        }
        Err(e) => return Err(io_err(&shape_path)(e)),
    };
    let old: VolumeShape = serde_json::from_slice(&bytes).map_err(|e| MetaError::Corrupt {
        path: shape_path.clone(),
        message: e.to_string(),
    })?;
    let layout = Layout::of(old.format).ok_or_else(|| MetaError::Format {
        dir: dir.to_path_buf(),
        format: old.format,
    })?;
    let same_format = VolumeShape {
        format: FORMAT,
        ..old
    };
    let differences = describe_differences(&same_format, shape);
    if !differences.is_empty() {
        return Err(MetaError::Mismatch {
            dir: dir.to_path_buf(),
            differences,
        });
    }
    Ok(Some(layout))
}

/// Replays journal generations from `generation` on into `durable`,
/// stopping each at its first torn or damaged record (an error when a later
/// generation exists: only the last may be torn); returns the first
/// generation that does not exist.
pub(super) fn replay_journals(
    dir: &Path,
    layout: &Layout,
    generation: u64,
    next_seq: &mut u64,
    durable: &mut BlockMap<Entry>,
    home: u8,
    rec: &mut Recovery,
) -> Result<u64, MetaError> {
    let mut g = generation;
    // Records not yet covered by a mark: (seq, block, entry).
    let mut tail: Vec<(u64, u64, Entry)> = Vec::new();
    while let Some(bytes) = read_journal(dir, g)? {
        let mut off = 0;
        let n = layout.record_bytes;
        while off + n <= bytes.len() {
            let Some((block, e)) = layout.decode_record(&bytes[off..off + n], *next_seq) else {
                break;
            };
            if block == MARK_BLOCK {
                let covered = tail.partition_point(|r| r.0 < mark_seq(&e));
                for (_, b, e) in tail.drain(..covered) {
                    set_entry(durable, home, b, e);
                }
            } else {
                tail.push((*next_seq, block, e));
            }
            *next_seq += 1;
            rec.journal_records += 1;
            off += n;
        }
        rec.discarded_bytes += (bytes.len() - off) as u64;
        if off < bytes.len() && journal_path(dir, g + 1).exists() {
            return Err(MetaError::Corrupt {
                path: journal_path(dir, g),
                message: format!("damaged record at byte {off}, but a later journal exists"),
            });
        }
        g += 1;
    }
    if rec.rebooted {
        // Records after the last mark may point at data the power cut lost,
        // and space they released may hold other blocks' data by now.
        rec.unmarked_records = tail.len() as u64;
    } else {
        for (_, b, e) in tail {
            set_entry(durable, home, b, e);
        }
    }
    Ok(g)
}

/// The boot id the metadata was last opened in, if recorded.
pub(super) fn read_boot(dir: &Path) -> Result<Option<String>, MetaError> {
    let path = dir.join("boot");
    match std::fs::read_to_string(&path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(&path)(e)),
    }
}

/// The placement map the durable entries describe.
pub(super) fn placement_map(durable: &BlockMap<Entry>, home: u8) -> PlacementMap {
    let mut map = PlacementMap::new(home);
    map.reserve(durable.len());
    for (&b, &e) in durable {
        map.set(b, e);
    }
    map
}

/// Compacts recovered metadata: a checkpoint of `durable` continues with
/// generation `generation`, the replayed journals are removed, `volume.json`
/// is rewritten in the current format when `upgrade_to` is given, and the
/// new generation's (empty) journal is returned.
pub(super) fn compact(
    dir: &Path,
    generation: u64,
    next_seq: u64,
    durable: &BlockMap<Entry>,
    upgrade_to: Option<&VolumeShape>,
) -> Result<File, MetaError> {
    write_checkpoint(dir, generation, next_seq, durable)?;
    remove_journals_before(dir, generation)?;
    if let Some(shape) = upgrade_to {
        // The checkpoint holds everything in the current format now.
        let json = serde_json::to_vec_pretty(shape).expect("shape serializes");
        write_atomically(dir, "volume.json", &json)?;
    }
    create_journal(dir, generation)
}

/// Creates journal generation `g` (empty) and makes its directory entry
/// durable, so that a synced journal never vanishes in a power cut.
pub(super) fn create_journal(dir: &Path, g: u64) -> Result<File, MetaError> {
    let jpath = journal_path(dir, g);
    let f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&jpath)
        .map_err(io_err(&jpath))?;
    sync_dir(dir)?;
    Ok(f)
}

/// Makes the directory's entries (files created, renamed or removed)
/// durable.
pub(super) fn sync_dir(dir: &Path) -> Result<(), MetaError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

/// The bytes of journal generation `g`, or `None` when it does not exist.
pub(super) fn read_journal(dir: &Path, g: u64) -> Result<Option<Vec<u8>>, MetaError> {
    let path = journal_path(dir, g);
    match std::fs::read(&path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(&path)(e)),
    }
}

pub(super) fn set_entry(map: &mut BlockMap<Entry>, home: u8, block: u64, e: Entry) {
    if e.present == 1 << home && e.dirty == 0 && e.stale == 0 {
        map.remove(&block);
    } else {
        map.insert(block, e);
    }
}

pub(super) fn describe_differences(old: &VolumeShape, new: &VolumeShape) -> String {
    let mut d = Vec::new();
    if old.format != new.format {
        d.push(format!("format {} vs {}", old.format, new.format));
    }
    if old.block_size != new.block_size {
        d.push(format!(
            "block_size {} vs {}",
            old.block_size, new.block_size
        ));
    }
    if old.num_blocks != new.num_blocks {
        d.push(format!(
            "size {} vs {} blocks",
            old.num_blocks, new.num_blocks
        ));
    }
    if old.devices != new.devices {
        d.push(format!("devices {:?} vs {:?}", old.devices, new.devices));
    }
    if old.policy_family != new.policy_family {
        d.push(format!(
            "policy {} vs {}",
            old.policy_family, new.policy_family
        ));
    }
    if old.seed != new.seed {
        d.push(format!("seed {} vs {}", old.seed, new.seed));
    }
    d.join("; ")
}

pub(super) fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), MetaError> {
    let tmp = dir.join(format!("{name}.tmp"));
    let dst = dir.join(name);
    {
        let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(bytes).map_err(io_err(&tmp))?;
        f.sync_all().map_err(io_err(&tmp))?;
    }
    std::fs::rename(&tmp, &dst).map_err(io_err(&dst))?;
    sync_dir(dir)
}

pub(super) fn write_checkpoint(
    dir: &Path,
    generation: u64,
    seq: u64,
    map: &BlockMap<Entry>,
) -> Result<(), MetaError> {
    let mut bytes = Vec::with_capacity(32 + map.len() * CURRENT.entry_bytes + 4);
    bytes.extend_from_slice(CURRENT.checkpoint_magic);
    bytes.extend_from_slice(&generation.to_le_bytes());
    bytes.extend_from_slice(&seq.to_le_bytes());
    bytes.extend_from_slice(&(map.len() as u64).to_le_bytes());
    // Sorted, so that a checkpoint of a given map is always the same bytes.
    let mut entries: Vec<_> = map.iter().map(|(&b, &e)| (b, e)).collect();
    entries.sort_unstable_by_key(|x| x.0);
    let mut buf = [0u8; CURRENT.entry_bytes];
    for (b, e) in entries {
        CURRENT.encode_entry(b, &e, &mut buf);
        bytes.extend_from_slice(&buf);
    }
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    write_atomically(dir, "checkpoint", &bytes)
}

/// A checkpoint's format, generation, sequence number and entries.
pub(super) type CheckpointContents = (&'static Layout, u64, u64, HashMap<u64, Entry>);

pub(super) fn read_checkpoint(path: &Path) -> Result<Option<CheckpointContents>, MetaError> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut f) => {
            f.read_to_end(&mut bytes).map_err(io_err(path))?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(path)(e)),
    }
    let corrupt = |message: &str| MetaError::Corrupt {
        path: path.to_path_buf(),
        message: message.to_string(),
    };
    if bytes.len() < 36 {
        return Err(corrupt("bad header"));
    }
    let Some(layout) = Layout::of_checkpoint(&bytes[0..8]) else {
        return Err(corrupt(
            "bad header (not a checkpoint of format 1 or 2; a newer tiermux may have written it)",
        ));
    };
    let body = bytes.len() - 4;
    let crc = u32::from_le_bytes(bytes[body..].try_into().expect("4 bytes"));
    if crc32fast::hash(&bytes[..body]) != crc {
        return Err(corrupt("checksum mismatch"));
    }
    let word = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
    let (generation, seq, count) = (word(8), word(16), word(24));
    if (count as usize).checked_mul(layout.entry_bytes) != Some(body - 32) {
        return Err(corrupt("entry count does not match the length"));
    }
    let entries = bytes[32..body]
        .chunks_exact(layout.entry_bytes)
        .map(|b| layout.decode_entry(b))
        .collect::<Option<HashMap<_, _>>>()
        .ok_or_else(|| corrupt("an entry does not carry the checkpoint's format"))?;
    Ok(Some((layout, generation, seq, entries)))
}

pub(super) fn remove_journals_before(dir: &Path, generation: u64) -> Result<(), MetaError> {
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        let name = entry.file_name();
        let Some(g) = name
            .to_str()
            .and_then(|n| n.strip_prefix("journal."))
            .and_then(|g| g.parse::<u64>().ok())
        else {
            continue;
        };
        if g < generation {
            std::fs::remove_file(entry.path()).map_err(io_err(&entry.path()))?;
        }
    }
    Ok(())
}
