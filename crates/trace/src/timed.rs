//! A trace laid out for a timed run: each request's time and its pages,
//! renumbered onto a volume just large enough to hold every page the
//! trace touches.
//!
//! The renumbering keeps page order: the distinct pages (of every volume
//! the trace addresses, one after another) are sorted and a page becomes
//! its rank. Pages one request touches are consecutive in the trace, so
//! they stay consecutive; a run of requests that the trace laid out
//! back to back stays back to back, and a gap between two touched pages
//! closes. A disk model then sees the trace's sequential runs as runs,
//! and a volume of a few million blocks replays a trace whose offsets
//! span terabytes.

use tiermux_core::Op;

use crate::request::BlockTrace;

/// One request of a [`TimedTrace`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedRequest {
    /// When it was issued, ns after the trace's first request.
    pub time_ns: u64,
    /// Its first block on the renumbered volume.
    pub first_block: u64,
    /// Blocks it touches (at least 1).
    pub blocks: u32,
    /// Read or write.
    pub op: Op,
}

/// A trace renumbered onto a compact volume, in trace order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimedTrace {
    /// The requests that touch at least one page, in trace order.
    pub requests: Vec<TimedRequest>,
    /// Distinct pages the trace touches: the volume's size in blocks.
    pub distinct_blocks: u64,
    /// Requests of the trace that touch no page, left out.
    pub empty_requests: u64,
}

/// Bits of a page key that hold the page; the volume number sits above.
const PAGE_BITS: u32 = 44;

/// A page's key: its volume above its page number, so that volumes sort
/// one after another.
fn page_key(volume: u32, page: u64) -> u64 {
    assert!(
        page < 1 << PAGE_BITS && (volume as u64) < 1 << (64 - PAGE_BITS),
        "page {page} of volume {volume} is beyond the renumbering's reach"
    );
    (volume as u64) << PAGE_BITS | page
}

impl TimedTrace {
    /// Lays `trace` out in pages of `page_bytes`. Times are kept relative
    /// to the first request; a request earlier than the one before it
    /// (traces merged from several hosts) is issued at the later time.
    pub fn from_trace(trace: &BlockTrace, page_bytes: u64) -> TimedTrace {
        let mut keys: Vec<u64> = Vec::new();
        for r in &trace.requests {
            keys.extend(r.pages(page_bytes).map(|p| page_key(r.volume, p)));
        }
        keys.sort_unstable();
        keys.dedup();
        let start_ns = trace.requests.first().map_or(0, |r| r.time_ns);
        let mut out = TimedTrace {
            requests: Vec::with_capacity(trace.requests.len()),
            distinct_blocks: keys.len() as u64,
            empty_requests: 0,
        };
        let mut last_ns = 0;
        for r in &trace.requests {
            let pages = r.pages(page_bytes);
            if pages.is_empty() {
                out.empty_requests += 1;
                continue;
            }
            let first = keys
                .binary_search(&page_key(r.volume, pages.start))
                .expect("every touched page was collected");
            let blocks = u32::try_from(pages.end - pages.start).expect("a request under 16 TiB");
            debug_assert_eq!(
                keys[first + blocks as usize - 1],
                page_key(r.volume, pages.end - 1),
                "a request's pages are consecutive keys"
            );
            last_ns = last_ns.max(r.time_ns.saturating_sub(start_ns));
            out.requests.push(TimedRequest {
                time_ns: last_ns,
                first_block: first as u64,
                blocks,
                op: r.op,
            });
        }
        out
    }

    /// Simulated time the trace spans, ns (its last request's time).
    pub fn span_ns(&self) -> u64 {
        self.requests.last().map_or(0, |r| r.time_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Request;

    #[test]
    fn pages_are_renumbered_in_order_and_runs_stay_runs() {
        let t = BlockTrace {
            requests: vec![
                // Pages 1000..1002 of volume 0, then 10 (before them), then
                // 1002 (right after the first run), then volume 1's page 0.
                Request::new(5_000, 0, Op::Write, 1000 * 4096, 8192),
                Request::new(6_000, 0, Op::Read, 10 * 4096 + 100, 10),
                Request::new(4_000, 0, Op::Read, 1002 * 4096, 4096),
                Request::new(9_000, 1, Op::Write, 0, 4096),
                Request::new(9_500, 0, Op::Read, 77 * 4096, 0),
            ],
        };
        let timed = TimedTrace::from_trace(&t, 4096);
        assert_eq!(timed.distinct_blocks, 5);
        assert_eq!(timed.empty_requests, 1);
        let got: Vec<(u64, u64, u32, Op)> = timed
            .requests
            .iter()
            .map(|r| (r.time_ns, r.first_block, r.blocks, r.op))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, 1, 2, Op::Write),
                (1_000, 0, 1, Op::Read),
                // Out of order in time: issued with the request before.
                (1_000, 3, 1, Op::Read),
                (4_000, 4, 1, Op::Write),
            ]
        );
        assert_eq!(timed.span_ns(), 4_000);
    }
}
