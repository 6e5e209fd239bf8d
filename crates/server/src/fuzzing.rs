//! Entry points for fuzzing the server with whole client byte streams. The
//! `fuzz/` crate's targets call them under `cargo fuzz` (nightly); a stable
//! test here runs them on random input, so they stay built and working.
//!
//! - [`handshake_bytes`]: the handshake alone, on bytes in memory.
//! - [`Target`]: a real server on a small write-back volume in this
//!   process; [`Target::connection`] sends one connection's bytes
//!   (optionally after a valid handshake), half-closes, and reads until the
//!   server closes. A panic anywhere in the server aborts the process, and a
//!   server that stops answering fails the read's timeout, so both show up
//!   as fuzzer findings.

use std::io::{self, Cursor, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tiermux_engine::reactor::build_reactor;
use tiermux_engine::volume::MAX_REQUEST_BYTES;
use tiermux_engine::{Runtime, Volume, VolumeConfig};

use crate::proto::{self, Export, IHAVEOPT};
use crate::{Server, Shutdown};

/// The export the fuzzed server offers.
fn export(size_bytes: u64) -> Export {
    Export {
        name: "tiermux".into(),
        size_bytes,
        preferred_block: 4096,
        max_request: MAX_REQUEST_BYTES,
        structured_replies: true,
        read_ahead: true,
    }
}

/// A stream that reads `input` and discards what is written.
struct Scripted<'a> {
    input: Cursor<&'a [u8]>,
}

impl Read for Scripted<'_> {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        self.input.read(b)
    }
}

impl Write for Scripted<'_> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Runs the server's handshake on `input` as everything the client sends.
pub fn handshake_bytes(input: &[u8]) {
    let mut s = Scripted {
        input: Cursor::new(input),
    };
    let _ = proto::handshake(&mut s, &export(64 << 20));
}

/// What a client sends to reach transmission: fixed newstyle without
/// zeroes, `NBD_OPT_STRUCTURED_REPLY` when `structured`, then `NBD_OPT_GO`
/// for the export "tiermux".
pub fn valid_handshake(structured: bool) -> Vec<u8> {
    let mut v = 3u32.to_be_bytes().to_vec();
    if structured {
        v.extend_from_slice(&IHAVEOPT.to_be_bytes());
        v.extend_from_slice(&8u32.to_be_bytes());
        v.extend_from_slice(&0u32.to_be_bytes());
    }
    v.extend_from_slice(&IHAVEOPT.to_be_bytes());
    v.extend_from_slice(&7u32.to_be_bytes());
    let name = b"tiermux";
    v.extend_from_slice(&(4 + name.len() as u32 + 2).to_be_bytes());
    v.extend_from_slice(&(name.len() as u32).to_be_bytes());
    v.extend_from_slice(name);
    v.extend_from_slice(&0u16.to_be_bytes());
    v
}

/// The fuzzed volume: 8 MiB of a slow device cached on 1 MiB of a fast
/// one, write-back (the key-value target serves from it too).
pub(crate) const CONFIG: &str = r#"
size = "8MiB"
listen = "unix:fuzz.sock"
[[device]]
name = "fast"
path = "fast.img"
size = "1MiB"
[[device]]
name = "slow"
path = "slow.img"
[policy]
name = "classic"
write_mode = "wb"
dirty_high_ratio = 0.5
dirty_low_ratio = 0.2
"#;

/// A server on a small write-back volume, served by a thread of this
/// process until dropped.
pub struct Target {
    dir: PathBuf,
    sock: PathBuf,
    shutdown: Shutdown,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Target {
    /// Starts the server in a fresh directory (in memory when `/dev/shm`
    /// exists).
    pub fn start() -> Target {
        let dir = fresh_dir("tiermux-fuzz");
        let cfg = VolumeConfig::parse(CONFIG, &dir).expect("the fuzz config");
        let mut reactor = build_reactor(cfg.reactor).expect("a reactor");
        let vol = Volume::open(&cfg, reactor.as_mut()).expect("the fuzz volume");
        let mut server = Server::new(cfg.listen.clone(), export(vol.size_bytes()));
        server.bind(reactor.waker()).expect("the fuzz socket");
        let shutdown = server.shutdown_handle();
        let mut rt = Runtime::new(vol, reactor);
        let thread = std::thread::spawn(move || {
            server.run(&mut rt).expect("the fuzzed server failed");
        });
        Target {
            sock: dir.join("fuzz.sock"),
            dir,
            shutdown,
            thread: Some(thread),
        }
    }

    /// Sends one connection's bytes (after a valid handshake when
    /// `handshake`, which asks for structured replies when the input's
    /// length is odd), half-closes and reads every reply until the server
    /// closes the connection; returns the bytes received. Panics if the
    /// server does not close it within 20 s.
    pub fn connection(&self, handshake: bool, input: &[u8]) -> usize {
        let mut bytes = if handshake {
            valid_handshake(input.len() % 2 == 1)
        } else {
            Vec::new()
        };
        bytes.extend_from_slice(input);
        send_and_read_to_close(&self.sock, &bytes).len()
    }
}

/// A fresh directory named `prefix` and this process (in memory when
/// `/dev/shm` exists), for a fuzzed server's files.
pub(crate) fn fresh_dir(prefix: &str) -> PathBuf {
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("{prefix}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the fuzz directory");
    dir
}

/// A connection to the server on `sock` whose reads and writes give up
/// after 20 s.
pub(crate) fn connect(sock: &Path) -> UnixStream {
    let c = UnixStream::connect(sock).expect("connect to the fuzzed server");
    c.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    c.set_write_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    c
}

/// Sends `bytes` on a new connection to `sock`, half-closes it, and reads
/// every reply until the server closes it (from another thread, so that
/// replies cannot block the sending); returns the bytes received.
pub(crate) fn send_and_read_to_close(sock: &Path, bytes: &[u8]) -> Vec<u8> {
    let mut c = connect(sock);
    let reader = {
        let c = c.try_clone().expect("clone the socket");
        std::thread::spawn(move || read_to_close(c, Vec::new()))
    };
    // The server may close first (a broken protocol): not an error.
    let _ = c.write_all(bytes);
    let _ = c.shutdown(std::net::Shutdown::Write);
    reader.join().expect("the reply reader")
}

/// Reads from `c` onto `got` until the server closes it; panics if it does
/// not within the socket's timeout.
pub(crate) fn read_to_close(mut c: UnixStream, mut got: Vec<u8>) -> Vec<u8> {
    match c.read_to_end(&mut got) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => panic!(
            "the server did not close a connection within 20 s ({} bytes of replies)",
            got.len()
        ),
        _ => got,
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.shutdown.trigger();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiermux_core::rng::Rng;

    /// Requests with random fields, mostly well framed.
    fn random_requests(rng: &mut Rng) -> Vec<u8> {
        let mut v = Vec::new();
        for _ in 0..rng.below(8) {
            let kind = rng.below(8) as u16;
            let len = match rng.below(4) {
                0 => rng.below(9000) as u32,
                1 => 4096,
                2 => rng.below(2 << 20) as u32, // reads in pieces
                _ => rng.next_u64() as u32,
            };
            v.extend_from_slice(&proto::REQUEST_MAGIC.to_be_bytes());
            v.extend_from_slice(&(rng.below(8) as u16).to_be_bytes());
            v.extend_from_slice(&kind.to_be_bytes());
            v.extend_from_slice(&rng.next_u64().to_be_bytes());
            v.extend_from_slice(&(rng.below(9 << 20)).to_be_bytes());
            v.extend_from_slice(&len.to_be_bytes());
            if kind == proto::CMD_WRITE && len < 9000 {
                v.extend((0..len).map(|_| rng.next_u64() as u8));
            }
        }
        if rng.below(4) == 0 {
            v.extend((0..rng.below(40)).map(|_| rng.next_u64() as u8));
        }
        v
    }

    #[test]
    fn the_fuzz_entry_points_survive_random_input() {
        let mut rng = Rng::new(5);
        for _ in 0..2000 {
            let input: Vec<u8> = (0..rng.below(200)).map(|_| rng.next_u64() as u8).collect();
            handshake_bytes(&input);
        }
        let t = Target::start();
        let mut replied = 0;
        for i in 0..300 {
            let input = random_requests(&mut rng);
            replied += t.connection(i % 10 != 0, &input);
        }
        assert!(replied > 0, "the server answered nothing");
    }
}
