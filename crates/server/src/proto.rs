//! The NBD protocol (newstyle fixed handshake, simple replies), written
//! from the protocol specification (`doc/proto.md` of the NBD project).
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

const FLAG_FIXED_NEWSTYLE: u16 = 1;
const FLAG_NO_ZEROES: u16 = 2;
const CLIENT_FIXED_NEWSTYLE: u32 = 1;
const CLIENT_NO_ZEROES: u32 = 2;

const OPT_EXPORT_NAME: u32 = 1;
const OPT_ABORT: u32 = 2;
const OPT_LIST: u32 = 3;
const OPT_INFO: u32 = 6;
const OPT_GO: u32 = 7;

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
}

/// How a handshake ended.
#[derive(Debug, PartialEq, Eq)]
pub enum HandshakeEnd {
    /// The client entered transmission; `no_zeroes` tells nothing.
    Transmission,
    /// The client aborted or asked only for a listing.
    Aborted,
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

fn info_export(export: &Export) -> Vec<u8> {
    let mut d = Vec::with_capacity(12);
    d.extend_from_slice(&INFO_EXPORT.to_be_bytes());
    d.extend_from_slice(&export.size_bytes.to_be_bytes());
    d.extend_from_slice(&TRANSMISSION_FLAGS.to_be_bytes());
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
    let no_zeroes = client_flags & CLIENT_NO_ZEROES != 0;
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
        if let Some(end) = answer_option(s, export, option, &data, no_zeroes)? {
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
    no_zeroes: bool,
) -> Result<Option<HandshakeEnd>, ProtocolError> {
    match option {
        OPT_EXPORT_NAME => {
            let name = String::from_utf8_lossy(data);
            if !name.is_empty() && name != export.name {
                return Err(violation(format!("unknown export '{name}'")));
            }
            let mut m = Vec::with_capacity(10 + 124);
            m.extend_from_slice(&export.size_bytes.to_be_bytes());
            m.extend_from_slice(&TRANSMISSION_FLAGS.to_be_bytes());
            if !no_zeroes {
                m.extend_from_slice(&[0u8; 124]);
            }
            s.write_all(&m)?;
            Ok(Some(HandshakeEnd::Transmission))
        }
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
        OPT_INFO | OPT_GO => {
            let Some((name, requests)) = parse_info_request(data) else {
                option_reply(s, option, REP_ERR_INVALID, b"malformed INFO/GO request")?;
                return Ok(None);
            };
            if !name.is_empty() && name != export.name.as_bytes() {
                option_reply(s, option, REP_ERR_UNKNOWN, b"no such export")?;
                return Ok(None);
            }
            option_reply(s, option, REP_INFO, &info_export(export))?;
            let _ = requests;
            // Block sizes are always sent: any alignment is served.
            option_reply(s, option, REP_INFO, &info_block_size(export))?;
            option_reply(s, option, REP_ACK, &[])?;
            Ok((option == OPT_GO).then_some(HandshakeEnd::Transmission))
        }
        _ => {
            option_reply(s, option, REP_ERR_UNSUP, b"unsupported option")?;
            Ok(None)
        }
    }
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
        assert_eq!(r.unwrap(), HandshakeEnd::Transmission);
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
        assert_eq!(r.unwrap(), HandshakeEnd::Transmission);
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
        assert_eq!(r.unwrap(), HandshakeEnd::Transmission);
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
