//! The NBD server's request memory (`request_memory` in the volume
//! config): clients that send many large reads and read none of the
//! replies are held to it together, where each alone is held only to its
//! connection's 64 MiB. A client that reads its replies is served
//! meanwhile, and every reply arrives whole once the stalled clients read.
//! And an idle connection holds a small receive buffer, whatever it sent
//! before.

use std::io::Write;
use std::time::Duration;

use crate::common::nbd_served::{
    data_dir_with, peak_memory_kib, resident_memory_kib, Served, CONFIG,
};
use crate::common::nbd_wire::{connect, reply, request};

/// The server's peak resident memory (VmHWM), MiB.
fn peak_mib(pid: u32) -> u64 {
    peak_memory_kib(pid) >> 10
}

#[test]
fn clients_that_never_read_stay_within_the_servers_request_memory() {
    let config = CONFIG.replace(
        "size = \"64MiB\"\n",
        "size = \"64MiB\"\nrequest_memory = \"128MiB\"\n",
    );
    assert!(config.contains("request_memory"));
    let dir = data_dir_with("request-memory", &config);
    let s = Served::start(&dir);
    let pid = s.child.id();
    let before_mib = peak_mib(pid);
    // Eight clients ask for 160 MiB of replies each; at their own limits
    // they would hold about 8 x 68 MiB.
    let (clients, reads, len) = (8u64, 40u64, 4u32 << 20);
    let mut streams = Vec::new();
    let mut senders = Vec::new();
    for c in 0..clients {
        let stream = connect(&s.sock());
        let mut writer = stream.try_clone().unwrap();
        senders.push(std::thread::spawn(move || {
            for i in 0..reads {
                let offset = ((c * reads + i) * len as u64) % (60 << 20);
                writer.write_all(&request(0, 0, i, offset, len)).unwrap();
            }
        }));
        streams.push(stream);
    }
    std::thread::sleep(Duration::from_secs(3));
    // A ninth client, which reads its replies, is served meanwhile.
    let mut other = connect(&s.sock());
    for i in 0..16 {
        other.write_all(&request(0, 0, i, i * 4096, 4096)).unwrap();
        let (handle, err, data) = reply(&mut other, 4096).unwrap();
        assert_eq!((handle, err, data.len()), (i, 0, 4096));
    }
    let held_mib = peak_mib(pid);
    // The request memory, one largest request (32 MiB) past it, and the
    // connections' receive buffers and socket copies.
    assert!(
        held_mib < before_mib + 128 + 32 + 48,
        "server peak memory {held_mib} MiB (at the start {before_mib} MiB)"
    );
    for mut stream in streams {
        let mut seen = vec![false; reads as usize];
        for _ in 0..reads {
            let (handle, err, data) = reply(&mut stream, len as usize).unwrap();
            assert_eq!((err, data.len()), (0, len as usize));
            assert!(!std::mem::replace(&mut seen[handle as usize], true));
        }
    }
    for sender in senders {
        sender.join().unwrap();
    }
    println!("stalled clients: server peak memory {held_mib} MiB (at the start {before_mib} MiB)");
    s.stop();
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn idle_connections_give_their_receive_buffers_back() {
    let dir = data_dir_with("idle-connections", CONFIG);
    let s = Served::start(&dir);
    let pid = s.child.id();
    // Warm up: one streaming client, so that the server's own buffers and
    // the allocator's pools are in place before the count starts.
    let burst = |stream: &mut std::os::unix::net::UnixStream, first: u64| {
        let (writes, len) = (64u64, 4096u32);
        let mut batch = Vec::new();
        for i in 0..writes {
            batch.extend(request(
                1,
                0,
                first + i,
                (first + i) * 4096 % (60 << 20),
                len,
            ));
            batch.extend(std::iter::repeat_n((first + i) as u8, len as usize));
        }
        // 264 KiB in one go: the receive buffer fills and grows.
        stream.write_all(&batch).unwrap();
        for _ in 0..writes {
            let (_, err, _) = reply(stream, 0).unwrap();
            assert_eq!(err, 0);
        }
    };
    let mut warm = connect(&s.sock());
    burst(&mut warm, 0);
    let before_kib = resident_memory_kib(pid);
    // Each client streams a burst of writes and then stays connected, idle.
    let clients = 200u64;
    let mut idle = Vec::new();
    for c in 0..clients {
        let mut stream = connect(&s.sock());
        burst(&mut stream, (c + 1) * 64);
        idle.push(stream);
    }
    // A connection gives its grown buffer back once the server has seen
    // it idle for a second; another client's burst makes the server look.
    std::thread::sleep(Duration::from_millis(1100));
    burst(&mut warm, 0);
    let after_kib = resident_memory_kib(pid);
    let per_client_kib = after_kib.saturating_sub(before_kib) / clients;
    println!("{clients} idle connections: {per_client_kib} KiB each ({before_kib} KiB before, {after_kib} KiB after)");
    // A receive buffer grown to 256 KiB and kept would be 256 KiB each; an
    // idle connection keeps 16 KiB of it, plus its bookkeeping.
    assert!(
        per_client_kib < 64,
        "{per_client_kib} KiB per idle connection ({before_kib} KiB before, {after_kib} KiB after)"
    );
    drop(idle);
    s.stop();
    std::fs::remove_dir_all(&dir).ok();
}
