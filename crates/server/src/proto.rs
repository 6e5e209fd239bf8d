//! The NBD protocol (newstyle fixed handshake, simple and structured
//! replies), written from the protocol specification (`doc/proto.md` of the
//! NBD project).
//!
//! The handshake runs on a blocking stream ([`handshake`]); the transmission
//! phase is parsed from bytes ([`parse_request`]) by the server's event
//! loop. Every malformed input is an error value, never a panic.

use std::io::{self, Read, Write};

/// "NBDMAGIC".
pub const NBD_MAGIC: u64 = 0x4e42_444d_4147_4943;
/// "IHAVEOPT".
pub const IHAVEOPT: u64 = 0x4948_4156_454F_5054;
/// Magic of option replies.
pub const OPT_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Magic of transmission requests.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic of simple replies.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// Bytes of a request header.
pub const REQUEST_BYTES: usize = 28;
/// Bytes of a simple reply header.
pub const REPLY_BYTES: usize = 16;
/// Magic of structured reply chunks.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;
/// Bytes of a structured reply chunk's header.
pub const CHUNK_HEADER_BYTES: usize = 20;
/// Structured reply flag: the request's last chunk.
pub const REPLY_FLAG_DONE: u16 = 1;
/// Chunk type: nothing more (always with [`REPLY_FLAG_DONE`]).
pub const REPLY_TYPE_NONE: u16 = 0;
/// Chunk type: data at an offset.
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
/// Chunk type: an error that covers the whole request.
pub const REPLY_TYPE_ERROR: u16 = (1 << 15) | 1;
/// Chunk type: an error at an offset of the request.
pub const REPLY_TYPE_ERROR_OFFSET: u16 = (1 << 15) | 2;

const FLAG_FIXED_NEWSTYLE: u16 = 1;
const FLAG_NO_ZEROES: u16 = 2;
const CLIENT_FIXED_NEWSTYLE: u32 = 1;
const CLIENT_NO_ZEROES: u32 = 2;

const OPT_EXPORT_NAME: u32 = 1;
const OPT_ABORT: u32 = 2;
const OPT_LIST: u32 = 3;
const OPT_INFO: u32 = 6;
const OPT_GO: u32 = 7;
const OPT_STRUCTURED_REPLY: u32 = 8;

const REP_ACK: u32 = 1;
const REP_SERVER: u32 = 2;
const REP_INFO: u32 = 3;
const REP_ERR_UNSUP: u32 = (1 << 31) | 1;
const REP_ERR_INVALID: u32 = (1 << 31) | 3;
const REP_ERR_UNKNOWN: u32 = (1 << 31) | 6;
const REP_ERR_TOO_BIG: u32 = (1 << 31) | 9;

const INFO_EXPORT: u16 = 0;
const INFO_BLOCK_SIZE: u16 = 3;

/// Transmission flags the server advertises.
pub const TRANSMISSION_FLAGS: u16 = 1 // HAS_FLAGS
    | (1 << 2) // SEND_FLUSH
    | (1 << 3) // SEND_FUA
    | (1 << 5) // SEND_TRIM
    | (1 << 6) // SEND_WRITE_ZEROES
    | (1 << 8) // CAN_MULTI_CONN
    | (1 << 11); // SEND_FAST_ZERO

/// Transmission flag: reads take [`CMD_FLAG_DF`] (only with structured
/// replies).
const FLAG_SEND_DF: u16 = 1 << 7;

/// The transmission flags for a session, with or without structured
/// replies.
pub fn transmission_flags(structured_replies: bool) -> u16 {
    if structured_replies {
        TRANSMISSION_FLAGS | FLAG_SEND_DF
    } else {
        TRANSMISSION_FLAGS
    }
}

/// Largest option payload accepted during the handshake, bytes.
pub const MAX_OPTION_BYTES: u32 = 64 << 10;

/// Command: read.
pub const CMD_READ: u16 = 0;
/// Command: write.
pub const CMD_WRITE: u16 = 1;
/// Command: disconnect.
pub const CMD_DISC: u16 = 2;
/// Command: flush.
pub const CMD_FLUSH: u16 = 3;
/// Command: trim.
pub const CMD_TRIM: u16 = 4;
/// Command: write zeroes.
pub const CMD_WRITE_ZEROES: u16 = 6;

/// Command flag: force unit access.
pub const CMD_FLAG_FUA: u16 = 1;
/// Command flag: do not punch a hole (write zeroes).
pub const CMD_FLAG_NO_HOLE: u16 = 2;
/// Command flag: answer a read with one data chunk ("don't fragment";
/// structured replies only).
pub const CMD_FLAG_DF: u16 = 1 << 2;
/// Command flag: fail at once with `ENOTSUP` unless zeroing is faster than
/// writing zeros (write zeroes).
pub const CMD_FLAG_FAST_ZERO: u16 = 1 << 4;

/// Errno values of replies.
pub mod errno {
    /// Operation not permitted.
    pub const EPERM: u32 = 1;
    /// I/O error.
    pub const EIO: u32 = 5;
    /// Invalid argument.
    pub const EINVAL: u32 = 22;
    /// No space (out of range).
    pub const ENOSPC: u32 = 28;
    /// Value too large.
    pub const EOVERFLOW: u32 = 75;
    /// Not supported.
    pub const ENOTSUP: u32 = 95;
    /// Server shutting down.
    pub const ESHUTDOWN: u32 = 108;
}

/// The export the server offers.
#[derive(Clone, Debug)]
pub struct Export {
    /// Its name ("" selects it too).
    pub name: String,
    /// Size, bytes.
    pub size_bytes: u64,
    /// Preferred block size, bytes.
    pub preferred_block: u32,
    /// Largest request, bytes.
    pub max_request: u32,
    /// Whether structured replies are offered to clients that ask.
    pub structured_replies: bool,
    /// Whether the server reads ahead of sequential reads
    /// ([`crate::read_ahead`]).
    pub read_ahead: bool,
}

/// How a handshake ended.
#[derive(Debug, PartialEq, Eq)]
pub enum HandshakeEnd {
    /// The client entered transmission.
    Transmission {
        /// The client asked for structured replies: reads are answered in
        /// chunks.
        structured_replies: bool,
    },
    /// The client aborted or asked only for a listing.
    Aborted,
}

/// What the options so far agreed.
#[derive(Clone, Copy, Debug, Default)]
struct Session {
    /// The client sent `NBD_OPT_NO_ZEROES` in its flags.
    no_zeroes: bool,
    /// `NBD_OPT_STRUCTURED_REPLY` was acknowledged.
    structured_replies: bool,
}

impl Session {
    fn transmission(self) -> HandshakeEnd {
        HandshakeEnd::Transmission {
            structured_replies: self.structured_replies,
        }
    }
}

/// A protocol violation.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The peer broke the protocol.
    #[error("protocol error: {0}")]
    Violation(String),
    /// The connection failed.
    #[error("connection: {0}")]
    Io(#[from] io::Error),
}

fn violation(s: impl Into<String>) -> ProtocolError {
    ProtocolError::Violation(s.into())
}

fn read_u32(r: &mut impl Read) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

fn read_u64(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_be_bytes(b))
}

fn option_reply(w: &mut impl Write, option: u32, kind: u32, data: &[u8]) -> io::Result<()> {
    let mut m = Vec::with_capacity(20 + data.len());
    m.extend_from_slice(&OPT_REPLY_MAGIC.to_be_bytes());
    m.extend_from_slice(&option.to_be_bytes());
    m.extend_from_slice(&kind.to_be_bytes());
    m.extend_from_slice(&(data.len() as u32).to_be_bytes());
    m.extend_from_slice(data);
    w.write_all(&m)
}

fn info_export(export: &Export, session: Session) -> Vec<u8> {
    let mut d = Vec::with_capacity(12);
    d.extend_from_slice(&INFO_EXPORT.to_be_bytes());
    d.extend_from_slice(&export.size_bytes.to_be_bytes());
    d.extend_from_slice(&transmission_flags(session.structured_replies).to_be_bytes());
    d
}

fn info_block_size(export: &Export) -> Vec<u8> {
    let mut d = Vec::with_capacity(14);
    d.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    d.extend_from_slice(&1u32.to_be_bytes());
    d.extend_from_slice(&export.preferred_block.to_be_bytes());
    d.extend_from_slice(&export.max_request.to_be_bytes());
    d
}

/// Runs the server side of the fixed newstyle handshake on `s`.
pub fn handshake<S: Read + Write>(
    s: &mut S,
    export: &Export,
) -> Result<HandshakeEnd, ProtocolError> {
    let mut hello = Vec::with_capacity(18);
    hello.extend_from_slice(&NBD_MAGIC.to_be_bytes());
    hello.extend_from_slice(&IHAVEOPT.to_be_bytes());
    hello.extend_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    s.write_all(&hello)?;
    let client_flags = read_u32(s)?;
    if client_flags & !(CLIENT_FIXED_NEWSTYLE | CLIENT_NO_ZEROES) != 0 {
        return Err(violation(format!("unknown client flags {client_flags:#x}")));
    }
    let mut session = Session {
        no_zeroes: client_flags & CLIENT_NO_ZEROES != 0,
        structured_replies: false,
    };
    loop {
        let magic = read_u64(s)?;
        if magic != IHAVEOPT {
            return Err(violation(format!("bad option magic {magic:#x}")));
        }
        let option = read_u32(s)?;
        let len = read_u32(s)?;
        if len > MAX_OPTION_BYTES {
            // The payload cannot be trusted to be skipped in reasonable time.
            option_reply(s, option, REP_ERR_TOO_BIG, b"option too large")?;
            return Err(violation(format!("option {option} of {len} bytes")));
        }
        let mut data = vec![0u8; len as usize];
        s.read_exact(&mut data)?;
        if let Some(end) = answer_option(s, export, option, &data, &mut session)? {
            return Ok(end);
        }
    }
}

/// Answers one option; returns how the handshake ends, or `None` when the
/// client may send another option.
fn answer_option<S: Read + Write>(
    s: &mut S,
    export: &Export,
    option: u32,
    data: &[u8],
    session: &mut Session,
) -> Result<Option<HandshakeEnd>, ProtocolError> {
    match option {
        OPT_EXPORT_NAME => export_name(s, export, data, session),
        OPT_ABORT => {
            // The client may close without reading the reply.
            let _ = option_reply(s, option, REP_ACK, &[]);
            Ok(Some(HandshakeEnd::Aborted))
        }
        OPT_LIST => {
            if !data.is_empty() {
                option_reply(s, option, REP_ERR_INVALID, b"LIST takes no data")?;
                return Ok(None);
            }
            let mut d = Vec::new();
            d.extend_from_slice(&(export.name.len() as u32).to_be_bytes());
            d.extend_from_slice(export.name.as_bytes());
            option_reply(s, option, REP_SERVER, &d)?;
            option_reply(s, option, REP_ACK, &[])?;
            Ok(None)
        }
        OPT_INFO | OPT_GO => info_or_go(s, export, option, data, session),
        OPT_STRUCTURED_REPLY if !export.structured_replies => {
            option_reply(
                s,
                option,
                REP_ERR_UNSUP,
                b"structured replies are not offered",
            )?;
            Ok(None)
        }
        OPT_STRUCTURED_REPLY => {
            if !data.is_empty() {
                option_reply(
                    s,
                    option,
                    REP_ERR_INVALID,
                    b"STRUCTURED_REPLY takes no data",
                )?;
                return Ok(None);
            }
            session.structured_replies = true;
            option_reply(s, option, REP_ACK, &[])?;
            Ok(None)
        }
        _ => {
            option_reply(s, option, REP_ERR_UNSUP, b"unsupported option")?;
            Ok(None)
        }
    }
}

/// `NBD_OPT_EXPORT_NAME`: the old way into transmission, with the export's
/// size and flags and no way to refuse but closing.
fn export_name<S: Write>(
    s: &mut S,
    export: &Export,
    data: &[u8],
    session: &mut Session,
) -> Result<Option<HandshakeEnd>, ProtocolError> {
    let name = String::from_utf8_lossy(data);
    if !name.is_empty() && name != export.name {
        return Err(violation(format!("unknown export '{name}'")));
    }
    let mut m = Vec::with_capacity(10 + 124);
    m.extend_from_slice(&export.size_bytes.to_be_bytes());
    let flags = transmission_flags(session.structured_replies);
    m.extend_from_slice(&flags.to_be_bytes());
    if !session.no_zeroes {
        m.extend_from_slice(&[0u8; 124]);
    }
    s.write_all(&m)?;
    Ok(Some(session.transmission()))
}

/// `NBD_OPT_INFO` and `NBD_OPT_GO`: the export's size, flags and block
/// sizes; GO then enters transmission.
fn info_or_go<S: Write>(
    s: &mut S,
    export: &Export,
    option: u32,
    data: &[u8],
    session: &mut Session,
) -> Result<Option<HandshakeEnd>, ProtocolError> {
    let Some((name, _requests)) = parse_info_request(data) else {
        option_reply(s, option, REP_ERR_INVALID, b"malformed INFO/GO request")?;
        return Ok(None);
    };
    if !name.is_empty() && name != export.name.as_bytes() {
        option_reply(s, option, REP_ERR_UNKNOWN, b"no such export")?;
        return Ok(None);
    }
    option_reply(s, option, REP_INFO, &info_export(export, *session))?;
    // Block sizes are always sent, whatever the client asked for: any
    // alignment is served.
    option_reply(s, option, REP_INFO, &info_block_size(export))?;
    option_reply(s, option, REP_ACK, &[])?;
    Ok((option == OPT_GO).then(|| session.transmission()))
}

/// Parses INFO/GO data: name length, name, count, info types.
fn parse_info_request(data: &[u8]) -> Option<(&[u8], Vec<u16>)> {
    let name_len = u32::from_be_bytes(data.get(0..4)?.try_into().ok()?) as usize;
    let name = data.get(4..4usize.checked_add(name_len)?)?;
    let rest = &data[4 + name_len..];
    let n = u16::from_be_bytes(rest.get(0..2)?.try_into().ok()?) as usize;
    let reqs = rest.get(2..)?;
    if reqs.len() != 2 * n {
        return None;
    }
    Some((
        name,
        reqs.chunks_exact(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            .collect(),
    ))
}

/// A transmission-phase request header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestHeader {
    /// Command flags.
    pub flags: u16,
    /// Command type.
    pub kind: u16,
    /// The client's handle (cookie), echoed in the reply.
    pub handle: u64,
    /// Byte offset.
    pub offset: u64,
    /// Length, bytes.
    pub length: u32,
}

/// Parses a request header; a wrong magic is a violation that ends the
/// connection (the stream cannot be resynchronized).
pub fn parse_request(b: &[u8; REQUEST_BYTES]) -> Result<RequestHeader, ProtocolError> {
    let magic = u32::from_be_bytes(b[0..4].try_into().expect("4 bytes"));
    if magic != REQUEST_MAGIC {
        return Err(violation(format!("bad request magic {magic:#x}")));
    }
    Ok(RequestHeader {
        flags: u16::from_be_bytes(b[4..6].try_into().expect("2 bytes")),
        kind: u16::from_be_bytes(b[6..8].try_into().expect("2 bytes")),
        handle: u64::from_be_bytes(b[8..16].try_into().expect("8 bytes")),
        offset: u64::from_be_bytes(b[16..24].try_into().expect("8 bytes")),
        length: u32::from_be_bytes(b[24..28].try_into().expect("4 bytes")),
    })
}

/// Encodes a simple reply header.
pub fn simple_reply(handle: u64, error: u32) -> [u8; REPLY_BYTES] {
    let mut r = [0u8; REPLY_BYTES];
    r[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    r[4..8].copy_from_slice(&error.to_be_bytes());
    r[8..16].copy_from_slice(&handle.to_be_bytes());
    r
}

/// Encodes a structured reply chunk's header for a payload of
/// `payload_bytes`.
pub fn chunk_header(
    handle: u64,
    kind: u16,
    done: bool,
    payload_bytes: u32,
) -> [u8; CHUNK_HEADER_BYTES] {
    let flags = if done { REPLY_FLAG_DONE } else { 0 };
    let mut r = [0u8; CHUNK_HEADER_BYTES];
    r[0..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    r[4..6].copy_from_slice(&flags.to_be_bytes());
    r[6..8].copy_from_slice(&kind.to_be_bytes());
    r[8..16].copy_from_slice(&handle.to_be_bytes());
    r[16..20].copy_from_slice(&payload_bytes.to_be_bytes());
    r
}

/// The header and offset of a data chunk: `data_bytes` of data, from
/// `offset` of the export, follow it.
pub fn data_chunk_head(handle: u64, offset: u64, data_bytes: u32, done: bool) -> Vec<u8> {
    assert!(data_bytes > 0, "a data chunk carries at least one byte");
    let payload = data_bytes
        .checked_add(8)
        .expect("a data chunk's length fits its field");
    let mut m = Vec::with_capacity(CHUNK_HEADER_BYTES + 8);
    m.extend_from_slice(&chunk_header(handle, REPLY_TYPE_OFFSET_DATA, done, payload));
    m.extend_from_slice(&offset.to_be_bytes());
    m
}

/// The longest message an error chunk carries, bytes (the specification's
/// limit on strings).
pub const MAX_ERROR_MESSAGE_BYTES: usize = 4096;

/// An error chunk: at `offset` of the request when given
/// (`NBD_REPLY_TYPE_ERROR_OFFSET`), else for the whole request. `message`
/// is cut to [`MAX_ERROR_MESSAGE_BYTES`] at a character boundary.
pub fn error_chunk(
    handle: u64,
    error: u32,
    message: &str,
    offset: Option<u64>,
    done: bool,
) -> Vec<u8> {
    assert!(error != 0, "an error chunk carries an error");
    let mut end = message.len().min(MAX_ERROR_MESSAGE_BYTES);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    let message = &message.as_bytes()[..end];
    let (kind, tail) = match offset {
        Some(_) => (REPLY_TYPE_ERROR_OFFSET, 8),
        None => (REPLY_TYPE_ERROR, 0),
    };
    let payload = 6 + message.len() + tail;
    let mut m = Vec::with_capacity(CHUNK_HEADER_BYTES + payload);
    m.extend_from_slice(&chunk_header(handle, kind, done, payload as u32));
    m.extend_from_slice(&error.to_be_bytes());
    m.extend_from_slice(&(message.len() as u16).to_be_bytes());
    m.extend_from_slice(message);
    if let Some(o) = offset {
        m.extend_from_slice(&o.to_be_bytes());
    }
    m
}

/// The final chunk of a reply that has nothing more to say.
pub fn done_chunk(handle: u64) -> [u8; CHUNK_HEADER_BYTES] {
    chunk_header(handle, REPLY_TYPE_NONE, true, 0)
}

/// Maps an errno from the volume to one the protocol defines.
pub fn protocol_errno(e: i32) -> u32 {
    match e as u32 {
        0 => 0,
        x @ (errno::EPERM
        | errno::EIO
        | errno::EINVAL
        | errno::ENOSPC
        | errno::EOVERFLOW
        | errno::ENOTSUP
        | errno::ESHUTDOWN) => x,
        12 => 12, // ENOMEM
        _ => errno::EIO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    /// A stream reading from a script and recording what is written.
    struct Scripted {
        input: Cursor<Vec<u8>>,
        output: Vec<u8>,
    }
    impl Read for Scripted {
        fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
            self.input.read(b)
        }
    }
    impl Write for Scripted {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.output.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn export() -> Export {
        Export {
            name: "tiermux".into(),
            size_bytes: 1 << 30,
            preferred_block: 4096,
            max_request: 32 << 20,
            structured_replies: true,
            read_ahead: true,
        }
    }

    fn opt(option: u32, data: &[u8]) -> Vec<u8> {
        let mut v = IHAVEOPT.to_be_bytes().to_vec();
        v.extend_from_slice(&option.to_be_bytes());
        v.extend_from_slice(&(data.len() as u32).to_be_bytes());
        v.extend_from_slice(data);
        v
    }

    fn go(name: &str, infos: &[u16]) -> Vec<u8> {
        let mut d = (name.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(name.as_bytes());
        d.extend_from_slice(&(infos.len() as u16).to_be_bytes());
        for i in infos {
            d.extend_from_slice(&i.to_be_bytes());
        }
        opt(OPT_GO, &d)
    }

    const PLAIN: HandshakeEnd = HandshakeEnd::Transmission {
        structured_replies: false,
    };

    fn run(input: Vec<u8>) -> (Result<HandshakeEnd, ProtocolError>, Vec<u8>) {
        let mut s = Scripted {
            input: Cursor::new(input),
            output: Vec::new(),
        };
        let r = handshake(&mut s, &export());
        (r, s.output)
    }

    /// Option replies in `out` after the 18-byte greeting: (option, type, data length).
    fn replies(out: &[u8]) -> Vec<(u32, u32, u32)> {
        let mut v = Vec::new();
        let mut i = 18;
        while i + 20 <= out.len() {
            assert_eq!(
                u64::from_be_bytes(out[i..i + 8].try_into().unwrap()),
                OPT_REPLY_MAGIC
            );
            let o = u32::from_be_bytes(out[i + 8..i + 12].try_into().unwrap());
            let t = u32::from_be_bytes(out[i + 12..i + 16].try_into().unwrap());
            let l = u32::from_be_bytes(out[i + 16..i + 20].try_into().unwrap());
            v.push((o, t, l));
            i += 20 + l as usize;
        }
        v
    }

    #[test]
    fn go_with_unknown_then_known_export() {
        let mut input = 3u32.to_be_bytes().to_vec();
        input.extend(opt(42, b"??"));
        input.extend(go("nope", &[]));
        input.extend(go("tiermux", &[INFO_BLOCK_SIZE]));
        let (r, out) = run(input);
        assert_eq!(r.unwrap(), PLAIN);
        assert_eq!(u64::from_be_bytes(out[0..8].try_into().unwrap()), NBD_MAGIC);
        let rs = replies(&out);
        assert_eq!(
            rs,
            vec![
                (42, REP_ERR_UNSUP, 18),
                (OPT_GO, REP_ERR_UNKNOWN, 14),
                (OPT_GO, REP_INFO, 12),
                (OPT_GO, REP_INFO, 14),
                (OPT_GO, REP_ACK, 0)
            ]
        );
    }

    #[test]
    fn export_name_and_zero_padding() {
        let mut input = 1u32.to_be_bytes().to_vec(); // no NO_ZEROES
        input.extend(opt(OPT_EXPORT_NAME, b""));
        let (r, out) = run(input);
        assert_eq!(r.unwrap(), PLAIN);
        assert_eq!(out.len(), 18 + 8 + 2 + 124);
        assert_eq!(u64::from_be_bytes(out[18..26].try_into().unwrap()), 1 << 30);
    }

    #[test]
    fn malformed_handshakes_are_errors() {
        let cases: Vec<Vec<u8>> = vec![
            vec![],
            0xffu32.to_be_bytes().to_vec(),
            [3u32.to_be_bytes().to_vec(), 7u64.to_be_bytes().to_vec()].concat(),
            [
                3u32.to_be_bytes().to_vec(),
                IHAVEOPT.to_be_bytes().to_vec(),
                7u32.to_be_bytes().to_vec(),
                u32::MAX.to_be_bytes().to_vec(),
            ]
            .concat(),
            [3u32.to_be_bytes().to_vec(), opt(OPT_EXPORT_NAME, b"other")].concat(),
        ];
        for c in cases {
            assert!(run(c).0.is_err());
        }
        // A malformed GO gets an error reply, then the client may retry.
        let mut input = 3u32.to_be_bytes().to_vec();
        input.extend(opt(OPT_GO, &[0, 0, 0, 9, 1]));
        input.extend(go("", &[]));
        let (r, out) = run(input);
        assert_eq!(r.unwrap(), PLAIN);
        assert_eq!(replies(&out)[0], (OPT_GO, REP_ERR_INVALID, 25));
    }

    #[test]
    fn random_handshake_bytes_never_panic() {
        let mut rng = tiermux_core::rng::Rng::new(99);
        for i in 0..20_000 {
            let mut input = 3u32.to_be_bytes().to_vec();
            // Mostly well-framed options with random contents, sometimes noise.
            for _ in 0..rng.below(4) {
                if rng.below(5) == 0 {
                    input.extend((0..rng.below(40)).map(|_| rng.next_u64() as u8));
                } else {
                    let option = rng.below(10) as u32;
                    let data: Vec<u8> = (0..rng.below(24)).map(|_| rng.next_u64() as u8).collect();
                    input.extend(opt(option, &data));
                }
            }
            if i % 3 == 0 {
                input.extend(go("tiermux", &[]));
            }
            let _ = run(input);
        }
    }

    #[test]
    fn structured_replies_are_agreed_before_go() {
        let mut input = 3u32.to_be_bytes().to_vec();
        input.extend(opt(OPT_STRUCTURED_REPLY, b"x"));
        input.extend(opt(OPT_STRUCTURED_REPLY, &[]));
        input.extend(go("", &[]));
        let (r, out) = run(input);
        assert_eq!(
            r.unwrap(),
            HandshakeEnd::Transmission {
                structured_replies: true
            }
        );
        let rs = replies(&out);
        assert_eq!(rs[0], (OPT_STRUCTURED_REPLY, REP_ERR_INVALID, 30));
        assert_eq!(rs[1], (OPT_STRUCTURED_REPLY, REP_ACK, 0));
        assert_eq!(rs[2], (OPT_GO, REP_INFO, 12));
        // The export's flags (after the greeting, three replies' headers,
        // the first reply's message, the info type and the size) offer
        // "don't fragment" once structured replies are agreed.
        let at = 18 + 3 * 20 + 30 + 2 + 8;
        let flags = u16::from_be_bytes(out[at..at + 2].try_into().unwrap());
        assert_eq!(flags, TRANSMISSION_FLAGS | FLAG_SEND_DF);
        assert_eq!(transmission_flags(false) & FLAG_SEND_DF, 0);
        // An export that does not offer them refuses, and the client goes
        // on without them.
        let mut input = 3u32.to_be_bytes().to_vec();
        input.extend(opt(OPT_STRUCTURED_REPLY, &[]));
        input.extend(go("", &[]));
        let mut s = Scripted {
            input: Cursor::new(input),
            output: Vec::new(),
        };
        let plain_export = Export {
            structured_replies: false,
            ..export()
        };
        assert_eq!(handshake(&mut s, &plain_export).unwrap(), PLAIN);
        assert_eq!(
            replies(&s.output)[0],
            (OPT_STRUCTURED_REPLY, REP_ERR_UNSUP, 34)
        );
    }

    #[test]
    fn chunks_follow_the_specification_layout() {
        let h = chunk_header(9, REPLY_TYPE_OFFSET_DATA, true, 4104);
        assert_eq!(h[0..4], STRUCTURED_REPLY_MAGIC.to_be_bytes());
        assert_eq!(h[4..6], REPLY_FLAG_DONE.to_be_bytes());
        assert_eq!(h[6..8], 1u16.to_be_bytes());
        assert_eq!(h[8..16], 9u64.to_be_bytes());
        assert_eq!(h[16..20], 4104u32.to_be_bytes());
        let d = data_chunk_head(9, 1 << 20, 4096, false);
        assert_eq!(d.len(), 28);
        assert_eq!(d[4..6], 0u16.to_be_bytes());
        assert_eq!(d[16..20], 4104u32.to_be_bytes());
        assert_eq!(d[20..28], (1u64 << 20).to_be_bytes());
        // An error at an offset: errno, message length, message, offset.
        let e = error_chunk(9, errno::EIO, "bad", Some(8192), true);
        assert_eq!(e.len(), 20 + 4 + 2 + 3 + 8);
        assert_eq!(e[6..8], REPLY_TYPE_ERROR_OFFSET.to_be_bytes());
        assert_eq!(e[16..20], 17u32.to_be_bytes());
        assert_eq!(e[20..24], errno::EIO.to_be_bytes());
        assert_eq!(e[24..26], 3u16.to_be_bytes());
        assert_eq!(&e[26..29], b"bad");
        assert_eq!(e[29..37], 8192u64.to_be_bytes());
        // A whole-request error; a long message is cut at a character.
        let long = "é".repeat(MAX_ERROR_MESSAGE_BYTES);
        let e = error_chunk(9, errno::EINVAL, &long, None, true);
        assert_eq!(e[6..8], REPLY_TYPE_ERROR.to_be_bytes());
        let n = u16::from_be_bytes(e[24..26].try_into().unwrap()) as usize;
        assert_eq!(n, MAX_ERROR_MESSAGE_BYTES);
        assert!(std::str::from_utf8(&e[26..26 + n]).is_ok());
        assert_eq!(e.len(), 26 + n);
        assert_eq!(done_chunk(9)[4..8], [0, 1, 0, 0]);
    }

    #[test]
    fn request_headers() {
        let mut b = [0u8; REQUEST_BYTES];
        b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&CMD_FLAG_FUA.to_be_bytes());
        b[6..8].copy_from_slice(&CMD_WRITE.to_be_bytes());
        b[8..16].copy_from_slice(&77u64.to_be_bytes());
        b[16..24].copy_from_slice(&4096u64.to_be_bytes());
        b[24..28].copy_from_slice(&512u32.to_be_bytes());
        let h = parse_request(&b).unwrap();
        assert_eq!(
            (h.flags, h.kind, h.handle, h.offset, h.length),
            (1, 1, 77, 4096, 512)
        );
        b[0] ^= 1;
        assert!(parse_request(&b).is_err());
        assert_eq!(simple_reply(77, 5)[4..8], 5u32.to_be_bytes());
    }
}
