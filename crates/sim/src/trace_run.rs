//! Block traces in the timed simulator: a run's `[trace]` table names a
//! trace (a synthetic preset or a file, as `tiermux trace sweep` does),
//! and its requests replace the synthetic workload's. Closed-loop workers
//! take them in trace order; `client.replay_speedup` issues each at its
//! recorded time instead (open loop).
//!
//! A trace is read once per process and shared by every run that names
//! it: a sweep over policies and sizes reads its file once.

use std::path::Path;
use std::sync::{Arc, Mutex};

use tiermux_trace::{TimedTrace, TraceSource};

use crate::config::ConfigError;
use crate::workload::GenRequest;

/// A loaded trace, shared between runs (its `Debug` names its size only).
#[derive(Clone)]
pub struct LoadedTrace(pub Arc<TimedTrace>);

impl std::fmt::Debug for LoadedTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "LoadedTrace({} requests over {} blocks)",
            self.0.requests.len(),
            self.0.distinct_blocks
        )
    }
}

/// Traces read so far, by source and block size.
static LOADED: Mutex<Vec<(String, u32, LoadedTrace)>> = Mutex::new(Vec::new());

/// The trace `source` names, in blocks of `block_size` bytes (a file is
/// named relative to the working directory; experiment files make their
/// paths absolute first). Errors name the `trace` field.
pub fn load(source: &TraceSource, block_size: u32) -> Result<LoadedTrace, ConfigError> {
    if let Some(page_bytes) = source.page_bytes {
        if page_bytes != block_size as u64 {
            return Err(ConfigError::new(
                "trace.page_bytes",
                format!("a timed run's pages are its blocks ({block_size} bytes), got {page_bytes}; leave it out"),
            ));
        }
    }
    let key = format!("{source:?}");
    let mut loaded = LOADED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, _, t)) = loaded
        .iter()
        .find(|(k, b, _)| *k == key && *b == block_size)
    {
        return Ok(t.clone());
    }
    let source = TraceSource {
        page_bytes: Some(block_size as u64),
        ..source.clone()
    };
    let (trace, page_bytes) = source
        .load(Path::new("."))
        .map_err(|e| ConfigError::new("trace", format!("{e:#}")))?;
    let timed = TimedTrace::from_trace(&trace, page_bytes);
    if timed.requests.is_empty() {
        return Err(ConfigError::new(
            "trace",
            format!("'{}' has no request that touches a block", source.label()),
        ));
    }
    let t = LoadedTrace(Arc::new(timed));
    loaded.push((key, block_size, t.clone()));
    Ok(t)
}

/// A run's position in its trace.
pub struct TraceCursor {
    trace: LoadedTrace,
    next: usize,
}

impl TraceCursor {
    /// At the trace's first request.
    pub fn new(trace: LoadedTrace) -> Self {
        TraceCursor { trace, next: 0 }
    }

    /// The next request, or `None` once every request was taken.
    pub fn next_request(&mut self) -> Option<GenRequest> {
        let r = self.trace.0.requests.get(self.next)?;
        self.next += 1;
        Some(GenRequest {
            op: r.op,
            block: r.first_block,
            blocks: r.blocks,
            discard: None,
        })
    }

    /// The recorded time of the next request, ns, or `None` at the end.
    pub fn next_time_ns(&self) -> Option<u64> {
        self.trace.0.requests.get(self.next).map(|r| r.time_ns)
    }

    /// The first block of the request `k` places after the next one, if
    /// the trace has it.
    #[inline]
    pub fn peek_block(&self, k: usize) -> Option<u64> {
        self.trace
            .0
            .requests
            .get(self.next + k)
            .map(|r| r.first_block)
    }

    /// Whether every request was taken.
    pub fn is_done(&self) -> bool {
        self.next >= self.trace.0.requests.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiermux_core::Op;
    use tiermux_trace::timed::TimedRequest;

    #[test]
    fn peeking_names_the_blocks_of_the_requests_to_come() {
        let requests = (0..10u64)
            .map(|i| TimedRequest {
                time_ns: i,
                first_block: (i * 7) % 10,
                blocks: 1,
                op: Op::Read,
            })
            .collect();
        let trace = TimedTrace {
            requests,
            distinct_blocks: 10,
            empty_requests: 0,
        };
        let mut c = TraceCursor::new(LoadedTrace(Arc::new(trace)));
        let mut taken = 0;
        while !c.is_done() {
            let ahead: Vec<Option<u64>> = (0..3).map(|k| c.peek_block(k)).collect();
            let next = c.next_request().expect("not done").block;
            assert_eq!(ahead[0], Some(next));
            for (k, b) in ahead.into_iter().enumerate() {
                let i = taken + k as u64;
                let expected = (i < 10).then_some(i * 7 % 10);
                assert_eq!(b, expected, "request {taken}, {k} ahead");
            }
            taken += 1;
        }
        assert_eq!(taken, 10);
        assert_eq!(c.peek_block(0), None);
    }
}
