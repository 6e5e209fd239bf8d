//! One block request of a trace, as every trace format is read into.

use tiermux_core::Op;

/// Bytes in a sector, the unit of several trace formats' offsets.
pub const SECTOR_BYTES: u64 = 512;

/// One request of a block trace: a read or a write of a byte range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// When the request was issued, in nanoseconds since the format's
    /// epoch (0 for formats without time).
    pub time_ns: u64,
    /// The volume, disk or device the request addresses (the format's
    /// device, disk or volume number; 0 where the format has none).
    pub volume: u32,
    /// Read or write.
    pub op: Op,
    /// First byte addressed.
    pub offset_bytes: u64,
    /// Bytes addressed (0 for the few empty requests some traces hold).
    pub size_bytes: u32,
}

impl Request {
    /// A request of `size_bytes` at `offset_bytes` of `volume`, issued at
    /// `time_ns`.
    pub fn new(time_ns: u64, volume: u32, op: Op, offset_bytes: u64, size_bytes: u32) -> Self {
        Request {
            time_ns,
            volume,
            op,
            offset_bytes,
            size_bytes,
        }
    }

    /// The pages of `page_bytes` bytes the request touches, first to
    /// last: a request that starts or ends inside a page touches all of it.
    pub fn pages(&self, page_bytes: u64) -> std::ops::Range<u64> {
        assert!(page_bytes > 0, "pages of zero bytes");
        if self.size_bytes == 0 {
            let p = self.offset_bytes / page_bytes;
            return p..p;
        }
        let first = self.offset_bytes / page_bytes;
        let last = (self.offset_bytes + self.size_bytes as u64 - 1) / page_bytes;
        first..last + 1
    }

    /// The byte just past the request.
    pub fn end_bytes(&self) -> u64 {
        self.offset_bytes + self.size_bytes as u64
    }
}

/// A trace in memory: its requests in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockTrace {
    /// The requests in trace order.
    pub requests: Vec<Request>,
}

impl BlockTrace {
    /// Page references in order, each with its request's operation.
    pub fn page_accesses(&self, page_bytes: u64) -> impl Iterator<Item = (u64, Op)> + Clone + '_ {
        self.requests
            .iter()
            .flat_map(move |r| r.pages(page_bytes).map(move |p| (p, r.op)))
    }

    /// Page numbers in order, reads and writes alike.
    pub fn pages(&self, page_bytes: u64) -> impl Iterator<Item = u64> + Clone + '_ {
        self.page_accesses(page_bytes).map(|(p, _)| p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(offset_bytes: u64, size_bytes: u32) -> Request {
        Request {
            time_ns: 0,
            volume: 0,
            op: Op::Read,
            offset_bytes,
            size_bytes,
        }
    }

    #[test]
    fn a_request_touches_every_page_it_overlaps() {
        assert_eq!(req(0, 4096).pages(4096), 0..1);
        assert_eq!(req(4095, 2).pages(4096), 0..2);
        assert_eq!(req(8192, 8193).pages(4096), 2..5);
        assert_eq!(req(512, 512).pages(512), 1..2);
        assert_eq!(req(4096, 0).pages(4096).count(), 0);
    }
}

/// A request as the pages it touches: 16 bytes, for replaying traces of
/// tens of millions of requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRun {
    /// The first page touched.
    pub first_page: u64,
    /// Pages touched from it.
    pub pages: u32,
    /// Whether the request writes.
    pub write: bool,
}

/// A trace as runs of pages of one size, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageTrace {
    /// One run per request that touches a page.
    pub runs: Vec<PageRun>,
    /// Requests read, empty ones included.
    pub requests: u64,
}

impl PageTrace {
    /// Gathers the pages of `page_bytes` that `requests` touch.
    pub fn gather(
        requests: impl Iterator<Item = anyhow::Result<Request>>,
        page_bytes: u64,
        size_hint: usize,
    ) -> anyhow::Result<PageTrace> {
        let mut t = PageTrace {
            runs: Vec::with_capacity(size_hint),
            requests: 0,
        };
        for r in requests {
            let r = r?;
            t.requests += 1;
            let p = r.pages(page_bytes);
            if p.is_empty() {
                continue;
            }
            t.runs.push(PageRun {
                first_page: p.start,
                pages: u32::try_from(p.end - p.start).expect("a request of at most 4 GiB"),
                write: r.op == Op::Write,
            });
        }
        Ok(t)
    }

    /// Page references in order, each with its request's operation.
    pub fn page_accesses(&self) -> impl Iterator<Item = (u64, Op)> + Clone + '_ {
        self.runs.iter().flat_map(|r| {
            let op = if r.write { Op::Write } else { Op::Read };
            (r.first_page..r.first_page + r.pages as u64).map(move |p| (p, op))
        })
    }

    /// Page numbers in order, reads and writes alike.
    pub fn pages(&self) -> impl Iterator<Item = u64> + Clone + '_ {
        self.runs
            .iter()
            .flat_map(|r| r.first_page..r.first_page + r.pages as u64)
    }

    /// Page references in all.
    pub fn page_count(&self) -> u64 {
        self.runs.iter().map(|r| r.pages as u64).sum()
    }
}
