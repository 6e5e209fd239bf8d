//! The Redis protocol (RESP2) as clients speak it to a cache: commands
//! arrive as arrays of bulk strings (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`) or as
//! inline lines (`PING\r\n`); replies are simple strings, errors, integers,
//! bulk strings, nulls and arrays. Parsing is incremental over a receive
//! buffer and bounded, so a hostile client costs at most the limits.

/// Most arguments one command may have.
pub const MAX_ARGS: usize = 1 << 20;
/// Longest bulk string accepted, bytes; a longer one breaks the connection.
pub const MAX_BULK_BYTES: usize = 64 << 20;
/// Longest command (all its arguments), bytes: a server stops a client
/// whose command grows past this.
pub const MAX_COMMAND_BYTES: usize = 2 * MAX_BULK_BYTES;
/// Longest inline command line, bytes.
pub const MAX_INLINE_BYTES: usize = 64 << 10;

/// Why the bytes are not the protocol (the connection cannot continue).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Protocol error: {0}")]
pub struct ProtocolError(pub String);

fn perr(s: impl Into<String>) -> ProtocolError {
    ProtocolError(s.into())
}

/// A command parsed from a receive buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// Where each argument lies in the buffer.
    pub args: Vec<std::ops::Range<usize>>,
    /// Bytes the command took.
    pub used: usize,
}

/// Parses one command from the start of `buf`: its arguments (as ranges of
/// `buf`) and the bytes it took, `None` if more bytes are needed.
pub fn parse_command(buf: &[u8]) -> Result<Option<Parsed>, ProtocolError> {
    match buf.first() {
        None => Ok(None),
        Some(b'*') => parse_array(buf),
        Some(_) => parse_inline(buf),
    }
}

/// The line that starts at `at`, without its CRLF, and where the next starts.
fn line(buf: &[u8], at: usize, limit: usize) -> Result<Option<(usize, usize)>, ProtocolError> {
    let rest = &buf[at..];
    match rest.iter().position(|&b| b == b'\n') {
        Some(i) if i > 0 && rest[i - 1] == b'\r' => Ok(Some((at + i - 1, at + i + 1))),
        Some(_) => Err(perr("expected CRLF at the end of a line")),
        None if rest.len() > limit => Err(perr("line too long")),
        None => Ok(None),
    }
}

fn number(bytes: &[u8], what: &str) -> Result<i64, ProtocolError> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| perr(format!("invalid {what}")))
}

fn parse_array(buf: &[u8]) -> Result<Option<Parsed>, ProtocolError> {
    let Some((end, mut at)) = line(buf, 0, 32)? else {
        return Ok(None);
    };
    let n = number(&buf[1..end], "multibulk length")?;
    if n > MAX_ARGS as i64 {
        return Err(perr("invalid multibulk length"));
    }
    let mut args = Vec::with_capacity(n.clamp(0, 16) as usize);
    for _ in 0..n.max(0) {
        if at >= buf.len() {
            return Ok(None);
        }
        if buf[at] != b'$' {
            return Err(perr(format!(
                "expected '$', got '{}'",
                buf[at].escape_ascii()
            )));
        }
        let Some((hdr_end, data)) = line(buf, at, 32)? else {
            return Ok(None);
        };
        let len = number(&buf[at + 1..hdr_end], "bulk length")?;
        if !(0..=MAX_BULK_BYTES as i64).contains(&len) {
            return Err(perr("invalid bulk length"));
        }
        let data_end = data + len as usize;
        if buf.len() < data_end + 2 {
            return Ok(None);
        }
        if &buf[data_end..data_end + 2] != b"\r\n" {
            return Err(perr("expected CRLF after a bulk string"));
        }
        args.push(data..data_end);
        at = data_end + 2;
    }
    Ok(Some(Parsed { args, used: at }))
}

fn parse_inline(buf: &[u8]) -> Result<Option<Parsed>, ProtocolError> {
    let rest = buf;
    let Some(i) = rest.iter().position(|&b| b == b'\n') else {
        return if rest.len() > MAX_INLINE_BYTES {
            Err(perr("too big inline request"))
        } else {
            Ok(None)
        };
    };
    let end = if i > 0 && rest[i - 1] == b'\r' {
        i - 1
    } else {
        i
    };
    let mut args = Vec::new();
    let mut at = 0;
    while at < end {
        while at < end && rest[at].is_ascii_whitespace() {
            at += 1;
        }
        let start = at;
        while at < end && !rest[at].is_ascii_whitespace() {
            at += 1;
        }
        if at > start {
            args.push(start..at);
        }
    }
    Ok(Some(Parsed { args, used: i + 1 }))
}

/// Appends `+text\r\n`.
pub fn simple(out: &mut Vec<u8>, text: &str) {
    out.push(b'+');
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends `-text\r\n` (line breaks in `text` become spaces).
pub fn error(out: &mut Vec<u8>, text: &str) {
    out.push(b'-');
    out.extend(
        text.bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

/// Appends `:n\r\n`.
pub fn integer(out: &mut Vec<u8>, n: i64) {
    out.push(b':');
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends a bulk string, or the null bulk string for `None`.
pub fn bulk(out: &mut Vec<u8>, value: Option<&[u8]>) {
    match value {
        Some(v) => {
            out.push(b'$');
            out.extend_from_slice(itoa::Buffer::new().format(v.len()).as_bytes());
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(v);
            out.extend_from_slice(b"\r\n");
        }
        None => out.extend_from_slice(b"$-1\r\n"),
    }
}

/// Appends an array header of `n` elements.
pub fn array_header(out: &mut Vec<u8>, n: usize) {
    out.push(b'*');
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(buf: &[u8]) -> Option<(Vec<&[u8]>, usize)> {
        parse_command(buf)
            .expect("valid")
            .map(|p| (p.args.into_iter().map(|r| &buf[r]).collect(), p.used))
    }

    #[test]
    fn arrays_and_inline_commands_parse_and_wait_for_their_ends() {
        let cmd = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n*1\r\n";
        let (a, n) = args(cmd).expect("whole");
        assert_eq!(a, vec![&b"SET"[..], b"k", b"hello"]);
        assert_eq!(n, cmd.len() - 4);
        for cut in 0..n {
            assert!(
                args(&cmd[..cut]).is_none(),
                "a prefix of {cut} bytes parsed"
            );
        }
        assert_eq!(
            args(b"PING  x\r\nrest").expect("line").0,
            vec![&b"PING"[..], b"x"]
        );
        assert_eq!(args(b"*0\r\n").expect("empty").0.len(), 0);
        assert_eq!(
            args(b"*2\r\n$0\r\n\r\n$1\r\nz\r\n").expect("empty arg").0,
            vec![&b""[..], b"z"]
        );
    }

    #[test]
    fn malformed_input_is_a_named_error() {
        for (bad, why) in [
            (&b"*x\r\n"[..], "invalid multibulk length"),
            (b"*1\r\n:3\r\n", "expected '$'"),
            (b"*1\r\n$-5\r\n", "invalid bulk length"),
            (b"*1\r\n$99999999999\r\n", "invalid bulk length"),
            (b"*1\r\n$1\r\nab\r\n", "expected CRLF after a bulk string"),
            (b"*1\n", "expected CRLF"),
            (b"*2000000\r\n", "invalid multibulk length"),
        ] {
            let e = parse_command(bad).expect_err("malformed");
            assert!(
                e.0.contains(why),
                "{:?}: {e}",
                bad.escape_ascii().to_string()
            );
        }
        let long = vec![b'a'; MAX_INLINE_BYTES + 1];
        assert!(parse_command(&long).is_err());
    }

    #[test]
    fn random_bytes_never_panic_and_parse_inside_the_buffer() {
        let mut rng = tiermux_core::rng::Rng::new(5);
        let alphabet = b"*$\r\n-0123456789abcGET ";
        for _ in 0..200_000 {
            let len = rng.below(40) as usize;
            let buf: Vec<u8> = (0..len)
                .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize])
                .collect();
            if let Ok(Some(p)) = parse_command(&buf) {
                assert!(p.used <= buf.len());
                assert!(p.args.iter().all(|r| r.start <= r.end && r.end <= p.used));
            }
        }
    }

    #[test]
    fn replies_are_encoded_as_redis_does() {
        let mut out = Vec::new();
        simple(&mut out, "OK");
        error(&mut out, "ERR bad\r\nthing");
        integer(&mut out, -2);
        bulk(&mut out, Some(b"v"));
        bulk(&mut out, None);
        array_header(&mut out, 2);
        assert_eq!(
            out,
            b"+OK\r\n-ERR bad  thing\r\n:-2\r\n$1\r\nv\r\n$-1\r\n*2\r\n"
        );
    }
}
