//! The ARC paper's trace format (Megiddo and Modha, FAST '03): one request
//! per line, `start_block block_count ignored request_number`, in 512-byte
//! pages, plain or zstd-compressed. Requests are kept as runs of pages and
//! expanded one page at a time as they are replayed, so memory does not
//! depend on request sizes.

use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// A trace in memory: its requests as runs of pages.
#[derive(Debug)]
pub struct Trace {
    /// Each request's first page and page count, in order.
    pub runs: Vec<(u64, u32)>,
    /// Requests (lines) read.
    pub requests: u64,
    /// Page references in all (the sum of the runs' counts).
    pub page_count: u64,
}

impl Trace {
    /// The page references in order, one page at a time.
    pub fn pages(&self) -> impl Iterator<Item = u64> + Clone + '_ {
        self.runs
            .iter()
            .flat_map(|&(start, count)| start..start + count as u64)
    }
}

/// Reads a trace file, decompressing zstd when the file starts with its magic.
pub fn read_trace(path: &Path) -> Result<Trace> {
    let name = path.display().to_string();
    let raw = std::fs::read(path).with_context(|| format!("{name}: cannot read"))?;
    let text = if raw.starts_with(&ZSTD_MAGIC) {
        let mut out = Vec::new();
        zstd::stream::read::Decoder::new(&raw[..])
            .and_then(|mut d| d.read_to_end(&mut out))
            .with_context(|| format!("{name}: zstd stream is corrupt or truncated"))?;
        out
    } else {
        raw
    };
    parse_trace(&text, &name)
}

fn field(tok: Option<&[u8]>, name: &str, file: &str, line: usize) -> Result<u64> {
    let Some(t) = tok else {
        bail!("{file}:{line}: field '{name}': missing (truncated line?)");
    };
    let mut v: u64 = 0;
    if t.is_empty() {
        bail!("{file}:{line}: field '{name}': empty");
    }
    for &c in t {
        if !c.is_ascii_digit() {
            bail!(
                "{file}:{line}: field '{name}': '{}' is not a non-negative integer",
                String::from_utf8_lossy(t)
            );
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add((c - b'0') as u64))
            .with_context(|| format!("{file}:{line}: field '{name}': value too large"))?;
    }
    Ok(v)
}

/// Parses trace text; errors name the file, line and field.
pub fn parse_trace(text: &[u8], file: &str) -> Result<Trace> {
    let mut runs = Vec::with_capacity(text.len() / 16);
    let mut requests = 0;
    let mut page_count = 0;
    if !text.is_empty() && !text.ends_with(b"\n") {
        let line = text.split(|&c| c == b'\n').count();
        bail!("{file}:{line}: trace is truncated (the last line has no newline)");
    }
    for (i, l) in text.split(|&c| c == b'\n').enumerate() {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        if l.iter().all(|c| c.is_ascii_whitespace()) {
            continue;
        }
        let line = i + 1;
        let mut toks = l
            .split(|c| c.is_ascii_whitespace())
            .filter(|t| !t.is_empty());
        let start = field(toks.next(), "start_block", file, line)?;
        let count = field(toks.next(), "block_count", file, line)?;
        field(toks.next(), "ignored", file, line)?;
        field(toks.next(), "request_number", file, line)?;
        if toks.next().is_some() {
            bail!("{file}:{line}: more than four fields");
        }
        if count == 0 || count > 1 << 24 {
            bail!("{file}:{line}: field 'block_count': {count} is out of range [1, 16777216]");
        }
        start.checked_add(count).with_context(|| {
            format!("{file}:{line}: field 'start_block': request overflows the address space")
        })?;
        runs.push((start, count as u32));
        page_count += count;
        requests += 1;
    }
    Ok(Trace {
        runs,
        requests,
        page_count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request of the largest size is one run in memory, expanded only
    /// while it is read.
    #[test]
    fn large_requests_stay_runs() {
        let t = parse_trace(b"5 16777216 0 1\n9 2 0 2\n", "t").unwrap();
        assert_eq!(t.runs, vec![(5, 1 << 24), (9, 2)]);
        assert_eq!(t.page_count, (1 << 24) + 2);
        assert_eq!(t.pages().take(2).collect::<Vec<_>>(), vec![5, 6]);
        assert_eq!(t.pages().last(), Some(10));
    }

    #[test]
    fn expands_requests_and_reports_bad_lines() {
        let t = parse_trace(b"10 3 0 0\n20 1 0 1\n", "t").unwrap();
        assert_eq!(t.pages().collect::<Vec<_>>(), vec![10, 11, 12, 20]);
        assert_eq!(t.requests, 2);
        let e = parse_trace(b"10 3 0 0\n20 x 0 1\n", "t")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "t:2: field 'block_count': 'x' is not a non-negative integer"
        );
        let e = parse_trace(b"10 3 0 0\n20 1\n", "t")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "t:2: field 'ignored': missing (truncated line?)");
        let e = parse_trace(b"10 3 0 0\n20 1 0", "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("truncated"), "{e}");
    }

    #[test]
    fn truncated_or_corrupt_zstd_is_an_error_naming_the_file() {
        let text: String = (0..5000).map(|i| format!("{i} 2 0 {i}\n")).collect();
        let packed = zstd::encode_all(text.as_bytes(), 3).unwrap();
        let dir = std::env::temp_dir().join(format!("tiermux-replay-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let whole = dir.join("whole.lis.zst");
        std::fs::write(&whole, &packed).unwrap();
        assert_eq!(read_trace(&whole).unwrap().page_count, 10_000);
        let cut = dir.join("cut.lis.zst");
        std::fs::write(&cut, &packed[..packed.len() / 2]).unwrap();
        let e = format!("{:#}", read_trace(&cut).unwrap_err());
        assert!(
            e.contains("cut.lis.zst") && e.contains("corrupt or truncated"),
            "{e}"
        );
        let mut bad = packed.clone();
        let n = bad.len();
        bad[n / 2..].iter_mut().for_each(|b| *b ^= 0x5A);
        let garbled = dir.join("garbled.lis.zst");
        std::fs::write(&garbled, &bad).unwrap();
        assert!(read_trace(&garbled).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[cfg(test)]
mod arc_trace {
    use super::*;
    use crate::replay::{hit_ratio, replay_policy};
    use tiermux_core::replacement::ReplacementKind;

    /// The ARC paper's OLTP trace (Megiddo and Modha, FAST '03), kept in
    /// the repository's `traces/`. LRU must match Table IV exactly, ARC
    /// within 0.05 points.
    #[test]
    fn oltp_hit_ratios_match_the_arc_paper() {
        // The trace is in the repository (traces/README.md cites the paper).
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/arc/OLTP.lis.zst");
        let t = read_trace(&path).unwrap();
        assert_eq!(t.page_count, 914_145);
        let table = [
            (1_000, 32.83, 38.93),
            (2_000, 42.47, 46.08),
            (5_000, 53.65, 55.25),
            (10_000, 60.70, 61.87),
            (15_000, 64.63, 65.40),
        ];
        for (n, lru, arc) in table {
            let l = (hit_ratio(t.pages(), ReplacementKind::Lru, n) * 10_000.0).round() / 100.0;
            assert_eq!(l, lru, "LRU {n}");
            let a = hit_ratio(t.pages(), ReplacementKind::Arc, n) * 100.0;
            assert!((a - arc).abs() <= 0.05, "ARC {n}: {a} vs {arc}");
        }
        // One pass of stack distances gives the whole LRU column.
        let mrc = crate::mrc::MissRatioCurve::of(t.pages(), t.page_count as usize);
        assert_eq!(mrc.distinct_pages(), 186_880, "the paper's Table III");
        for (n, lru, _) in table {
            let l = (mrc.hit_ratio(n) * 10_000.0).round() / 100.0;
            assert_eq!(l, lru, "one-pass LRU {n}");
        }
        // Sampling a tenth of the pages (SHARDS-adj) stays within 2.5
        // points of the paper's column (measured: at most 2.04).
        let sampled = crate::mrc::SampledCurve::of(t.pages(), 0.1);
        for (n, lru, _) in table {
            let err = (sampled.hit_ratio(n) * 100.0 - lru).abs();
            assert!(err < 2.5, "sampled LRU {n}: {err} points off");
        }
        // Classic caching (LRU by default) through the dispatcher gives
        // Table IV's LRU column too, every hit served by the cache.
        for (n, lru, _) in &table[..3] {
            let s = replay_policy(
                "classic",
                &tiermux_core::Params::new(),
                t.pages(),
                *n as u64,
            )
            .unwrap();
            assert_eq!(
                (s.hit_ratio() * 10_000.0).round() / 100.0,
                *lru,
                "classic {n}"
            );
            assert_eq!(s.hits_by_device[0], s.hits());
        }
    }
}
