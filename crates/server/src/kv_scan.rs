//! SCAN in the Redis front: `SCAN cursor [MATCH pattern] [COUNT n]` over a
//! store's keys in key order. Redis cursors are numbers, and a store
//! resumes at a key, so the server keeps a bounded table from cursor to
//! the key after the last one answered; cursor 0 starts and ends a walk.
//! Like Redis's, a walk returns every key present from its start to its
//! end, and MATCH filters the keys a step found (a step may answer none).

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use tiermux_kv::Command;

use crate::kv::ReplyShape;

/// Cursors kept at once; the oldest is forgotten first.
pub const MAX_CURSORS: usize = 65_536;
/// The largest COUNT a step takes.
pub const MAX_SCAN_COUNT: u32 = 100_000;

/// SCAN cursors and the keys they resume at.
#[derive(Default)]
pub(crate) struct Cursors {
    next: u64,
    keys: HashMap<u64, Bytes>,
    order: VecDeque<u64>,
}

impl Cursors {
    /// The key cursor `c` resumes at (cursor 0: the first key).
    pub fn start(&self, c: u64) -> Option<Bytes> {
        match c {
            0 => Some(Bytes::new()),
            c => self.keys.get(&c).cloned(),
        }
    }

    /// A new cursor resuming after `last`.
    pub fn after(&mut self, last: &[u8]) -> u64 {
        self.next += 1;
        let mut key = last.to_vec();
        key.push(0);
        self.keys.insert(self.next, Bytes::from(key));
        self.order.push_back(self.next);
        if self.order.len() > MAX_CURSORS {
            let old = self.order.pop_front().expect("a cursor");
            self.keys.remove(&old);
        }
        self.next
    }
}

fn number(b: &[u8]) -> Option<u64> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// Decodes SCAN's arguments into the store command and the reply's shape.
pub(crate) fn decode(
    rest: &[Bytes],
    cursors: &Cursors,
) -> Result<(ReplyShape, Vec<Command>), String> {
    let Some((cursor, opts)) = rest.split_first() else {
        return Err("ERR wrong number of arguments for 'scan' command".into());
    };
    let start = number(cursor)
        .and_then(|c| cursors.start(c))
        .ok_or("ERR invalid cursor")?;
    let (mut count, mut pattern) = (10u32, None);
    for pair in opts.chunks(2) {
        match pair {
            [opt, v] if opt.eq_ignore_ascii_case(b"COUNT") => {
                count = number(v)
                    .filter(|n| (1..=MAX_SCAN_COUNT as u64).contains(n))
                    .ok_or_else(|| format!("ERR COUNT must be from 1 to {MAX_SCAN_COUNT}"))?
                    as u32;
            }
            [opt, v] if opt.eq_ignore_ascii_case(b"MATCH") => pattern = Some(v.clone()),
            _ => return Err("ERR syntax error".into()),
        }
    }
    let shape = ReplyShape::Scan {
        count,
        pattern,
        keys: Vec::new(),
        cursor: 0,
    };
    let cmd = Command::Scan {
        start,
        count,
        with_values: false,
    };
    Ok((shape, vec![cmd]))
}

/// Whether `key` matches a Redis glob: `*` any run, `?` any byte, `\x` a
/// literal x, anything else itself.
pub fn glob_match(pattern: &[u8], key: &[u8]) -> bool {
    let (mut p, mut k) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while k < key.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, k));
                p += 1;
                continue;
            }
            Some(b'?') => {
                p += 1;
                k += 1;
                continue;
            }
            Some(b'\\') if pattern.get(p + 1) == Some(&key[k]) => {
                p += 2;
                k += 1;
                continue;
            }
            Some(&c) if c != b'\\' && c == key[k] => {
                p += 1;
                k += 1;
                continue;
            }
            _ => {}
        }
        match star {
            Some((sp, sk)) => {
                star = Some((sp, sk + 1));
                p = sp + 1;
                k = sk + 1;
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_redis_does() {
        for (p, k, want) in [
            (&b"*"[..], &b"anything"[..], true),
            (b"user:*", b"user:42", true),
            (b"user:*", b"usr:42", false),
            (b"h?llo", b"hello", true),
            (b"h?llo", b"hllo", false),
            (b"*o*o*", b"foo", true),
            (b"a\\*b", b"a*b", true),
            (b"a\\*b", b"axb", false),
            (b"", b"", true),
            (b"", b"x", false),
        ] {
            assert_eq!(glob_match(p, k), want, "{:?} {:?}", p, k);
        }
    }

    #[test]
    fn a_cursor_resumes_after_its_key_and_old_ones_are_forgotten() {
        let mut c = Cursors::default();
        let first = c.after(b"abc");
        assert_eq!(c.start(first).as_deref(), Some(&b"abc\0"[..]));
        assert_eq!(c.start(0).as_deref(), Some(&b""[..]));
        for _ in 0..MAX_CURSORS {
            c.after(b"x");
        }
        assert_eq!(c.start(first), None, "the oldest cursor is forgotten");
    }
}
