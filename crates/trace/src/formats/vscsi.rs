//! VMware `vscsiStats` binary traces (as the CloudPhysics traces are
//! distributed), little-endian C structs, version in the high byte of
//! `ver`. Version 1: 32-byte records `{u32 sn, u32 len, u32 nSG, u16 cmd,
//! u16 ver, u64 lbn, u64 ts}`; version 2: 40-byte records `{u16 cmd, u16
//! ver, u32 sn, u32 len, u32 nSG, u64 lbn, u64 ts, u64 rt}`. `len` is in
//! bytes, `lbn` in 512-byte sectors, `ts` in microseconds, `cmd` a SCSI
//! opcode: READ(6/10/12/16) and WRITE(6/10/12/16) are kept, other
//! commands skipped.

use std::io::{BufRead, Write};

use anyhow::{bail, Context, Result};
use tiermux_core::Op;

use crate::request::{BlockTrace, Request, SECTOR_BYTES};
use crate::source::{checked_size, le_u16, le_u32, le_u64, scaled, Parsed, Pos, RecordFormat};

const V1_BYTES: usize = 32;
const V2_BYTES: usize = 40;
const READS: [u16; 4] = [0x08, 0x28, 0xA8, 0x88];
const WRITES: [u16; 4] = [0x0A, 0x2A, 0xAA, 0x8A];

/// Reads vscsi records of one version.
pub struct Vscsi {
    version: u8,
}

impl Vscsi {
    /// Tells the version from the first record of `input` (peeked, not
    /// consumed).
    pub fn detect(input: &mut dyn BufRead, file: &str) -> Result<Vscsi> {
        let head = input.fill_buf().with_context(|| {
            format!("{file}: byte 0: cannot read (a corrupt or truncated zstd stream?)")
        })?;
        if head.len() >= 4 && head[3] == 2 {
            return Ok(Vscsi { version: 2 });
        }
        if head.len() >= 16 && head[15] == 1 {
            return Ok(Vscsi { version: 1 });
        }
        if head.is_empty() {
            bail!("{file}: empty trace (no requests)");
        }
        bail!("{file}: byte 0: field 'ver': not a vscsi version 1 or 2 record");
    }
}

impl RecordFormat for Vscsi {
    fn record_bytes(&self) -> usize {
        if self.version == 1 {
            V1_BYTES
        } else {
            V2_BYTES
        }
    }

    fn parse(&mut self, b: &[u8], pos: Pos) -> Result<Parsed> {
        let (cmd, ver, len, lbn, ts) = if self.version == 1 {
            (
                le_u16(&b[12..]),
                le_u16(&b[14..]),
                le_u32(&b[4..]),
                le_u64(&b[16..]),
                le_u64(&b[24..]),
            )
        } else {
            (
                le_u16(b),
                le_u16(&b[2..]),
                le_u32(&b[8..]),
                le_u64(&b[16..]),
                le_u64(&b[24..]),
            )
        };
        if (ver >> 8) as u8 != self.version {
            bail!(
                "{pos}: field 'ver': version {} in a version {} trace",
                ver >> 8,
                self.version
            );
        }
        let op = if READS.contains(&cmd) {
            Op::Read
        } else if WRITES.contains(&cmd) {
            Op::Write
        } else {
            return Ok(Parsed::Skip);
        };
        let offset_bytes = scaled(lbn, SECTOR_BYTES, pos, "lbn")?;
        Ok(Parsed::Request(Request {
            time_ns: scaled(ts, 1_000, pos, "ts")?,
            volume: 0,
            op,
            offset_bytes,
            size_bytes: checked_size(offset_bytes, len as u64, pos, "len")?,
        }))
    }
}

/// Writes `trace` as version 2 records (READ(10) and WRITE(10)),
/// widening requests to start on a sector.
pub fn write(trace: &BlockTrace, out: &mut dyn Write) -> Result<Vec<String>> {
    let mut widened = 0u64;
    for (sn, r) in trace.requests.iter().enumerate() {
        let lbn = r.offset_bytes / SECTOR_BYTES;
        let len = r.end_bytes() - lbn * SECTOR_BYTES;
        if lbn * SECTOR_BYTES != r.offset_bytes {
            widened += 1;
        }
        let cmd: u16 = if r.op == Op::Write { 0x2A } else { 0x28 };
        out.write_all(&cmd.to_le_bytes())?;
        out.write_all(&(2u16 << 8).to_le_bytes())?;
        out.write_all(&(sn as u32).to_le_bytes())?;
        out.write_all(&u32::try_from(len)?.to_le_bytes())?;
        out.write_all(&1u32.to_le_bytes())?;
        out.write_all(&lbn.to_le_bytes())?;
        out.write_all(&(r.time_ns / 1_000).to_le_bytes())?;
        out.write_all(&0u64.to_le_bytes())?;
    }
    let mut notes =
        vec!["volume numbers are dropped; times are rounded down to microseconds".to_string()];
    if widened > 0 {
        notes.push(format!(
            "{widened} requests not starting on a 512-byte sector were widened"
        ));
    }
    Ok(notes)
}
