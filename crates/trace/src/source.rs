//! Reading a trace file as a stream of records: plain or zstd-compressed,
//! text split into lines or binary split into fixed-size records, with
//! errors that name the file and the line or byte offset.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::request::{Request, SECTOR_BYTES};

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
const READ_BUFFER_BYTES: usize = 1 << 20;

/// Opens `path` for reading, decompressing it when it starts with the
/// zstd magic number.
pub fn open_bytes(path: &Path) -> Result<Box<dyn BufRead>> {
    let name = path.display();
    let file = File::open(path).with_context(|| format!("{name}: cannot open"))?;
    let mut plain = BufReader::with_capacity(READ_BUFFER_BYTES, file);
    let head = plain
        .fill_buf()
        .with_context(|| format!("{name}: cannot read"))?;
    if head.starts_with(&ZSTD_MAGIC) {
        let decoder = zstd::stream::read::Decoder::with_buffer(plain)
            .with_context(|| format!("{name}: cannot start zstd decoding"))?;
        Ok(Box::new(BufReader::with_capacity(
            READ_BUFFER_BYTES,
            decoder,
        )))
    } else {
        Ok(Box::new(plain))
    }
}

/// Where a record sits in its file, for error messages.
#[derive(Clone, Copy, Debug)]
pub struct Pos<'a> {
    /// The file's name as the user gave it.
    pub file: &'a str,
    /// 1-based line of a text record, or byte offset of a binary one.
    pub at: u64,
    /// Whether `at` is a byte offset (binary) rather than a line.
    pub binary: bool,
}

impl std::fmt::Display for Pos<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.binary {
            write!(f, "{}: byte {}", self.file, self.at)
        } else {
            write!(f, "{}:{}", self.file, self.at)
        }
    }
}

/// What a format made of one record.
pub enum Parsed {
    /// A request.
    Request(Request),
    /// Nothing to replay (a header, a comment, an event of another kind).
    Skip,
    /// The records are over (a summary follows).
    End,
}

/// A text format: one record per line.
pub trait LineFormat {
    /// Parses one line (without its line ending); errors name `pos` and
    /// the field.
    fn parse(&mut self, line: &[u8], pos: Pos) -> Result<Parsed>;
}

/// A binary format: records of a fixed size.
pub trait RecordFormat {
    /// Bytes per record.
    fn record_bytes(&self) -> usize;
    /// Parses one record; errors name `pos` and the field.
    fn parse(&mut self, record: &[u8], pos: Pos) -> Result<Parsed>;
}

/// Where requests come from: the next one, `None` at the end.
trait Source {
    fn next_request(&mut self) -> Result<Option<Request>>;
}

/// A stream of requests read from a file; it ends after the first error.
pub struct Requests {
    source: Box<dyn Source>,
    done: bool,
}

impl Requests {
    /// Requests from text lines of `input`, named `file` in errors.
    pub fn text(input: Box<dyn BufRead>, file: String, format: impl LineFormat + 'static) -> Self {
        let lines = TextSource {
            input,
            file,
            format,
            line: 0,
            buf: Vec::with_capacity(256),
        };
        Requests {
            source: Box::new(lines),
            done: false,
        }
    }

    /// Requests from fixed-size records of `input`, named `file` in errors.
    pub fn binary(
        input: Box<dyn BufRead>,
        file: String,
        format: impl RecordFormat + 'static,
    ) -> Self {
        let records = BinarySource {
            buf: vec![0; format.record_bytes()],
            input,
            file,
            format,
            offset: 0,
        };
        Requests {
            source: Box::new(records),
            done: false,
        }
    }
}

impl Iterator for Requests {
    type Item = Result<Request>;

    fn next(&mut self) -> Option<Result<Request>> {
        if self.done {
            return None;
        }
        let r = self.source.next_request().transpose();
        self.done = !matches!(r, Some(Ok(_)));
        r
    }
}

struct TextSource<F> {
    input: Box<dyn BufRead>,
    file: String,
    format: F,
    line: u64,
    buf: Vec<u8>,
}

impl<F: LineFormat> Source for TextSource<F> {
    fn next_request(&mut self) -> Result<Option<Request>> {
        loop {
            self.buf.clear();
            let n = self
                .input
                .read_until(b'\n', &mut self.buf)
                .with_context(|| {
                    format!(
                        "{}:{}: cannot read (a corrupt or truncated zstd stream?)",
                        self.file,
                        self.line + 1
                    )
                })?;
            if n == 0 {
                return Ok(None);
            }
            self.line += 1;
            let pos = Pos {
                file: &self.file,
                at: self.line,
                binary: false,
            };
            let Some(line) = self.buf.strip_suffix(b"\n") else {
                if self.buf.iter().all(u8::is_ascii_whitespace) {
                    return Ok(None);
                }
                bail!("{pos}: trace is truncated (the last line has no newline)");
            };
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match self.format.parse(line, pos)? {
                Parsed::Request(r) => return Ok(Some(r)),
                Parsed::Skip => continue,
                Parsed::End => return Ok(None),
            }
        }
    }
}

struct BinarySource<F> {
    input: Box<dyn BufRead>,
    file: String,
    format: F,
    offset: u64,
    buf: Vec<u8>,
}

impl<F: RecordFormat> BinarySource<F> {
    /// Fills the record buffer; false at a clean end of file.
    fn fill(&mut self) -> Result<bool> {
        let mut got = 0;
        while got < self.buf.len() {
            let n = self.input.read(&mut self.buf[got..]).with_context(|| {
                format!(
                    "{}: byte {}: cannot read (a corrupt or truncated zstd stream?)",
                    self.file,
                    self.offset + got as u64
                )
            })?;
            if n == 0 {
                if got == 0 {
                    return Ok(false);
                }
                bail!(
                    "{}: byte {}: trace is truncated (a record of {} bytes has {got})",
                    self.file,
                    self.offset,
                    self.buf.len()
                );
            }
            got += n;
        }
        Ok(true)
    }
}

impl<F: RecordFormat> Source for BinarySource<F> {
    fn next_request(&mut self) -> Result<Option<Request>> {
        loop {
            if !self.fill()? {
                return Ok(None);
            }
            let pos = Pos {
                file: &self.file,
                at: self.offset,
                binary: true,
            };
            let parsed = self.format.parse(&self.buf, pos)?;
            self.offset += self.buf.len() as u64;
            match parsed {
                Parsed::Request(r) => return Ok(Some(r)),
                Parsed::Skip => continue,
                Parsed::End => return Ok(None),
            }
        }
    }
}

/// The fields of one text line, split on a delimiter or on whitespace.
pub struct Fields<'a> {
    rest: Option<&'a [u8]>,
    delimiter: Option<u8>,
    pos: Pos<'a>,
}

impl<'a> Fields<'a> {
    /// Fields of `line` split on `delimiter`, or on runs of whitespace
    /// when it is `None`.
    pub fn new(line: &'a [u8], delimiter: Option<u8>, pos: Pos<'a>) -> Self {
        let line = match delimiter {
            None => line.trim_ascii(),
            Some(_) => line,
        };
        Fields {
            rest: Some(line),
            delimiter,
            pos,
        }
    }

    /// The next field, or an error naming it when the line has no more.
    pub fn text(&mut self, name: &str) -> Result<&'a [u8]> {
        let Some(rest) = self.rest else {
            bail!("{}: field '{name}': missing (truncated line?)", self.pos);
        };
        let (field, after) = match self.delimiter {
            Some(d) => match rest.iter().position(|&c| c == d) {
                Some(i) => (&rest[..i], Some(&rest[i + 1..])),
                None => (rest, None),
            },
            None => match rest.iter().position(u8::is_ascii_whitespace) {
                Some(i) => (&rest[..i], Some(rest[i..].trim_ascii_start())),
                None => (rest, None),
            },
        };
        self.rest = after;
        Ok(field)
    }

    /// The next field as a non-negative decimal integer.
    pub fn u64(&mut self, name: &str) -> Result<u64> {
        let t = self.text(name)?;
        parse_u64(t.trim_ascii())
            .map_err(|why| anyhow::anyhow!("{}: field '{name}': {why}", self.pos))
    }

    /// The next field as a non-negative decimal integer below 2^32.
    pub fn u32(&mut self, name: &str) -> Result<u32> {
        let v = self.u64(name)?;
        u32::try_from(v)
            .map_err(|_| anyhow::anyhow!("{}: field '{name}': {v} is too large", self.pos))
    }

    /// Skips the next field (it must be there).
    pub fn skip(&mut self, name: &str) -> Result<()> {
        self.text(name).map(|_| ())
    }

    /// Whether fields remain.
    pub fn has_more(&self) -> bool {
        self.rest.is_some()
    }

    /// Refuses a line with more than the fields read so far.
    pub fn end(&self, expected: usize) -> Result<()> {
        if self.has_more() {
            bail!("{}: more than {expected} fields", self.pos);
        }
        Ok(())
    }

    /// The position, for the format's own messages.
    pub fn pos(&self) -> Pos<'a> {
        self.pos
    }
}

/// Parses a non-negative decimal integer; the error says why not.
pub fn parse_u64(t: &[u8]) -> Result<u64, String> {
    if t.is_empty() {
        return Err("empty".into());
    }
    let mut v: u64 = 0;
    for &c in t {
        if !c.is_ascii_digit() {
            return Err(format!(
                "'{}' is not a non-negative integer",
                String::from_utf8_lossy(t)
            ));
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add((c - b'0') as u64))
            .ok_or_else(|| format!("'{}' is too large", String::from_utf8_lossy(t)))?;
    }
    Ok(v)
}

/// Checks a request's size fits the request type and its end the
/// address space.
pub fn checked_size(offset_bytes: u64, size_bytes: u64, pos: Pos, field: &str) -> Result<u32> {
    let Ok(size) = u32::try_from(size_bytes) else {
        bail!("{pos}: field '{field}': {size_bytes} bytes is larger than 4 GiB");
    };
    if offset_bytes.checked_add(size_bytes).is_none() {
        bail!("{pos}: field '{field}': the request runs past the 64-bit address space");
    }
    Ok(size)
}

/// Multiplies a field by its unit, refusing overflow.
pub fn scaled(value: u64, unit: u64, pos: Pos, field: &str) -> Result<u64> {
    value
        .checked_mul(unit)
        .with_context(|| format!("{pos}: field '{field}': {value} x {unit} overflows 64 bits"))
}

/// A little-endian u16 at the start of `b`.
pub fn le_u16(b: &[u8]) -> u16 {
    u16::from_le_bytes([b[0], b[1]])
}

/// A little-endian u32 at the start of `b`.
pub fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b[..4].try_into().expect("four bytes"))
}

/// A little-endian u64 at the start of `b`.
pub fn le_u64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("eight bytes"))
}

/// A request widened to whole 512-byte sectors: (first sector, sectors,
/// whether it had to be widened).
pub fn sector_span(r: &Request) -> (u64, u64, bool) {
    let first = r.offset_bytes / SECTOR_BYTES;
    let end = r.end_bytes().div_ceil(SECTOR_BYTES);
    let widened = first * SECTOR_BYTES != r.offset_bytes || end * SECTOR_BYTES != r.end_bytes();
    (first, end - first, widened)
}
