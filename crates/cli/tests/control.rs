//! `tiermux serve --control` and `tiermux ctl`: the write mode of a
//! volume under fio's verified writes goes from write-back to
//! write-through and back without a restart; write-through drains the
//! dirty blocks and keeps none while fio writes on, and fio reads back
//! every block as written. Changes a config file would be refused for, or
//! that need a restart, are refused and change nothing.
//!
//! Needs fio (`.ci/run` installs it), like `tests/nbd.rs`.

use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use crate::common::nbd_served;
use nbd_served::*;

/// Runs `tiermux ctl SOCKET args...` in `dir`.
fn ctl(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tiermux"))
        .arg("ctl")
        .arg(dir.join("ctl.sock"))
        .args(args)
        .output()
        .unwrap()
}

/// The answer of a `ctl` command that must succeed.
fn ctl_ok(dir: &std::path::Path, args: &[&str]) -> String {
    let out = ctl(dir, args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "ctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The error of a `ctl` command that must fail.
fn ctl_err(dir: &std::path::Path, args: &[&str]) -> String {
    let out = ctl(dir, args);
    assert!(!out.status.success(), "ctl {args:?} was accepted");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Dirty bytes and requests, from `ctl stats`.
fn dirty_and_requests(dir: &std::path::Path) -> (f64, f64) {
    let m = ctl_ok(dir, &["stats"]);
    (
        must(&m, "tiermux_dirty_bytes"),
        must(&m, "tiermux_requests_total"),
    )
}

/// Polls until `want` holds of the dirty bytes (fio must still run).
fn wait_for_dirty(dir: &std::path::Path, fio: &mut Child, what: &str, want: impl Fn(f64) -> bool) {
    let t0 = Instant::now();
    loop {
        let (dirty, _) = dirty_and_requests(dir);
        if want(dirty) {
            return;
        }
        assert!(
            fio.try_wait().unwrap().is_none(),
            "fio finished before {what} (dirty bytes {dirty})"
        );
        assert!(t0.elapsed() < Duration::from_secs(20), "no {what}: {dirty}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn write_mode_changes_under_fio_and_every_block_verifies() {
    if !have_tools(&["fio"]) {
        return;
    }
    let dir = data_dir("control");
    let (s, line) = Served::spawn_with(&dir, &["--control", "ctl.sock"]);
    assert!(line.contains("control on"), "{line}");
    assert!(ctl_ok(&dir, &["get", "write_mode"]).contains("write_mode = \"wb\""));

    // Verified random writes and reads, slow enough to outlast the changes.
    let mut fio = spawn_fio_verify(&s, "32M", 800);
    // Write-back: the cache holds data newer than home.
    wait_for_dirty(&dir, &mut fio, "dirty data in write-back", |d| d > 0.0);

    // Write-through: what write-back left is flushed while fio writes on,
    // and no write leaves a block dirty.
    assert_eq!(
        ctl_ok(&dir, &["set", "write_mode", "wt"]),
        "changed write_mode\n"
    );
    wait_for_dirty(&dir, &mut fio, "a drained cache", |d| d == 0.0);
    let (_, requests_before) = dirty_and_requests(&dir);
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            dirty_and_requests(&dir).0,
            0.0,
            "write-through left dirty data"
        );
    }
    let (_, requests_after) = dirty_and_requests(&dir);
    assert!(
        requests_after > requests_before,
        "fio stopped: {requests_before} -> {requests_after}"
    );

    // Refused changes leave the volume as it runs.
    let e = ctl_err(&dir, &["set", "cache_blocks", "16"]);
    assert!(
        e.contains("'cache_blocks' cannot change while the volume runs"),
        "{e}"
    );
    let e = ctl_err(&dir, &["set", "dirty_low_ratio", "0.9"]);
    assert!(e.contains("must not exceed dirty_high_ratio"), "{e}");
    let e = ctl_err(&dir, &["set", "write_mode", "wt", "colour", "3"]);
    assert!(e.contains("'colour': unknown parameter"), "{e}");
    let e = ctl_err(&dir, &["set", "write_mode"]);
    assert!(e.contains("pairs"), "{e}");
    assert!(ctl_ok(&dir, &["get"]).contains("write_mode = \"wt\""));

    // Back to write-back, with a lower watermark: dirty data again.
    assert_eq!(
        ctl_ok(
            &dir,
            &[
                "set",
                "write_mode",
                "wb",
                "dirty_high_ratio",
                "0.2",
                "dirty_low_ratio",
                "0.1"
            ]
        ),
        "changed dirty_high_ratio, dirty_low_ratio, write_mode\n"
    );
    wait_for_dirty(&dir, &mut fio, "dirty data in write-back again", |d| {
        d > 0.0
    });
    assert_eq!(ctl_ok(&dir, &["set", "write_mode", "wb"]), "unchanged\n");

    let out = fio.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "fio: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("err= 0"), "{text}");
    s.stop();
    std::fs::remove_dir_all(&dir).ok();
}

/// What a raw client of the control socket gets back for `request`.
fn raw(dir: &std::path::Path, request: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(dir.join("ctl.sock")).unwrap();
    s.write_all(request).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
}

/// Bad requests get an error that names the problem, a client that sends
/// nothing holds up no other, and idle clients cannot open connections
/// without end.
#[test]
fn bad_control_requests_are_answered_with_errors() {
    let dir = data_dir("control-bad");
    let (s, _) = Served::spawn_with(&dir, &["--control", "ctl.sock"]);
    let silent = std::os::unix::net::UnixStream::connect(dir.join("ctl.sock")).unwrap();
    let t0 = Instant::now();
    assert!(ctl_ok(&dir, &["get"]).contains("name = \"nhc\""));
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "held up by a silent client"
    );
    drop(silent);
    // Silent clients fill every connection: one more is told the socket is
    // busy, and once they leave, requests are answered again.
    let connect = || std::os::unix::net::UnixStream::connect(dir.join("ctl.sock")).unwrap();
    let mut held: Vec<_> = (0..tiermux_server::control::MAX_CONNECTIONS)
        .map(|_| connect())
        .collect();
    // A connection from before may still be closing when one of these
    // arrives, which is then refused: hold one more until the socket is
    // busy.
    let t0 = Instant::now();
    loop {
        let answer = raw(&dir, b"get\n");
        if answer.starts_with("error\nbusy: 16 control connections") {
            break;
        }
        assert!(answer.starts_with("ok"), "{answer}");
        assert!(t0.elapsed() < Duration::from_secs(5), "never busy");
        held.push(connect());
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(held);
    // The server's threads for the dropped connections end one by one,
    // each request's own after it answers: until they all have, a request
    // may still be told the socket is busy.
    let raw = |dir: &std::path::Path, request: &[u8]| {
        let t0 = Instant::now();
        loop {
            let answer = raw(dir, request);
            if !answer.starts_with("error\nbusy:") {
                return answer;
            }
            assert!(t0.elapsed() < Duration::from_secs(5), "still busy");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    assert!(raw(&dir, b"get write_mode\n").starts_with("ok"));
    let answer = raw(&dir, b"get \xff\xfe\n");
    assert!(
        answer.starts_with("error\nrequest is not UTF-8"),
        "{answer}"
    );
    let answer = raw(&dir, &[b'x'; 5000]);
    assert!(
        answer.starts_with("error\nrequest longer than 4096 bytes"),
        "{answer}"
    );
    let answer = raw(&dir, b"set write_mode\n");
    assert!(answer.starts_with("error\nset takes pairs"), "{answer}");
    assert_eq!(raw(&dir, b"get write_mode\n"), "ok\nwrite_mode = \"wb\"\n");
    s.stop();
    std::fs::remove_dir_all(&dir).ok();
}
