//! Block trace formats: one file per format, each reading it into
//! [`Request`](crate::request::Request)s and writing it back. A format is
//! named on the command line as `arc`, `msr`, `alibaba`, `tencent`,
//! `blkparse` (or `blkparse:ACTION`), `oracle-general`,
//! `oracle-general-opns` (either optionally `:ID_UNIT_BYTES`), `vscsi`, or
//! `csv:SPEC` (libCacheSim's column spec). Any of them may be
//! zstd-compressed.

pub mod alibaba;
pub mod arc;
pub mod blkparse;
pub mod csv_spec;
pub mod msr;
pub mod oracle;
pub mod tencent;
pub mod vscsi;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::request::{BlockTrace, PageTrace};
use crate::source::{open_bytes, Requests};
pub use csv_spec::CsvSpec;

/// A trace format and its reading options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Format {
    /// The ARC paper's `.lis` format.
    Arc,
    /// MSR Cambridge CSV.
    Msr,
    /// Alibaba Cloud block trace CSV.
    Alibaba,
    /// Tencent cloud block storage CSV.
    Tencent,
    /// `blkparse` text, keeping events of one action.
    Blkparse {
        /// The action letter kept.
        action: u8,
    },
    /// libCacheSim `oracleGeneral` (no operations) or `oracleGeneralOpNS`.
    Oracle {
        /// Whether records carry operations (`oracleGeneralOpNS`).
        with_op: bool,
        /// Bytes per unit of the object id.
        id_unit_bytes: u64,
    },
    /// VMware vscsi binary.
    Vscsi,
    /// Delimited text by a column spec.
    Csv(CsvSpec),
}

/// The format names `--format` accepts, for messages.
pub const FORMAT_NAMES: &str =
    "arc, msr, alibaba, tencent, blkparse[:ACTION], oracle-general[:ID_UNIT], oracle-general-opns[:ID_UNIT], vscsi, csv:SPEC";

impl std::str::FromStr for Format {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Format> {
        let (name, option) = match s.split_once(':') {
            Some((n, o)) => (n, Some(o)),
            None => (s, None),
        };
        let unit = |o: Option<&str>| -> Result<u64> {
            match o {
                None => Ok(1),
                Some(u) => match u.parse::<u64>() {
                    Ok(v) if v > 0 => Ok(v),
                    _ => bail!("format {s}: '{u}' is not a positive number of bytes per object id"),
                },
            }
        };
        let format = match name.to_ascii_lowercase().as_str() {
            "arc" | "lis" => Format::Arc,
            "msr" => Format::Msr,
            "alibaba" => Format::Alibaba,
            "tencent" => Format::Tencent,
            "blkparse" => {
                let action = match option {
                    None => b'D',
                    Some(a) if a.len() == 1 && a.as_bytes()[0].is_ascii_alphabetic() => {
                        a.as_bytes()[0]
                    }
                    Some(a) => bail!(
                        "format {s}: '{a}' is not one blkparse action letter (Q, G, I, D, C...)"
                    ),
                };
                Format::Blkparse { action }
            }
            "oracle-general" | "oraclegeneral" | "oraclegeneralbin" => Format::Oracle {
                with_op: false,
                id_unit_bytes: unit(option)?,
            },
            "oracle-general-opns" | "oraclegeneralopns" => Format::Oracle {
                with_op: true,
                id_unit_bytes: unit(option)?,
            },
            "vscsi" => Format::Vscsi,
            "csv" => Format::Csv(option.unwrap_or(csv_spec::WRITTEN_SPEC).parse()?),
            _ => bail!("unknown trace format '{s}' (known: {FORMAT_NAMES})"),
        };
        if option.is_some()
            && matches!(
                format,
                Format::Arc | Format::Msr | Format::Alibaba | Format::Tencent | Format::Vscsi
            )
        {
            bail!("format {s}: {name} takes no option");
        }
        Ok(format)
    }
}

impl Format {
    /// The format a file's name implies (`.lis`, `.msr`/`.csv` from MSR's
    /// archive names, `.oracleGeneral`, `.vscsi`, `.blkparse`), before any
    /// `.zst`; `None` when the name does not tell.
    pub fn from_file_name(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        let name = name.strip_suffix(".zst").unwrap_or(&name);
        let ext = Path::new(name).extension()?.to_str()?;
        Some(match ext {
            "lis" => Format::Arc,
            "msr" => Format::Msr,
            "oraclegeneral" | "oraclegeneralbin" => Format::Oracle {
                with_op: false,
                id_unit_bytes: 1,
            },
            "oraclegeneralopns" => Format::Oracle {
                with_op: true,
                id_unit_bytes: 1,
            },
            "vscsi" => Format::Vscsi,
            "blkparse" => Format::Blkparse { action: b'D' },
            _ => return None,
        })
    }

    /// The format given, or else the one the file name implies.
    pub fn resolve(given: Option<&str>, path: &Path) -> Result<Format> {
        match given {
            Some(g) => g.parse(),
            None => Format::from_file_name(path).with_context(|| {
                format!("{}: cannot tell the trace format from the file name; give --format ({FORMAT_NAMES})", path.display())
            }),
        }
    }
}

/// Streams the requests of the trace at `path`.
pub fn open(path: &Path, format: &Format) -> Result<Requests> {
    read_from(open_bytes(path)?, path.display().to_string(), format)
}

/// Streams the requests of a trace in `format` from `input` (already
/// decompressed), naming it `file` in errors.
pub fn read_from(
    mut input: Box<dyn std::io::BufRead>,
    file: String,
    format: &Format,
) -> Result<Requests> {
    Ok(match format {
        Format::Arc => Requests::text(input, file, arc::Arc),
        Format::Msr => Requests::text(input, file, msr::Msr),
        Format::Alibaba => Requests::text(input, file, alibaba::Alibaba),
        Format::Tencent => Requests::text(input, file, tencent::Tencent),
        Format::Blkparse { action } => {
            Requests::text(input, file, blkparse::Blkparse { action: *action })
        }
        Format::Csv(spec) => Requests::text(input, file, csv_spec::Csv::new(spec.clone())),
        Format::Oracle {
            with_op,
            id_unit_bytes,
        } => Requests::binary(
            input,
            file,
            oracle::Oracle {
                with_op: *with_op,
                id_unit_bytes: *id_unit_bytes,
            },
        ),
        Format::Vscsi => {
            let v = vscsi::Vscsi::detect(&mut input, &file)?;
            Requests::binary(input, file, v)
        }
    })
}

/// Reads the whole trace at `path`; a trace without requests is an error.
pub fn read(path: &Path, format: &Format) -> Result<BlockTrace> {
    let requests = open(path, format)?.collect::<Result<Vec<_>>>()?;
    if requests.is_empty() {
        bail!("{}: empty trace (no requests)", path.display());
    }
    Ok(BlockTrace { requests })
}

/// Reads the trace at `path` as runs of pages of `page_bytes`, without
/// keeping each request whole (16 bytes per request); a trace without
/// requests is an error.
pub fn read_pages(path: &Path, format: &Format, page_bytes: u64) -> Result<PageTrace> {
    // Text traces hold about one request per 20 bytes; binary ones 24-40.
    let file_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let hint = (file_bytes / 24).min(1 << 28) as usize;
    let t = PageTrace::gather(open(path, format)?, page_bytes, hint)?;
    if t.requests == 0 {
        bail!("{}: empty trace (no requests)", path.display());
    }
    Ok(t)
}

/// Writes `trace` to `path` in `format` (zstd-compressed when the name
/// ends in `.zst`); returns what the format could not keep.
pub fn write(
    trace: &BlockTrace,
    path: &Path,
    format: &Format,
    page_bytes: u64,
) -> Result<Vec<String>> {
    let name = path.display();
    let file = File::create(path).with_context(|| format!("{name}: cannot create"))?;
    let compress = path.extension().is_some_and(|e| e == "zst");
    let written = if compress {
        let mut enc = zstd::stream::write::Encoder::new(BufWriter::new(file), 3)?;
        write_to(trace, &mut enc, format, page_bytes).and_then(|notes| {
            enc.finish()?.flush()?;
            Ok(notes)
        })
    } else {
        let mut out = BufWriter::with_capacity(1 << 20, file);
        write_to(trace, &mut out, format, page_bytes).and_then(|notes| {
            out.flush()?;
            Ok(notes)
        })
    };
    let notes = written.with_context(|| format!("{name}: cannot write"))?;
    Ok(notes)
}

/// Writes `trace` to `out` in `format`; returns what the format could not keep.
pub fn write_to(
    trace: &BlockTrace,
    out: &mut dyn Write,
    format: &Format,
    page_bytes: u64,
) -> Result<Vec<String>> {
    match format {
        Format::Arc => arc::write(trace, out),
        Format::Msr => msr::write(trace, out),
        Format::Alibaba => alibaba::write(trace, out),
        Format::Tencent => tencent::write(trace, out),
        Format::Blkparse { .. } => blkparse::write(trace, out),
        Format::Oracle {
            with_op,
            id_unit_bytes,
        } => {
            if *id_unit_bytes != 1 {
                bail!("oracle formats are written with byte offsets as object ids (no :ID_UNIT)");
            }
            oracle::write(trace, page_bytes, *with_op, out)
        }
        Format::Vscsi => vscsi::write(trace, out),
        Format::Csv(spec) => {
            if *spec != csv_spec::WRITTEN_SPEC.parse::<CsvSpec>()? {
                bail!(
                    "csv is written with its own spec: give --to csv (or csv:{})",
                    csv_spec::WRITTEN_SPEC
                );
            }
            csv_spec::write(trace, out)
        }
    }
}
