//! `blkparse` text output (blktrace's default format): one event per line,
//! `maj,min cpu sequence seconds.nanoseconds pid action RWBS sector + count
//! [process]`, then a summary from the first line that starts with `CPU`
//! or `Total`. One action is kept (by default `D`, requests issued to the
//! driver, after merging); events of other actions, and events that move
//! no data (flushes, discards), are skipped.

use std::io::Write;

use anyhow::{bail, Result};
use tiermux_core::Op;

use crate::request::{BlockTrace, Request, SECTOR_BYTES};
use crate::source::{
    checked_size, parse_u64, scaled, sector_span, Fields, LineFormat, Parsed, Pos,
};

/// Reads `blkparse` events of one action.
pub struct Blkparse {
    /// The action letter kept (`Q` queued, `D` issued, `C` completed...).
    pub action: u8,
}

impl LineFormat for Blkparse {
    fn parse(&mut self, line: &[u8], pos: Pos) -> Result<Parsed> {
        let mut f = Fields::new(line, None, pos);
        let device = f.text("device")?;
        let Some(comma) = device.iter().position(|&c| c == b',') else {
            if device.starts_with(b"CPU") || device.starts_with(b"Total") {
                return Ok(Parsed::End);
            }
            bail!(
                "{pos}: field 'device': '{}' is not maj,min (not a blkparse event line)",
                String::from_utf8_lossy(device)
            );
        };
        let number = |t: &[u8], name: &str| {
            parse_u64(t).map_err(|why| anyhow::anyhow!("{pos}: field '{name}': {why}"))
        };
        let major = number(&device[..comma], "device major")?;
        let minor = number(&device[comma + 1..], "device minor")?;
        f.u64("cpu")?;
        f.u64("sequence")?;
        let time_ns = seconds_ns(f.text("time")?, pos)?;
        f.u64("pid")?;
        let action = f.text("action")?;
        if action != [self.action] {
            return Ok(Parsed::Skip);
        }
        let rwbs = f.text("RWBS")?;
        let op = if rwbs.contains(&b'W') {
            Op::Write
        } else if rwbs.contains(&b'R') {
            Op::Read
        } else {
            return Ok(Parsed::Skip);
        };
        let sector = f.u64("sector")?;
        if f.text("+")? != b"+" {
            bail!("{pos}: field '+': expected '+' between sector and count");
        }
        let count = f.u64("count")?;
        if count == 0 {
            return Ok(Parsed::Skip);
        }
        let (Ok(major), Ok(minor)) = (u16::try_from(major), u16::try_from(minor)) else {
            bail!("{pos}: field 'device': {major},{minor} is out of range");
        };
        let offset_bytes = scaled(sector, SECTOR_BYTES, pos, "sector")?;
        let size = scaled(count, SECTOR_BYTES, pos, "count")?;
        Ok(Parsed::Request(Request {
            time_ns,
            volume: (major as u32) << 16 | minor as u32,
            op,
            offset_bytes,
            size_bytes: checked_size(offset_bytes, size, pos, "count")?,
        }))
    }
}

/// Parses `seconds.fraction` (at most nine fraction digits) into ns.
fn seconds_ns(t: &[u8], pos: Pos) -> Result<u64> {
    let bad = || {
        anyhow::anyhow!(
            "{pos}: field 'time': '{}' is not seconds.nanoseconds",
            String::from_utf8_lossy(t)
        )
    };
    let (whole, fraction) = match t.iter().position(|&c| c == b'.') {
        Some(i) => (&t[..i], &t[i + 1..]),
        None => (t, &b""[..]),
    };
    if fraction.len() > 9 {
        return Err(bad());
    }
    let seconds = parse_u64(whole).map_err(|_| bad())?;
    let mut ns = if fraction.is_empty() {
        0
    } else {
        parse_u64(fraction).map_err(|_| bad())?
    };
    ns *= 10u64.pow(9 - fraction.len() as u32);
    seconds
        .checked_mul(1_000_000_000)
        .and_then(|s| s.checked_add(ns))
        .ok_or_else(bad)
}

/// Writes `trace` as `blkparse` issue (`D`) events on CPU 0, widening
/// requests to whole sectors.
pub fn write(trace: &BlockTrace, out: &mut dyn Write) -> Result<Vec<String>> {
    let mut widened = 0u64;
    for (i, r) in trace.requests.iter().enumerate() {
        let (first, sectors, wide) = sector_span(r);
        widened += wide as u64;
        let op = match r.op {
            Op::Read => 'R',
            Op::Write => 'W',
        };
        writeln!(
            out,
            "{:>3},{:<3} {:>3} {:>8} {:>5}.{:09} {:>5}  D  {op} {first} + {} [tiermux]",
            r.volume >> 16,
            r.volume & 0xFFFF,
            0,
            i + 1,
            r.time_ns / 1_000_000_000,
            r.time_ns % 1_000_000_000,
            0,
            sectors
        )?;
    }
    let mut notes = Vec::new();
    if widened > 0 {
        notes.push(format!(
            "{widened} requests not aligned to 512-byte sectors were widened to whole sectors"
        ));
    }
    Ok(notes)
}
