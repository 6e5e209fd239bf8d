//! MSR Cambridge block traces (Narayanan et al., FAST '08, distributed by
//! SNIA): `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`,
//! the timestamp in Windows file time (100 ns ticks since 1601), the type
//! `Read` or `Write`, offset and size in bytes.

use std::io::Write;

use anyhow::{bail, Result};
use tiermux_core::Op;

use crate::request::{BlockTrace, Request};
use crate::source::{checked_size, scaled, Fields, LineFormat, Parsed, Pos};

const TICK_NS: u64 = 100;

/// Reads MSR Cambridge lines.
pub struct Msr;

impl LineFormat for Msr {
    fn parse(&mut self, line: &[u8], pos: Pos) -> Result<Parsed> {
        if line.starts_with(b"Timestamp,") {
            return Ok(Parsed::Skip);
        }
        let mut f = Fields::new(line, Some(b','), pos);
        let ticks = f.u64("Timestamp")?;
        f.skip("Hostname")?;
        let volume = f.u32("DiskNumber")?;
        let op = match f.text("Type")? {
            t if t.eq_ignore_ascii_case(b"Read") => Op::Read,
            t if t.eq_ignore_ascii_case(b"Write") => Op::Write,
            t => bail!(
                "{pos}: field 'Type': '{}' is neither Read nor Write",
                String::from_utf8_lossy(t)
            ),
        };
        let offset_bytes = f.u64("Offset")?;
        let size = f.u64("Size")?;
        f.u64("ResponseTime")?;
        f.end(7)?;
        Ok(Parsed::Request(Request {
            time_ns: scaled(ticks, TICK_NS, pos, "Timestamp")?,
            volume,
            op,
            offset_bytes,
            size_bytes: checked_size(offset_bytes, size, pos, "Size")?,
        }))
    }
}

/// Writes `trace` as MSR lines (host name `tiermux`, response time 0).
pub fn write(trace: &BlockTrace, out: &mut dyn Write) -> Result<Vec<String>> {
    for r in &trace.requests {
        let op = match r.op {
            Op::Read => "Read",
            Op::Write => "Write",
        };
        writeln!(
            out,
            "{},tiermux,{},{op},{},{},0",
            r.time_ns / TICK_NS,
            r.volume,
            r.offset_bytes,
            r.size_bytes
        )?;
    }
    let mut notes = vec!["response times are written as 0".to_string()];
    if trace.requests.iter().any(|r| r.time_ns % TICK_NS != 0) {
        notes.push("times are rounded down to 100 ns ticks".into());
    }
    Ok(notes)
}
