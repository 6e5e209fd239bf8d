//! A minimal NBD client over a Unix socket, for tests that need to send
//! exact bytes (crashes, malformed traffic, large payloads in pieces).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// A minimal NBD client for the crash and fuzz tests.
pub fn connect(sock: &Path) -> UnixStream {
    connect_with(sock, false)
}

/// Connects, asking for structured replies first when `structured` (the
/// server must agree).
pub fn connect_with(sock: &Path, structured: bool) -> UnixStream {
    let (s, agreed) = connect_asking(sock, structured);
    assert_eq!(agreed, structured, "structured replies refused");
    s
}

/// Connects, asking for structured replies first when `structured`;
/// returns whether the server agreed.
pub fn connect_asking(sock: &Path, structured: bool) -> (UnixStream, bool) {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut hello = [0u8; 18];
    s.read_exact(&mut hello).unwrap();
    s.write_all(&3u32.to_be_bytes()).unwrap();
    let mut agreed = false;
    if structured {
        send_option(&mut s, 8, &[]);
        let kind = option_reply(&mut s);
        agreed = kind == 1;
        assert!(agreed || kind == (1 << 31) | 1, "reply type {kind:#x}");
    }
    // GO: the default export (no name), no information requests.
    send_option(&mut s, 7, &[0; 6]);
    loop {
        let kind = option_reply(&mut s);
        if kind == 1 {
            return (s, agreed);
        }
        assert!(kind < 1 << 31, "GO failed with reply type {kind:#x}");
    }
}

/// Sends handshake option `option` with `data`.
fn send_option(s: &mut UnixStream, option: u32, data: &[u8]) {
    let mut m = 0x4948_4156_454F_5054u64.to_be_bytes().to_vec();
    m.extend_from_slice(&option.to_be_bytes());
    m.extend_from_slice(&(data.len() as u32).to_be_bytes());
    m.extend_from_slice(data);
    s.write_all(&m).unwrap();
}

/// Reads one option reply; returns its type (its data is skipped).
fn option_reply(s: &mut UnixStream) -> u32 {
    let mut h = [0u8; 20];
    s.read_exact(&mut h).unwrap();
    let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
    let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
    let mut data = vec![0u8; len as usize];
    s.read_exact(&mut data).unwrap();
    kind
}

/// Bytes of an NBD request header (magic, flags, type, handle, offset,
/// length).
pub const REQUEST_BYTES: usize = 28;

/// One request header.
pub fn request(kind: u16, flags: u16, handle: u64, offset: u64, len: u32) -> Vec<u8> {
    let mut r = 0x2560_9513u32.to_be_bytes().to_vec();
    r.extend_from_slice(&flags.to_be_bytes());
    r.extend_from_slice(&kind.to_be_bytes());
    r.extend_from_slice(&handle.to_be_bytes());
    r.extend_from_slice(&offset.to_be_bytes());
    r.extend_from_slice(&len.to_be_bytes());
    r
}

/// Reads one simple reply: (handle, error), plus `data_len` bytes of data
/// when there is no error.
pub fn reply(s: &mut UnixStream, data_len: usize) -> std::io::Result<(u64, u32, Vec<u8>)> {
    let mut h = [0u8; 16];
    s.read_exact(&mut h)?;
    assert_eq!(u32::from_be_bytes(h[0..4].try_into().unwrap()), 0x6744_6698);
    let err = u32::from_be_bytes(h[4..8].try_into().unwrap());
    let handle = u64::from_be_bytes(h[8..16].try_into().unwrap());
    let mut d = vec![0u8; if err == 0 { data_len } else { 0 }];
    s.read_exact(&mut d)?;
    Ok((handle, err, d))
}

/// One chunk of a structured reply.
#[derive(Debug)]
pub struct Chunk {
    pub done: bool,
    pub kind: u16,
    pub handle: u64,
    /// Where a data chunk or an error with an offset starts.
    pub offset: Option<u64>,
    pub data: Vec<u8>,
    /// An error chunk's errno (0 otherwise) and message.
    pub error: u32,
    pub message: String,
}

/// Reads one structured reply chunk.
pub fn chunk(s: &mut UnixStream) -> std::io::Result<Chunk> {
    let mut h = [0u8; 20];
    s.read_exact(&mut h)?;
    assert_eq!(u32::from_be_bytes(h[0..4].try_into().unwrap()), 0x668e_33ef);
    let flags = u16::from_be_bytes(h[4..6].try_into().unwrap());
    let kind = u16::from_be_bytes(h[6..8].try_into().unwrap());
    let handle = u64::from_be_bytes(h[8..16].try_into().unwrap());
    let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
    let mut p = vec![0u8; len];
    s.read_exact(&mut p)?;
    let mut c = Chunk {
        done: flags & 1 != 0,
        kind,
        handle,
        offset: None,
        data: Vec::new(),
        error: 0,
        message: String::new(),
    };
    match kind {
        0 => assert_eq!(len, 0),
        1 => {
            assert!(len > 8, "a data chunk of {len} bytes");
            c.offset = Some(u64::from_be_bytes(p[0..8].try_into().unwrap()));
            c.data = p[8..].to_vec();
        }
        k if k & 0x8000 != 0 => {
            c.error = u32::from_be_bytes(p[0..4].try_into().unwrap());
            assert_ne!(c.error, 0, "an error chunk without an error");
            let n = u16::from_be_bytes(p[4..6].try_into().unwrap()) as usize;
            c.message = String::from_utf8(p[6..6 + n].to_vec()).unwrap();
            let tail = &p[6 + n..];
            match k {
                0x8001 => assert!(tail.is_empty()),
                0x8002 => c.offset = Some(u64::from_be_bytes(tail.try_into().unwrap())),
                _ => panic!("unknown error chunk type {k:#x}"),
            }
        }
        _ => panic!("unknown chunk type {kind}"),
    }
    Ok(c)
}

/// Reads `blocks` (of `block_bytes` each) over a new connection to
/// `sock`, every request sent before any reply is read (a writer thread
/// sends while this one reads, so neither side's socket buffer can stall
/// the other); returns each block's data in the order of `blocks`. Every
/// read must succeed, and every reply must answer a request sent, once.
pub fn read_blocks(sock: &Path, blocks: &[u64], block_bytes: u32) -> Vec<Vec<u8>> {
    let mut c = connect(sock);
    let mut writer = c.try_clone().unwrap();
    let mut data: Vec<Option<Vec<u8>>> = vec![None; blocks.len()];
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let mut batch = Vec::new();
            for (i, &b) in blocks.iter().enumerate() {
                batch.extend(request(0, 0, i as u64, b * block_bytes as u64, block_bytes));
                // Requests go out 64 to a write.
                if batch.len() >= 64 * REQUEST_BYTES {
                    writer.write_all(&batch).unwrap();
                    batch.clear();
                }
            }
            writer.write_all(&batch).unwrap();
        });
        for _ in 0..blocks.len() {
            let (handle, err, d) = reply(&mut c, block_bytes as usize).unwrap();
            let i = handle as usize;
            assert!(i < blocks.len(), "a reply to handle {handle}, never sent");
            assert_eq!(err, 0, "reading block {}", blocks[i]);
            assert!(data[i].is_none(), "two replies to handle {handle}");
            data[i] = Some(d);
        }
    });
    let _ = c.write_all(&request(2, 0, 0, 0, 0));
    data.into_iter()
        .map(|d| d.expect("every read replied"))
        .collect()
}
