//! What a trace holds: requests and pages by operation, distinct pages,
//! footprint, request sizes and sequentiality (`tiermux trace info`).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use tiermux_core::map::{BlockHasher, BlockMap};
use tiermux_core::Op;

use crate::request::BlockTrace;

/// Upper bounds of the request-size classes, in bytes; larger requests
/// fall in a last class.
pub const SIZE_CLASS_BYTES: [u64; 12] = [
    512,
    1 << 10,
    2 << 10,
    4 << 10,
    8 << 10,
    16 << 10,
    32 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
];

/// Counts of one operation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpCounts {
    /// Requests.
    pub requests: u64,
    /// Bytes the requests address.
    pub bytes: u64,
    /// Page references (a request counts every page it touches).
    pub pages: u64,
    /// Distinct pages referenced.
    pub unique_pages: u64,
    /// Requests that start where the previous request of the same
    /// operation and volume ended.
    pub sequential_requests: u64,
}

/// Statistics of a trace at one page size.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceInfo {
    /// The page size the page counts use.
    pub page_bytes: u64,
    /// Reads.
    pub reads: OpCounts,
    /// Writes.
    pub writes: OpCounts,
    /// Requests of zero bytes (they touch no page).
    pub empty_requests: u64,
    /// Distinct pages referenced by either operation.
    pub unique_pages: u64,
    /// Requests per size class ([`SIZE_CLASS_BYTES`], then larger).
    pub size_classes: [u64; SIZE_CLASS_BYTES.len() + 1],
    /// Distinct volumes.
    pub volumes: u64,
    /// First and last request time, ns.
    pub time_span_ns: (u64, u64),
}

impl TraceInfo {
    /// Counts `trace` at `page_bytes`.
    pub fn of(trace: &BlockTrace, page_bytes: u64) -> TraceInfo {
        let mut info = TraceInfo {
            page_bytes,
            time_span_ns: (u64::MAX, 0),
            ..TraceInfo::default()
        };
        const READ: u8 = 1;
        const WRITE: u8 = 2;
        let mut seen: HashMap<(u32, u64), u8, BuildHasherDefault<BlockHasher>> = HashMap::default();
        let mut ends: BlockMap<u64> = BlockMap::default();
        for r in &trace.requests {
            let (counts, bit) = match r.op {
                Op::Read => (&mut info.reads, READ),
                Op::Write => (&mut info.writes, WRITE),
            };
            counts.requests += 1;
            counts.bytes += r.size_bytes as u64;
            let key = (r.volume as u64) << 1 | (bit == WRITE) as u64;
            if ends.insert(key, r.end_bytes()) == Some(r.offset_bytes) && r.size_bytes > 0 {
                counts.sequential_requests += 1;
            }
            let class = SIZE_CLASS_BYTES
                .iter()
                .position(|&b| r.size_bytes as u64 <= b)
                .unwrap_or(SIZE_CLASS_BYTES.len());
            info.size_classes[class] += 1;
            info.empty_requests += (r.size_bytes == 0) as u64;
            info.time_span_ns.0 = info.time_span_ns.0.min(r.time_ns);
            info.time_span_ns.1 = info.time_span_ns.1.max(r.time_ns);
            for p in r.pages(page_bytes) {
                counts.pages += 1;
                let flags = seen.entry((r.volume, p)).or_insert(0);
                counts.unique_pages += (*flags & bit == 0) as u64;
                *flags |= bit;
            }
        }
        info.unique_pages = seen.len() as u64;
        info.volumes = {
            let mut v: Vec<u32> = trace.requests.iter().map(|r| r.volume).collect();
            v.sort_unstable();
            v.dedup();
            v.len() as u64
        };
        if trace.requests.is_empty() {
            info.time_span_ns = (0, 0);
        }
        info
    }

    /// All requests.
    pub fn requests(&self) -> u64 {
        self.reads.requests + self.writes.requests
    }

    /// All page references.
    pub fn pages(&self) -> u64 {
        self.reads.pages + self.writes.pages
    }

    /// Bytes of the distinct pages (the working set at this page size).
    pub fn footprint_bytes(&self) -> u64 {
        self.unique_pages * self.page_bytes
    }

    /// Mean request size in bytes.
    pub fn mean_request_bytes(&self) -> f64 {
        (self.reads.bytes + self.writes.bytes) as f64 / self.requests().max(1) as f64
    }

    /// A human-readable report.
    pub fn report(&self) -> String {
        let mut s = String::new();
        let pct = |a: u64, b: u64| 100.0 * a as f64 / b.max(1) as f64;
        let n = self.requests();
        s += &format!("requests        {n} ({} volumes)\n", self.volumes);
        for (name, c) in [("reads", &self.reads), ("writes", &self.writes)] {
            s += &format!(
                "{name:<15} {} ({:.1} %), {:.1} MiB, {} page refs, {} distinct pages, {:.1} % sequential\n",
                c.requests,
                pct(c.requests, n),
                c.bytes as f64 / (1u64 << 20) as f64,
                c.pages,
                c.unique_pages,
                pct(c.sequential_requests, c.requests)
            );
        }
        s += &format!(
            "pages           {} refs of {} bytes, {} distinct, footprint {:.1} MiB\n",
            self.pages(),
            self.page_bytes,
            self.unique_pages,
            self.footprint_bytes() as f64 / (1u64 << 20) as f64
        );
        s += &format!(
            "request size    mean {:.0} bytes, {} empty\n",
            self.mean_request_bytes(),
            self.empty_requests
        );
        for (i, &count) in self.size_classes.iter().enumerate() {
            if count == 0 {
                continue;
            }
            let label = match SIZE_CLASS_BYTES.get(i) {
                Some(&b) => format!("<= {}", size_label(b)),
                None => format!(
                    "> {}",
                    size_label(SIZE_CLASS_BYTES[SIZE_CLASS_BYTES.len() - 1])
                ),
            };
            s += &format!("  {label:<12} {count:>12} ({:.1} %)\n", pct(count, n));
        }
        let span_s = (self.time_span_ns.1 - self.time_span_ns.0) as f64 / 1e9;
        s += &format!("time span       {span_s:.3} s\n");
        s
    }
}

fn size_label(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Request;

    fn r(op: Op, offset_bytes: u64, size_bytes: u32) -> Request {
        Request {
            time_ns: offset_bytes,
            volume: 0,
            op,
            offset_bytes,
            size_bytes,
        }
    }

    #[test]
    fn counts_pages_distinct_pages_and_runs() {
        let t = BlockTrace {
            requests: vec![
                r(Op::Read, 0, 8192),
                r(Op::Read, 8192, 4096),
                r(Op::Write, 4096, 4096),
                r(Op::Write, 100_000, 0),
                r(Op::Write, 4096, 2 << 20),
            ],
        };
        let i = TraceInfo::of(&t, 4096);
        assert_eq!(i.requests(), 5);
        assert_eq!((i.reads.requests, i.writes.requests), (2, 3));
        assert_eq!((i.reads.pages, i.writes.pages), (3, 1 + 512));
        assert_eq!((i.reads.unique_pages, i.writes.unique_pages), (3, 512));
        assert_eq!(i.unique_pages, 513);
        assert_eq!(i.footprint_bytes(), 513 * 4096);
        assert_eq!(i.reads.sequential_requests, 1);
        assert_eq!(i.writes.sequential_requests, 0);
        assert_eq!(i.empty_requests, 1);
        assert_eq!(i.size_classes[0], 1, "the empty request");
        assert_eq!(i.size_classes[3], 2, "two 4 KiB requests");
        assert_eq!(i.size_classes[4], 1);
        assert_eq!(i.size_classes[12], 1, "over 1 MiB");
        assert_eq!(i.time_span_ns, (0, 100_000));
    }
}
