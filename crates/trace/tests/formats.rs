//! Every trace format: real lines read as their archives define them,
//! round trips through `convert`'s writers (plain and zstd), and bad
//! files (empty, truncated, garbled) refused with an error that names the
//! file and the place, never a panic.

use std::path::{Path, PathBuf};

use tiermux_core::rng::Rng;
use tiermux_core::Op;
use tiermux_trace::formats::{self, Format};
use tiermux_trace::{BlockTrace, Request};

const SECOND_NS: u64 = 1_000_000_000;

fn dir(name: &str) -> PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tiermux-formats-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn read_text(name: &str, format: &str, text: &str) -> anyhow::Result<BlockTrace> {
    let d = dir(name);
    let p = d.join("trace");
    std::fs::write(&p, text).unwrap();
    formats::read(&p, &format.parse()?)
}

#[test]
fn archive_lines_read_as_their_formats_define_them() {
    let msr = "128166372003061629,wdev,0,Read,3154280448,4096,1331\n128166372016382155,wdev,2,Write,3154280448,8192,94\n";
    let t = read_text("msr", "msr", msr).unwrap();
    assert_eq!(
        t.requests[0],
        Request::new(12_816_637_200_306_162_900, 0, Op::Read, 3_154_280_448, 4096)
    );
    assert_eq!(t.requests[1].op, Op::Write);
    assert_eq!(t.requests[1].volume, 2);

    let ali = "device_id,opcode,offset,length,timestamp\n0,R,126703644672,4096,1577808000000626\n7,W,4096,512,1577808000000700\n";
    let t = read_text("ali", "alibaba", ali).unwrap();
    assert_eq!(
        t.requests[0],
        Request::new(
            1_577_808_000_000_626_000,
            0,
            Op::Read,
            126_703_644_672,
            4096
        )
    );
    assert_eq!(
        t.requests[1],
        Request::new(1_577_808_000_000_700_000, 7, Op::Write, 4096, 512)
    );

    let tencent = "1538323200,7563328,8,1,1283\n1538323201,100,16,0,5\n";
    let t = read_text("tencent", "tencent", tencent).unwrap();
    assert_eq!(
        t.requests[0],
        Request::new(
            1_538_323_200 * SECOND_NS,
            1283,
            Op::Write,
            7_563_328 * 512,
            4096
        )
    );
    assert_eq!(
        t.requests[1],
        Request::new(1_538_323_201 * SECOND_NS, 5, Op::Read, 51_200, 8192)
    );

    let blk = "  8,0    3        1     0.000000000   697  Q  WS 3418704 + 8 [kworker/3:1H]\n\
                 8,0    3        2     0.000001234   697  G  WS 3418704 + 8 [kworker/3:1H]\n\
                 8,0    3        3     0.000004711   697  D  WS 3418704 + 8 [kworker/3:1H]\n\
                 8,0    1        1     0.000120000     0  C  WS 3418704 + 8 [0]\n\
                 8,0    0        4     0.250000000  1201  D   R 96 + 256 [cat]\n\
                 8,0    0        5     0.250000100  1201  D  FN 0 + 0 [cat]\n\
                 8,16   0        6     1.5  1201  D   N 0 + 0 [cat]\n\
               CPU0 (8,0):\n Reads Queued:           0,        0KiB\n";
    let t = read_text("blk", "blkparse", blk).unwrap();
    assert_eq!(
        t.requests,
        vec![
            Request::new(4_711, 8 << 16, Op::Write, 3_418_704 * 512, 4096),
            Request::new(250_000_000, 8 << 16, Op::Read, 96 * 512, 256 * 512),
        ]
    );
    let t = read_text("blkq", "blkparse:Q", blk).unwrap();
    assert_eq!(
        t.requests,
        vec![Request::new(0, 8 << 16, Op::Write, 3_418_704 * 512, 4096)]
    );

    let csv = "ts;id;size;type\n5;4096;4096;get\n6;8192;8192;set\n";
    let spec =
        "csv:time-col=1, obj-id-col=2, obj-size-col=3, op-col=4, has-header=true, delimiter=;";
    let t = read_text("csv", spec, csv).unwrap();
    assert_eq!(
        t.requests[1],
        Request::new(6 * SECOND_NS, 0, Op::Write, 8192, 8192)
    );
    let t = read_text("csv2", "csv:obj-id-col=2,obj-id-unit=4096", "x,3\n").unwrap();
    assert_eq!(t.requests[0], Request::new(0, 0, Op::Read, 3 * 4096, 4096));
}

/// A random trace every format can keep exactly, but for the fields it
/// has no place for: whole seconds, whole sectors, small volumes.
fn random_trace(n: usize, seed: u64) -> BlockTrace {
    let mut rng = Rng::new(seed);
    let requests = (0..n as u64)
        .map(|i| {
            let op = if rng.below(3) == 0 {
                Op::Write
            } else {
                Op::Read
            };
            let sectors = 1 + rng.below(64) as u32;
            Request::new(
                i * SECOND_NS,
                rng.below(4) as u32,
                op,
                rng.below(1 << 24) * 512,
                sectors * 512,
            )
        })
        .collect();
    BlockTrace { requests }
}

/// The requests a format keeps of `t`.
fn kept(t: &BlockTrace, format: &str) -> Vec<Request> {
    let per_page = |r: &Request, op: Op, volume: u32| {
        r.pages(4096)
            .map(move |p| Request::new(r.time_ns, volume, op, p * 4096, 4096))
            .collect::<Vec<_>>()
    };
    t.requests
        .iter()
        .flat_map(|r| match format {
            "arc" => vec![Request::new(0, 0, Op::Read, r.offset_bytes, r.size_bytes)],
            "vscsi" => vec![Request::new(
                r.time_ns,
                0,
                r.op,
                r.offset_bytes,
                r.size_bytes,
            )],
            "oracle-general" => per_page(r, Op::Read, 0),
            "oracle-general-opns" => per_page(r, r.op, r.volume),
            _ => vec![*r],
        })
        .collect()
}

const ALL: [&str; 9] = [
    "arc",
    "msr",
    "alibaba",
    "tencent",
    "blkparse",
    "oracle-general",
    "oracle-general-opns",
    "vscsi",
    "csv",
];

#[test]
fn every_format_round_trips_what_it_keeps_plain_and_compressed() {
    let t = random_trace(3_000, 7);
    let d = dir("round");
    for name in ALL {
        let format: Format = name.parse().unwrap();
        for file in [format!("t.{name}"), format!("t.{name}.zst")] {
            let p = d.join(&file);
            let notes = formats::write(&t, &p, &format, 4096).unwrap();
            let back = formats::read(&p, &format).unwrap_or_else(|e| panic!("{file}: {e:#}"));
            assert_eq!(back.requests, kept(&t, name), "{file}");
            if matches!(name, "arc" | "oracle-general") {
                assert!(
                    notes.iter().any(|n| n.contains("writes become")),
                    "{name}: {notes:?}"
                );
            }
        }
    }
    std::fs::remove_dir_all(&d).unwrap();
}

fn error_of(p: &Path, format: &str) -> String {
    match formats::read(p, &format.parse().unwrap()) {
        Ok(t) => panic!(
            "{}: read {} requests, expected an error",
            p.display(),
            t.requests.len()
        ),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn empty_and_truncated_files_are_named_errors() {
    let t = random_trace(200, 8);
    let d = dir("bad");
    for name in ALL {
        let format: Format = name.parse().unwrap();
        let empty = d.join(format!("empty.{name}"));
        std::fs::write(&empty, b"").unwrap();
        let e = error_of(&empty, name);
        assert!(
            e.contains("empty.") && e.contains("empty trace"),
            "{name}: {e}"
        );

        let whole = d.join(format!("whole.{name}"));
        formats::write(&t, &whole, &format, 4096).unwrap();
        let bytes = std::fs::read(&whole).unwrap();
        let cut = d.join(format!("cut.{name}"));
        std::fs::write(&cut, &bytes[..bytes.len() - 5]).unwrap();
        let e = error_of(&cut, name);
        assert!(e.contains("cut.") && e.contains("truncated"), "{name}: {e}");

        let zst = d.join(format!("whole.{name}.zst"));
        formats::write(&t, &zst, &format, 4096).unwrap();
        let packed = std::fs::read(&zst).unwrap();
        let cut = d.join(format!("cut.{name}.zst"));
        std::fs::write(&cut, &packed[..packed.len() / 2]).unwrap();
        let e = error_of(&cut, name);
        assert!(
            e.contains("cut.") && (e.contains("zstd") || e.contains("truncated")),
            "{name}: {e}"
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn garbled_lines_name_the_line_and_field() {
    let cases = [
        ("msr", "1,h,0,Read,0,4096,1\n2,h,0,Erase,0,4096,1\n", "trace:2: field 'Type': 'Erase' is neither Read nor Write"),
        ("msr", "1,h,0,Read,0,4096\n", "trace:1: field 'ResponseTime': missing (truncated line?)"),
        ("msr", "1,h,0,Read,-4,4096,1\n", "trace:1: field 'Offset': '-4' is not a non-negative integer"),
        ("msr", "1,h,0,Read,0,4096,1,9\n", "trace:1: more than 7 fields"),
        ("msr", "1,h,0,Read,0,8589934592,1\n", "trace:1: field 'Size': 8589934592 bytes is larger than 4 GiB"),
        ("msr", "1,h,0,Read,18446744073709551615,4096,1\n", "trace:1: field 'Size': the request runs past the 64-bit address space"),
        ("alibaba", "0,X,0,4096,1\n", "trace:1: field 'opcode': 'X' is neither R nor W"),
        ("tencent", "1,0,8,2,0\n", "trace:1: field 'IOType': 2 is neither 0 (read) nor 1 (write)"),
        ("tencent", "1,36028797018963968,8,0,0\n", "trace:1: field 'Offset': 36028797018963968 x 512 overflows 64 bits"),
        ("blkparse", "  8,0 0 1 0.5 1 D W 10 - 8 [x]\n", "trace:1: field '+': expected '+' between sector and count"),
        ("blkparse", "  8,0 0 1 0.5s 1 D W 10 + 8 [x]\n", "trace:1: field 'time': '0.5s' is not seconds.nanoseconds"),
        ("blkparse", "hello world\n", "trace:1: field 'device': 'hello' is not maj,min (not a blkparse event line)"),
        ("arc", "10 0 0 1\n", "trace:1: field 'block_count': 0 is out of range [1, 16777216]"),
        ("csv:obj-id-col=2,op-col=1", "Q,5\n", "trace:1: field 'op': 'Q' is not a read (R, read, get, 0) or a write (W, write, set, 1)"),
        ("csv:obj-id-col=3", "1,2\n", "trace:1: field 'column 3': missing (truncated line?)"),
    ];
    for (format, text, expected) in cases {
        let d = dir("garbled");
        let p = d.join("trace");
        std::fs::write(&p, text).unwrap();
        let e = formats::read(&p, &format.parse().unwrap())
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            expected.replace("trace", &p.display().to_string()),
            "{format}"
        );
    }
}

#[test]
fn garbled_records_name_the_byte_offset_and_field() {
    let t = random_trace(10, 9);
    let d = dir("records");
    let p = d.join("t");
    formats::write(&t, &p, &"oracle-general-opns".parse().unwrap(), 4096).unwrap();
    let mut b = std::fs::read(&p).unwrap();
    b[27 * 3 + 16] = 99;
    std::fs::write(&p, &b).unwrap();
    let e = error_of(&p, "oracle-general-opns");
    assert!(
        e.ends_with(": byte 81: field 'op': 99 is not a libCacheSim operation"),
        "{e}"
    );

    formats::write(&t, &p, &Format::Vscsi, 4096).unwrap();
    let mut b = std::fs::read(&p).unwrap();
    b[40 * 4 + 3] = 1;
    std::fs::write(&p, &b).unwrap();
    let e = error_of(&p, "vscsi");
    assert!(
        e.ends_with(": byte 160: field 'ver': version 1 in a version 2 trace"),
        "{e}"
    );
    b[3] = 7;
    std::fs::write(&p, &b).unwrap();
    let e = error_of(&p, "vscsi");
    assert!(
        e.ends_with(": byte 0: field 'ver': not a vscsi version 1 or 2 record"),
        "{e}"
    );
}

/// Random damage to every format's bytes gives requests or an error,
/// never a panic.
#[test]
fn random_damage_never_panics() {
    let t = random_trace(50, 10);
    let d = dir("damage");
    let mut rng = Rng::new(11);
    for name in ALL {
        let format: Format = name.parse().unwrap();
        let p = d.join(format!("t.{name}"));
        formats::write(&t, &p, &format, 4096).unwrap();
        let clean = std::fs::read(&p).unwrap();
        for _ in 0..300 {
            let mut b = clean.clone();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(b.len() as u64) as usize;
                b[i] = rng.below(256) as u8;
            }
            let cut = rng.below(b.len() as u64 + 1) as usize;
            std::fs::write(&p, &b[..cut.max(b.len() * 3 / 4)]).unwrap();
            let _ = formats::read(&p, &format);
        }
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn format_names_and_specs_are_checked() {
    let e = "lru".parse::<Format>().unwrap_err().to_string();
    assert!(
        e.starts_with("unknown trace format 'lru' (known: arc, msr"),
        "{e}"
    );
    let e = "csv:obj-id-col=0"
        .parse::<Format>()
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "csv spec: obj-id-col: '0' is not a column number (counted from 1)"
    );
    let e = "csv:time-col=1".parse::<Format>().unwrap_err().to_string();
    assert_eq!(e, "csv spec: obj-id-col is required");
    let e = "csv:obj-id-col=1,colour=red"
        .parse::<Format>()
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("csv spec: unknown key 'colour'"), "{e}");
    let e = "blkparse:QQ".parse::<Format>().unwrap_err().to_string();
    assert!(e.contains("not one blkparse action letter"), "{e}");
    let e = "msr:3".parse::<Format>().unwrap_err().to_string();
    assert_eq!(e, "format msr:3: msr takes no option");
    assert_eq!(
        Format::from_file_name(Path::new("a/OLTP.lis.zst")),
        Some(Format::Arc)
    );
    assert_eq!(Format::from_file_name(Path::new("a/x.csv")), None);
    let e = Format::resolve(None, Path::new("x.csv"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot tell the trace format"), "{e}");
}
