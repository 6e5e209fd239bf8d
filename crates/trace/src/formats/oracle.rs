//! libCacheSim's binary formats. `oracleGeneral`: 24-byte little-endian
//! records `{u32 time_s, u64 obj_id, u32 obj_size, i64 next_access_vtime}`;
//! `oracleGeneralOpNS`: 27 bytes, an operation byte and a u16 namespace
//! after the size. The object id is read as a byte offset times
//! `id_unit_bytes` (1 by default), the size in bytes. `oracleGeneral` has
//! no operation, so every request reads.
//!
//! Written one record per page (the object id the page's byte offset, the
//! size the page), so that libCacheSim caches pages as tiermux does; the
//! next access is the index of the next record of the same page, -1 for
//! none.

use std::collections::HashMap;
use std::io::Write;

use anyhow::{bail, Result};
use tiermux_core::Op;

use crate::request::{BlockTrace, Request};
use crate::source::{checked_size, le_u32, le_u64, scaled, Parsed, Pos, RecordFormat};

const SECOND_NS: u64 = 1_000_000_000;
const OP_NOP: u8 = 0;
const OP_DELETE: u8 = 9;
const OP_READ: u8 = 12;
const OP_WRITE: u8 = 13;

/// Reads `oracleGeneral` (`with_op` false) or `oracleGeneralOpNS` records.
pub struct Oracle {
    /// Whether records carry the operation and namespace (27 bytes).
    pub with_op: bool,
    /// Bytes per unit of the object id.
    pub id_unit_bytes: u64,
}

/// libCacheSim's operation codes: gets and reads read; sets, updates and
/// the like write; deletes are skipped.
fn op_of(code: u8, pos: Pos) -> Result<Option<Op>> {
    Ok(match code {
        OP_NOP | 1 | 2 | OP_READ => Some(Op::Read),
        3..=8 | 10 | 11 | OP_WRITE | 14 => Some(Op::Write),
        OP_DELETE => None,
        c => bail!("{pos}: field 'op': {c} is not a libCacheSim operation"),
    })
}

impl RecordFormat for Oracle {
    fn record_bytes(&self) -> usize {
        if self.with_op {
            27
        } else {
            24
        }
    }

    fn parse(&mut self, b: &[u8], pos: Pos) -> Result<Parsed> {
        let time_s = le_u32(b) as u64;
        let offset_bytes = scaled(le_u64(&b[4..]), self.id_unit_bytes, pos, "obj_id")?;
        let size = le_u32(&b[12..]) as u64;
        let op = if self.with_op {
            match op_of(b[16], pos)? {
                Some(op) => op,
                None => return Ok(Parsed::Skip),
            }
        } else {
            Op::Read
        };
        let volume = if self.with_op {
            u16::from_le_bytes([b[17], b[18]]) as u32
        } else {
            0
        };
        Ok(Parsed::Request(Request {
            time_ns: time_s * SECOND_NS,
            volume,
            op,
            offset_bytes,
            size_bytes: checked_size(offset_bytes, size, pos, "obj_size")?,
        }))
    }
}

/// Writes `trace` one record per page of `page_bytes`, with operations
/// and namespaces when `with_op`.
pub fn write(
    trace: &BlockTrace,
    page_bytes: u64,
    with_op: bool,
    out: &mut dyn Write,
) -> Result<Vec<String>> {
    let size = u32::try_from(page_bytes)?;
    let pages: Vec<(u64, Op, u64, u32)> = trace
        .requests
        .iter()
        .flat_map(|r| {
            r.pages(page_bytes)
                .map(move |p| (p, r.op, r.time_ns, r.volume))
        })
        .collect();
    let mut next = vec![-1i64; pages.len()];
    let mut seen: HashMap<u64, usize> = HashMap::new();
    for (i, &(page, ..)) in pages.iter().enumerate().rev() {
        if let Some(j) = seen.insert(page, i) {
            next[i] = j as i64;
        }
    }
    let mut notes = vec![format!(
        "one record per {page_bytes}-byte page; times are rounded down to seconds"
    )];
    if !with_op && trace.requests.iter().any(|r| r.op == Op::Write) {
        notes.push("oracleGeneral has no operation: writes become plain references".into());
    }
    let mut big_volumes = false;
    for (&(page, op, time_ns, volume), next) in pages.iter().zip(next) {
        let time_s = u32::try_from(time_ns / SECOND_NS).unwrap_or(u32::MAX);
        out.write_all(&time_s.to_le_bytes())?;
        out.write_all(&(page * page_bytes).to_le_bytes())?;
        out.write_all(&size.to_le_bytes())?;
        if with_op {
            out.write_all(&[if op == Op::Write { OP_WRITE } else { OP_READ }])?;
            big_volumes |= volume > u16::MAX as u32;
            out.write_all(&(volume.min(u16::MAX as u32) as u16).to_le_bytes())?;
        }
        out.write_all(&next.to_le_bytes())?;
    }
    if big_volumes {
        notes.push("volume numbers above 65535 are written as 65535".into());
    }
    Ok(notes)
}
