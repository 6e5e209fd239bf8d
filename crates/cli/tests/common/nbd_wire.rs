//! A minimal NBD client over a Unix socket, for tests that need to send
//! exact bytes (crashes, malformed traffic, large payloads in pieces).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// A minimal NBD client for the crash and fuzz tests.
pub fn connect(sock: &Path) -> UnixStream {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut hello = [0u8; 18];
    s.read_exact(&mut hello).unwrap();
    s.write_all(&3u32.to_be_bytes()).unwrap();
    let mut go = 0x4948_4156_454F_5054u64.to_be_bytes().to_vec();
    go.extend_from_slice(&7u32.to_be_bytes());
    go.extend_from_slice(&6u32.to_be_bytes());
    go.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    s.write_all(&go).unwrap();
    loop {
        let mut h = [0u8; 20];
        s.read_exact(&mut h).unwrap();
        let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
        let mut d = vec![0u8; len as usize];
        s.read_exact(&mut d).unwrap();
        if kind == 1 {
            return s;
        }
        assert!(kind < 1 << 31, "GO failed with reply type {kind:#x}");
    }
}

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
