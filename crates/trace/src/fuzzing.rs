//! Entry point for fuzzing the trace readers with arbitrary bytes. The
//! `fuzz/` crate's `trace_formats` target calls [`trace_bytes`] under
//! `cargo fuzz` (nightly); a stable test here runs it on random and
//! damaged input, so it stays built and working. A reader that panics, or
//! a request whose pages cannot be counted, aborts the process: a finding.

use std::io::Cursor;

use crate::formats::{self, Format};

/// The formats an input can be read as, chosen by its first byte: every
/// reader, with and without its options.
const FORMATS: [&str; 12] = [
    "arc",
    "msr",
    "alibaba",
    "tencent",
    "blkparse",
    "blkparse:Q",
    "oracle-general",
    "oracle-general-opns:512",
    "vscsi",
    "csv",
    "csv:obj-id-col=2,obj-size-col=1,op-col=3,has-header=false,delimiter=\\t",
    "csv:time-col=3,obj-id-col=1,obj-id-unit=512,volume-col=2,delimiter=;",
];

/// Reads `data` as a trace file: its first byte picks the format, the rest
/// is the file's bytes. Reading stops at the first error. Returns the
/// requests read and the pages of 4 KiB they touch.
pub fn trace_bytes(data: &[u8]) -> (u64, u64) {
    let Some((&pick, body)) = data.split_first() else {
        return (0, 0);
    };
    let format: Format = FORMATS[pick as usize % FORMATS.len()]
        .parse()
        .expect("the fuzzed formats are valid");
    let input = Box::new(Cursor::new(body.to_vec()));
    let Ok(requests) = formats::read_from(input, "fuzzed".into(), &format) else {
        return (0, 0);
    };
    let (mut read, mut pages) = (0u64, 0u64);
    for request in requests {
        let Ok(r) = request else { break };
        let range = r.pages(4096);
        assert!(range.start <= range.end, "pages {range:?} of {r:?}");
        assert!(r.offset_bytes.checked_add(r.size_bytes as u64).is_some());
        read += 1;
        pages += range.end - range.start;
    }
    (read, pages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{BlockTrace, Request};
    use tiermux_core::rng::Rng;
    use tiermux_core::Op;

    /// A small trace of 20 requests in `format`, as the file's bytes.
    fn written(format: &str, dir: &std::path::Path) -> Vec<u8> {
        let op = |i: u64| if i.is_multiple_of(3) { "W" } else { "R" };
        match format {
            "csv:obj-id-col=2,obj-size-col=1,op-col=3,has-header=false,delimiter=\\t" => {
                let lines = (0..20u64).map(|i| format!("4096\t{}\t{}\n", i * 8192, op(i)));
                return lines.collect::<String>().into_bytes();
            }
            "csv:time-col=3,obj-id-col=1,obj-id-unit=512,volume-col=2,delimiter=;" => {
                let lines = (0..20u64).map(|i| format!("{};1;{}\n", i * 8, i * 10));
                return lines.collect::<String>().into_bytes();
            }
            _ => {}
        }
        let requests = (0..20u64)
            .map(|i| {
                let op = if i.is_multiple_of(3) {
                    Op::Write
                } else {
                    Op::Read
                };
                Request::new(i * 1000, 0, op, (i * 7919 % 64) * 4096, 4096)
            })
            .collect();
        let path = dir.join("t");
        // Oracle files are written with byte offsets as ids (no unit).
        let writer = format.strip_suffix(":512").unwrap_or(format);
        let parsed: Format = writer.parse().unwrap();
        formats::write(&BlockTrace { requests }, &path, &parsed, 4096).unwrap();
        let text = std::fs::read(&path).unwrap();
        if format != "blkparse:Q" {
            return text;
        }
        // The writer writes issue (D) events; a queue (Q) reader wants Q.
        String::from_utf8(text)
            .unwrap()
            .replace("  D  ", "  Q  ")
            .into_bytes()
    }

    /// Every format reads its own files through the entry point, and
    /// random or damaged bytes give requests or nothing, never a panic.
    #[test]
    fn every_format_survives_random_and_damaged_input() {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = Rng::new(5);
        for (pick, name) in FORMATS.iter().enumerate() {
            let clean = written(name, dir.path());
            let mut input = vec![pick as u8];
            input.extend(&clean);
            assert_eq!(trace_bytes(&input).0, 20, "{name} reads its own file");
            for _ in 0..200 {
                let mut damaged = input.clone();
                for _ in 0..1 + rng.below(4) {
                    let i = 1 + rng.below(damaged.len() as u64 - 1) as usize;
                    damaged[i] = rng.below(256) as u8;
                }
                damaged.truncate(1 + rng.below(damaged.len() as u64) as usize);
                trace_bytes(&damaged);
            }
        }
        for _ in 0..2_000 {
            let len = rng.below(300) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            trace_bytes(&bytes);
        }
    }
}
