//! Write throughput of a fio iolog's writes (version 2, as `tiermux replay
//! --flush-log` writes them) on the Hibachi paper's RAID-5 array, served
//! one request at a time as fio's `ioengine=sync` replays them: the
//! `RAID-5 MB/s` column of `tiermux replay`, for any log or a slice of one.
//!
//! Usage: `iolog_raid5 IOLOG [SKIP_WRITES [WRITES]]`: the writes after the
//! first `SKIP_WRITES`, at most `WRITES` of them (default: all).

use std::process::ExitCode;

use tiermux_device::disk::Raid5;

fn main() -> ExitCode {
    match run() {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("iolog_raid5: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<String, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |i: usize, default: usize| -> Result<usize, String> {
        args.get(i).map_or(Ok(default), |a| {
            a.parse()
                .map_err(|_| format!("argument {}: '{a}' is not a count", i + 1))
        })
    };
    let path = args
        .first()
        .ok_or("usage: iolog_raid5 IOLOG [SKIP_WRITES [WRITES]]")?;
    let (skip, take) = (number(1, 0)?, number(2, usize::MAX)?);
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut array = Raid5::hibachi_paper();
    let mut writes = 0u64;
    let lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(" write "));
    for (n, line) in lines.skip(skip).take(take) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let field = |i: usize, name: &str| -> Result<u64, String> {
            let v = fields
                .get(i)
                .ok_or(format!("{path}:{}: no {name}", n + 1))?;
            v.parse()
                .map_err(|_| format!("{path}:{}: {name} '{v}' is not a number", n + 1))
        };
        array.write(field(2, "offset")?, field(3, "length")?);
        writes += 1;
    }
    Ok(format!(
        "{writes} writes, {:.3} MB/s, {:.1} s of array time",
        array.write_bytes_per_s() / 1e6,
        array.busy_ms / 1e3
    ))
}
