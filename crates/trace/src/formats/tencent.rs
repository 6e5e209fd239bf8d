//! Tencent cloud block storage traces (2018, OSCA, ATC '20):
//! `Timestamp,Offset,Size,IOType,VolumeID`, the timestamp in Unix seconds,
//! offset and size in 512-byte sectors, the type 0 for a read and 1 for a
//! write.

use std::io::Write;

use anyhow::{bail, Result};
use tiermux_core::Op;

use crate::request::{BlockTrace, Request, SECTOR_BYTES};
use crate::source::{checked_size, scaled, sector_span, Fields, LineFormat, Parsed, Pos};

const SECOND_NS: u64 = 1_000_000_000;

/// Reads Tencent block trace lines.
pub struct Tencent;

impl LineFormat for Tencent {
    fn parse(&mut self, line: &[u8], pos: Pos) -> Result<Parsed> {
        if line.starts_with(b"Timestamp,") {
            return Ok(Parsed::Skip);
        }
        let mut f = Fields::new(line, Some(b','), pos);
        let seconds = f.u64("Timestamp")?;
        let offset_bytes = scaled(f.u64("Offset")?, SECTOR_BYTES, pos, "Offset")?;
        let size = scaled(f.u64("Size")?, SECTOR_BYTES, pos, "Size")?;
        let op = match f.u64("IOType")? {
            0 => Op::Read,
            1 => Op::Write,
            t => bail!("{pos}: field 'IOType': {t} is neither 0 (read) nor 1 (write)"),
        };
        let volume = f.u32("VolumeID")?;
        f.end(5)?;
        Ok(Parsed::Request(Request {
            time_ns: scaled(seconds, SECOND_NS, pos, "Timestamp")?,
            volume,
            op,
            offset_bytes,
            size_bytes: checked_size(offset_bytes, size, pos, "Size")?,
        }))
    }
}

/// Writes `trace` as Tencent lines, widening requests to whole sectors.
pub fn write(trace: &BlockTrace, out: &mut dyn Write) -> Result<Vec<String>> {
    let mut widened = 0u64;
    for r in &trace.requests {
        let (first, sectors, wide) = sector_span(r);
        widened += wide as u64;
        let op = match r.op {
            Op::Read => 0,
            Op::Write => 1,
        };
        writeln!(
            out,
            "{},{first},{},{op},{}",
            r.time_ns / SECOND_NS,
            sectors,
            r.volume
        )?;
    }
    let mut notes = vec!["times are rounded down to seconds".to_string()];
    if widened > 0 {
        notes.push(format!(
            "{widened} requests not aligned to 512-byte sectors were widened to whole sectors"
        ));
    }
    Ok(notes)
}
