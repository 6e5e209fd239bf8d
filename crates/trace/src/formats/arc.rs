//! The ARC paper's trace format (Megiddo and Modha, FAST '03): one request
//! per line, `start_block block_count ignored request_number`, in 512-byte
//! pages. The format has no operation or time: every request reads.

use std::io::Write;

use anyhow::{bail, Result};
use tiermux_core::Op;

use crate::request::{BlockTrace, Request, SECTOR_BYTES};
use crate::source::{checked_size, scaled, sector_span, Fields, LineFormat, Parsed, Pos};

const MAX_BLOCKS: u64 = 1 << 24;

/// Reads ARC trace lines.
pub struct Arc;

impl LineFormat for Arc {
    fn parse(&mut self, line: &[u8], pos: Pos) -> Result<Parsed> {
        let mut f = Fields::new(line, None, pos);
        let start = f.u64("start_block")?;
        let count = f.u64("block_count")?;
        f.u64("ignored")?;
        f.u64("request_number")?;
        f.end(4)?;
        if count == 0 || count > MAX_BLOCKS {
            bail!("{pos}: field 'block_count': {count} is out of range [1, {MAX_BLOCKS}]");
        }
        let offset_bytes = scaled(start, SECTOR_BYTES, pos, "start_block")?;
        let size = count * SECTOR_BYTES;
        Ok(Parsed::Request(Request {
            time_ns: 0,
            volume: 0,
            op: Op::Read,
            offset_bytes,
            size_bytes: checked_size(offset_bytes, size, pos, "block_count")?,
        }))
    }
}

/// Writes `trace` as ARC lines, widening requests to whole 512-byte
/// blocks; operations, times and volumes are dropped.
pub fn write(trace: &BlockTrace, out: &mut dyn Write) -> Result<Vec<String>> {
    let mut widened = 0u64;
    let mut written = 0u64;
    for r in trace.requests.iter().filter(|r| r.size_bytes > 0) {
        let (first, sectors, wide) = sector_span(r);
        widened += wide as u64;
        writeln!(out, "{first} {} 0 {written}", sectors)?;
        written += 1;
    }
    let mut notes = vec![
        "the ARC format keeps no operation, time or volume: writes become plain references"
            .to_string(),
    ];
    if widened > 0 {
        notes.push(format!(
            "{widened} requests not aligned to 512-byte blocks were widened"
        ));
    }
    let empty = trace.requests.len() as u64 - written;
    if empty > 0 {
        notes.push(format!("{empty} empty requests were dropped"));
    }
    Ok(notes)
}
