//! Delimited text with a column spec in libCacheSim's syntax:
//! `time-col=1,obj-id-col=2,obj-size-col=3,has-header=true,delimiter=,`
//! (columns counted from 1). Beyond libCacheSim's keys: `op-col` (`R`,
//! `W`, `read`, `write`, `get`, `set`, or 0 for a read and 1 for a
//! write; without it every request reads), `volume-col`, `obj-id-unit`
//! (bytes per unit of the object id, 1 by default: a byte offset) and
//! `time-unit-ns` (nanoseconds per unit of time, 1,000,000,000 by
//! default: seconds, as libCacheSim reads it).

use std::io::Write;

use anyhow::{bail, Context, Result};
use tiermux_core::Op;

use crate::request::{BlockTrace, Request};
use crate::source::{checked_size, parse_u64, scaled, Fields, LineFormat, Parsed, Pos};

/// Which columns hold what, and how to read them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsvSpec {
    /// 1-based column of the time, if any.
    pub time_col: Option<usize>,
    /// 1-based column of the object id (the offset).
    pub obj_id_col: usize,
    /// 1-based column of the size in bytes, if any (else one id unit).
    pub obj_size_col: Option<usize>,
    /// 1-based column of the operation, if any.
    pub op_col: Option<usize>,
    /// 1-based column of the volume, if any.
    pub volume_col: Option<usize>,
    /// Whether the first line names the columns.
    pub has_header: bool,
    /// The field delimiter.
    pub delimiter: u8,
    /// Bytes per unit of the object id.
    pub obj_id_unit: u64,
    /// Nanoseconds per unit of time.
    pub time_unit_ns: u64,
}

/// The spec `tiermux trace convert` writes with: `time,offset,size,op,volume`.
pub const WRITTEN_SPEC: &str =
    "time-col=1,obj-id-col=2,obj-size-col=3,op-col=4,volume-col=5,has-header=true,delimiter=,,time-unit-ns=1000";

impl std::str::FromStr for CsvSpec {
    type Err = anyhow::Error;

    fn from_str(spec: &str) -> Result<CsvSpec> {
        let mut s = CsvSpec {
            time_col: None,
            obj_id_col: 0,
            obj_size_col: None,
            op_col: None,
            volume_col: None,
            has_header: false,
            delimiter: b',',
            obj_id_unit: 1,
            time_unit_ns: 1_000_000_000,
        };
        let mut rest = spec.trim();
        while !rest.is_empty() {
            let (key, after) = rest
                .split_once('=')
                .with_context(|| format!("csv spec: '{rest}' is not key=value"))?;
            let key = key.trim().replace('_', "-").to_ascii_lowercase();
            let value;
            if key == "delimiter" {
                let (d, after) = delimiter(after)?;
                s.delimiter = d;
                rest = after;
                continue;
            }
            (value, rest) = after.split_once(',').unwrap_or((after, ""));
            rest = rest.trim_start_matches([' ', ',']);
            let value = value.trim();
            let col = || -> Result<usize> {
                match value.parse::<usize>() {
                    Ok(c) if c >= 1 => Ok(c),
                    _ => {
                        bail!("csv spec: {key}: '{value}' is not a column number (counted from 1)")
                    }
                }
            };
            match key.as_str() {
                "time-col" | "time-field" => s.time_col = Some(col()?),
                "obj-id-col" | "obj-id-field" => s.obj_id_col = col()?,
                "obj-size-col" | "obj-size-field" | "size-col" | "size-field" => s.obj_size_col = Some(col()?),
                "op-col" | "op-field" => s.op_col = Some(col()?),
                "volume-col" | "volume-field" => s.volume_col = Some(col()?),
                "has-header" | "header" => s.has_header = boolean(&key, value)?,
                "obj-id-is-num" => {
                    if !boolean(&key, value)? {
                        bail!("csv spec: obj-id-is-num: block traces need numeric object ids");
                    }
                }
                "obj-id-unit" => s.obj_id_unit = positive(&key, value)?,
                "time-unit-ns" => s.time_unit_ns = positive(&key, value)?,
                _ => bail!("csv spec: unknown key '{key}' (known: time-col, obj-id-col, obj-size-col, op-col, volume-col, has-header, delimiter, obj-id-unit, time-unit-ns)"),
            }
        }
        if s.obj_id_col == 0 {
            bail!("csv spec: obj-id-col is required");
        }
        Ok(s)
    }
}

/// Reads a delimiter value as libCacheSim does: one character, `\t`, or
/// nothing before the next comma (a comma).
fn delimiter(after: &str) -> Result<(u8, &str)> {
    let (d, rest) = if let Some(rest) = after.strip_prefix("\\t") {
        (b'\t', rest)
    } else if let Some(rest) = after.strip_prefix("\\,") {
        (b',', rest)
    } else if let Some(rest) = after.strip_prefix(",,") {
        (b',', rest)
    } else if after == "," || after.is_empty() {
        (b',', "")
    } else {
        let c = after.chars().next().expect("not empty");
        if !c.is_ascii() {
            bail!("csv spec: delimiter: '{c}' is not one ASCII character");
        }
        (c as u8, &after[1..])
    };
    Ok((d, rest.trim_start_matches([' ', ','])))
}

fn boolean(key: &str, value: &str) -> Result<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "y" => Ok(true),
        "false" | "0" | "no" | "n" => Ok(false),
        _ => bail!("csv spec: {key}: '{value}' is not true or false"),
    }
}

fn positive(key: &str, value: &str) -> Result<u64> {
    match value.parse::<u64>() {
        Ok(v) if v > 0 => Ok(v),
        _ => bail!("csv spec: {key}: '{value}' is not a positive integer"),
    }
}

/// Reads lines by a [`CsvSpec`].
pub struct Csv {
    spec: CsvSpec,
    columns: usize,
    header_pending: bool,
}

impl Csv {
    /// A reader for `spec`.
    pub fn new(spec: CsvSpec) -> Csv {
        let columns = [
            Some(spec.obj_id_col),
            spec.time_col,
            spec.obj_size_col,
            spec.op_col,
            spec.volume_col,
        ]
        .into_iter()
        .flatten()
        .max()
        .expect("the id column");
        Csv {
            header_pending: spec.has_header,
            spec,
            columns,
        }
    }
}

fn op_value(t: &[u8], pos: Pos) -> Result<Op> {
    let t = t.trim_ascii();
    for (names, op) in [
        (["r", "read", "get", "0"], Op::Read),
        (["w", "write", "set", "1"], Op::Write),
    ] {
        if names.iter().any(|n| t.eq_ignore_ascii_case(n.as_bytes())) {
            return Ok(op);
        }
    }
    bail!(
        "{pos}: field 'op': '{}' is not a read (R, read, get, 0) or a write (W, write, set, 1)",
        String::from_utf8_lossy(t)
    )
}

impl LineFormat for Csv {
    fn parse(&mut self, line: &[u8], pos: Pos) -> Result<Parsed> {
        if std::mem::take(&mut self.header_pending) {
            return Ok(Parsed::Skip);
        }
        let s = &self.spec;
        let mut f = Fields::new(line, Some(s.delimiter), pos);
        let mut cols: Vec<&[u8]> = Vec::with_capacity(self.columns);
        for c in 1..=self.columns {
            cols.push(f.text(&format!("column {c}"))?);
        }
        let number = |col: usize, name: &str| {
            parse_u64(cols[col - 1].trim_ascii())
                .map_err(|why| anyhow::anyhow!("{pos}: field '{name}' (column {col}): {why}"))
        };
        let offset_bytes = scaled(
            number(s.obj_id_col, "obj-id")?,
            s.obj_id_unit,
            pos,
            "obj-id",
        )?;
        let size = match s.obj_size_col {
            Some(c) => number(c, "obj-size")?,
            None => s.obj_id_unit,
        };
        let time_ns = match s.time_col {
            Some(c) => scaled(number(c, "time")?, s.time_unit_ns, pos, "time")?,
            None => 0,
        };
        let op = match s.op_col {
            Some(c) => op_value(cols[c - 1], pos)?,
            None => Op::Read,
        };
        let volume = match s.volume_col {
            Some(c) => {
                let v = number(c, "volume")?;
                u32::try_from(v)
                    .map_err(|_| anyhow::anyhow!("{pos}: field 'volume': {v} is too large"))?
            }
            None => 0,
        };
        Ok(Parsed::Request(Request {
            time_ns,
            volume,
            op,
            offset_bytes,
            size_bytes: checked_size(offset_bytes, size, pos, "obj-size")?,
        }))
    }
}

/// Writes `trace` as `time_us,offset,size,op,volume` with a header
/// ([`WRITTEN_SPEC`] reads it back).
pub fn write(trace: &BlockTrace, out: &mut dyn Write) -> Result<Vec<String>> {
    writeln!(out, "time_us,offset,size,op,volume")?;
    for r in &trace.requests {
        let op = if r.op == Op::Write { 'W' } else { 'R' };
        writeln!(
            out,
            "{},{},{},{op},{}",
            r.time_ns / 1_000,
            r.offset_bytes,
            r.size_bytes,
            r.volume
        )?;
    }
    Ok(vec![format!(
        "read it back with --format 'csv:{WRITTEN_SPEC}'"
    )])
}
