//! Alibaba Cloud block traces (2020, `alibaba/block-traces`):
//! `device_id,opcode,offset,length,timestamp`, the opcode `R` or `W`,
//! offset and length in bytes, the timestamp in microseconds.

use std::io::Write;

use anyhow::{bail, Result};
use tiermux_core::Op;

use crate::request::{BlockTrace, Request};
use crate::source::{checked_size, scaled, Fields, LineFormat, Parsed, Pos};

const MICROSECOND_NS: u64 = 1_000;

/// Reads Alibaba block trace lines.
pub struct Alibaba;

impl LineFormat for Alibaba {
    fn parse(&mut self, line: &[u8], pos: Pos) -> Result<Parsed> {
        if line.starts_with(b"device_id,") {
            return Ok(Parsed::Skip);
        }
        let mut f = Fields::new(line, Some(b','), pos);
        let volume = f.u32("device_id")?;
        let op = match f.text("opcode")? {
            b"R" | b"r" => Op::Read,
            b"W" | b"w" => Op::Write,
            t => bail!(
                "{pos}: field 'opcode': '{}' is neither R nor W",
                String::from_utf8_lossy(t)
            ),
        };
        let offset_bytes = f.u64("offset")?;
        let length = f.u64("length")?;
        let time_us = f.u64("timestamp")?;
        f.end(5)?;
        Ok(Parsed::Request(Request {
            time_ns: scaled(time_us, MICROSECOND_NS, pos, "timestamp")?,
            volume,
            op,
            offset_bytes,
            size_bytes: checked_size(offset_bytes, length, pos, "length")?,
        }))
    }
}

/// Writes `trace` as Alibaba lines.
pub fn write(trace: &BlockTrace, out: &mut dyn Write) -> Result<Vec<String>> {
    for r in &trace.requests {
        let op = match r.op {
            Op::Read => 'R',
            Op::Write => 'W',
        };
        writeln!(
            out,
            "{},{op},{},{},{}",
            r.volume,
            r.offset_bytes,
            r.size_bytes,
            r.time_ns / MICROSECOND_NS
        )?;
    }
    let mut notes = Vec::new();
    if trace
        .requests
        .iter()
        .any(|r| r.time_ns % MICROSECOND_NS != 0)
    {
        notes.push("times are rounded down to microseconds".into());
    }
    Ok(notes)
}
