//! The client's side of the Redis protocol (RESP2): commands as a client
//! sends them and replies as it reads them, for the tests and the fuzz
//! target that drive the key-value server and check what it answers.
//! The server's side is [`crate::resp`].

use std::io::{self, Read};

use crate::resp::{array_header, bulk, ProtocolError, MAX_BULK_BYTES};

/// A reply as a client reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+text`.
    Simple(String),
    /// `-text`.
    Error(String),
    /// `:n`.
    Int(i64),
    /// A bulk string; `None` for the null bulk string `$-1`.
    Bulk(Option<Vec<u8>>),
    /// An array of replies.
    Array(Vec<Reply>),
}

/// Appends a command as clients send it: an array of bulk strings.
pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    array_header(out, args.len());
    for a in args {
        bulk(out, Some(a));
    }
}

/// The reply at `*at` in `buf`: `Ok(Some)` moves `*at` past it, `Ok(None)`
/// when `buf` ends before the reply does (`*at` stays), and an error
/// names what is not RESP.
pub fn parse_reply(buf: &[u8], at: &mut usize) -> Result<Option<Reply>, ProtocolError> {
    let mut end = *at;
    let reply = reply_at(buf, &mut end)?;
    if reply.is_some() {
        *at = end;
    }
    Ok(reply)
}

fn reply_at(buf: &[u8], at: &mut usize) -> Result<Option<Reply>, ProtocolError> {
    let bad = |what: String| ProtocolError(format!("not a RESP reply: {what}"));
    let rest = buf.get(*at..).unwrap_or_default();
    let Some(len) = rest.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let Some((&kind, line)) = rest[..len].split_first() else {
        return Err(bad("an empty line".into()));
    };
    let text = std::str::from_utf8(line).map_err(|_| bad("a line that is not UTF-8".into()))?;
    let number = || {
        text.parse::<i64>()
            .map_err(|_| bad(format!("{text:?} is not a number")))
    };
    *at += len + 2;
    Ok(Some(match kind {
        b'+' => Reply::Simple(text.into()),
        b'-' => Reply::Error(text.into()),
        b':' => Reply::Int(number()?),
        b'$' => match usize::try_from(number()?) {
            Err(_) => Reply::Bulk(None),
            Ok(n) if n > MAX_BULK_BYTES => {
                return Err(bad(format!(
                    "a bulk string of {n} bytes, more than any value holds"
                )))
            }
            Ok(n) => {
                let end = *at + n;
                match buf.get(end..end + 2) {
                    None => return Ok(None),
                    Some(b"\r\n") => {}
                    Some(_) => return Err(bad("a bulk string longer than its length".into())),
                }
                let value = buf[*at..end].to_vec();
                *at = end + 2;
                Reply::Bulk(Some(value))
            }
        },
        b'*' => {
            let n = usize::try_from(number()?)
                .map_err(|_| bad(format!("an array of {text} elements")))?;
            let mut elements = Vec::new();
            for _ in 0..n {
                match reply_at(buf, at)? {
                    Some(e) => elements.push(e),
                    None => return Ok(None),
                }
            }
            Reply::Array(elements)
        }
        other => return Err(bad(format!("a line starting with {:?}", other as char))),
    }))
}

/// Reads replies from a stream: the bytes received and where the next
/// reply starts.
pub struct ReplyReader<R> {
    stream: R,
    buf: Vec<u8>,
    at: usize,
}

impl<R: Read> ReplyReader<R> {
    /// A reader of the replies `stream` carries.
    pub fn new(stream: R) -> ReplyReader<R> {
        ReplyReader {
            stream,
            buf: Vec::new(),
            at: 0,
        }
    }

    /// The next reply, reading until it is whole. An end of stream before
    /// it is `UnexpectedEof`; bytes that are not RESP are `InvalidData`.
    pub fn next_reply(&mut self) -> io::Result<Reply> {
        let mut chunk = vec![0; 64 << 10];
        loop {
            let parsed = parse_reply(&self.buf, &mut self.at)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.0))?;
            if let Some(reply) = parsed {
                if self.at == self.buf.len() {
                    self.buf.clear();
                    self.at = 0;
                }
                return Ok(reply);
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_whole_and_wait_for_their_ends() {
        let mut wire = Vec::new();
        crate::resp::simple(&mut wire, "OK");
        crate::resp::error(&mut wire, "ERR no");
        crate::resp::integer(&mut wire, -7);
        array_header(&mut wire, 2);
        bulk(&mut wire, Some(b"a\r\nb"));
        bulk(&mut wire, None);
        let expected = [
            Reply::Simple("OK".into()),
            Reply::Error("ERR no".into()),
            Reply::Int(-7),
            Reply::Array(vec![
                Reply::Bulk(Some(b"a\r\nb".to_vec())),
                Reply::Bulk(None),
            ]),
        ];
        let mut at = 0;
        for e in &expected {
            assert_eq!(parse_reply(&wire, &mut at).unwrap().as_ref(), Some(e));
        }
        assert_eq!(at, wire.len());
        // Every cut inside the array leaves it unparsed and `at` in place.
        let array_start = wire.len() - b"*2\r\n$4\r\na\r\nb\r\n$-1\r\n".len();
        for cut in array_start..wire.len() {
            let mut at = array_start;
            assert_eq!(parse_reply(&wire[..cut], &mut at).unwrap(), None, "{cut}");
            assert_eq!(at, array_start);
        }
        let mut reader = ReplyReader::new(&wire[..]);
        for e in &expected {
            assert_eq!(&reader.next_reply().unwrap(), e);
        }
        let end = reader.next_reply().unwrap_err();
        assert_eq!(end.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn what_is_not_resp_is_named() {
        for (wire, what) in [
            (&b"?x\r\n"[..], "starting with '?'"),
            (b"\r\n", "an empty line"),
            (b":x\r\n", "\"x\" is not a number"),
            (b"$1\r\nabc\r\n", "longer than its length"),
            (b"*-2\r\n", "an array of -2 elements"),
            (b"$9223372036854775807\r\n", "a bulk string of"),
        ] {
            let e = parse_reply(wire, &mut 0).unwrap_err();
            assert!(e.0.contains(what), "{:?}: {}", wire, e.0);
        }
        let mut cmd = Vec::new();
        command(&mut cmd, &[b"GET", b"k"]);
        assert_eq!(cmd, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    }
}
