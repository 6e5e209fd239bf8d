//! A disk array as a simulated device (`array:NAME`): its queue times the
//! operations, so that long sequential writes move many times the bytes
//! of small random ones (the seeks and rotations the model charges), and
//! an unknown array is refused by name (a RAID-5 may be named by its
//! shape).

use tiermux_sim::workload::{Pattern, WorkloadSpec};
use tiermux_sim::{run, ClientSpec, SimConfig};

fn writes_to_the_array(pattern: Pattern, request_blocks: u32) -> f64 {
    writes_to("array:raid5-hibachi", pattern, request_blocks, 1, 1 << 20)
}

/// Client write throughput to `device`, bytes per second, with `workers`
/// requests in flight over the first `blocks` blocks.
fn writes_to(
    device: &str,
    pattern: Pattern,
    request_blocks: u32,
    workers: u32,
    blocks: u64,
) -> f64 {
    throughput(device, pattern, 1.0, request_blocks, workers, blocks)
}

/// Client throughput to `device`, bytes per second, at `write_ratio`.
fn throughput(
    device: &str,
    pattern: Pattern,
    write_ratio: f64,
    request_blocks: u32,
    workers: u32,
    blocks: u64,
) -> f64 {
    let cfg = SimConfig {
        devices: vec!["dram".into(), device.into()],
        policy: "passthrough".into(),
        cache_blocks: 16,
        volume_blocks: Some(blocks),
        workload: WorkloadSpec {
            pattern,
            working_set_blocks: Some(blocks),
            write_ratio,
            request_blocks,
            ..WorkloadSpec::default()
        },
        client: ClientSpec {
            workers: Some(workers),
            ..ClientSpec::default()
        },
        duration_s: 20.0,
        warmup_s: 2.0,
        prefill: false,
        sample_interval_ms: 20_000.0,
        ..SimConfig::default()
    };
    let r = run(&cfg).unwrap();
    assert!(r.requests > 50, "{} requests", r.requests);
    r.throughput_bytes_per_s
}

#[test]
fn sequential_writes_to_an_array_outrun_random_ones() {
    let random = writes_to_the_array(Pattern::Uniform, 1);
    let sequential = writes_to_the_array(Pattern::Sequential { streams: 1 }, 128);
    println!("array writes, one in flight: random 4 KiB {random:.0} B/s, sequential 512 KiB {sequential:.0} B/s");
    // Random 4 KiB writes: a parity read-modify-write of about 10 ms or
    // more, so well under 1 MB/s at one in flight; 512 KiB sequential
    // writes stream, with a seek only now and then.
    assert!(random < 1e6, "random {random} B/s");
    assert!(
        sequential > 20.0 * random,
        "sequential {sequential} vs random {random} B/s"
    );
}

/// With many random writes waiting, the elevator serves them in address
/// order. Over 16 MiB of one disk (about 8.5 tracks of 1.88 MB: 226 MB/s
/// for a 8.33 ms turn), a write at one in flight pays a short seek and
/// half a turn on average; with 16 waiting, about two per track, the next
/// in address order is mostly a little further on the same track and
/// costs only the turn to it. The disk moves over 1.5 times as many
/// writes; served in arrival order, they would move the same.
#[test]
fn waiting_random_writes_are_served_faster_in_address_order() {
    let (disk, blocks) = ("array:disk-st6000", 1 << 12);
    let one = writes_to(disk, Pattern::Uniform, 1, 1, blocks);
    let sixteen = writes_to(disk, Pattern::Uniform, 1, 16, blocks);
    let ratio = sixteen / one;
    println!("one disk, random 4 KiB writes over 16 MiB: {one:.0} B/s at 1 in flight, {sixteen:.0} B/s at 16 ({ratio:.2}x)");
    assert!((1.5..3.0).contains(&ratio), "{ratio:.2}x");
}

/// The RAID-5's six member disks seek at once: with 32 random 4 KiB
/// reads in flight over 1 GiB, the array moves over four times what one
/// of its disks moves; at one in flight, about what one disk moves (each
/// read is one disk's). A random write costs four disk operations (read
/// old data and parity, write both: the small-write penalty of Patterson,
/// Gibson and Katz's RAID paper), so six disks write 6 / 4 = 1.5 times
/// what one disk does; within a fifth of that.
#[test]
fn member_disks_of_an_array_serve_at_once() {
    let blocks = 1 << 18;
    let reads = |device, workers| throughput(device, Pattern::Uniform, 0.0, 1, workers, blocks);
    let (raid1, disk1) = (
        reads("array:raid5-hibachi", 1),
        reads("array:disk-st6000", 1),
    );
    let (raid32, disk32) = (
        reads("array:raid5-hibachi", 32),
        reads("array:disk-st6000", 32),
    );
    let writes = |device, workers| writes_to(device, Pattern::Uniform, 1, workers, blocks);
    let (w1, w32) = (
        writes("array:raid5-hibachi", 1),
        writes("array:raid5-hibachi", 32),
    );
    let disk_w32 = writes("array:disk-st6000", 32);
    println!(
        "random 4 KiB over 1 GiB, B/s: reads, RAID-5 {raid1:.0} at 1 in flight, {raid32:.0} at 32, one disk {disk1:.0} and {disk32:.0}; writes, RAID-5 {w1:.0} and {w32:.0}, one disk {disk_w32:.0} at 32"
    );
    assert!(
        (0.8..1.25).contains(&(raid1 / disk1)),
        "{raid1} against {disk1}"
    );
    assert!(raid32 > 4.0 * disk32, "{raid32} against {disk32}");
    assert!(w32 > 2.5 * w1, "{w32} against {w1}");
    let penalty = w32 / disk_w32;
    assert!(
        (1.2..1.8).contains(&penalty),
        "RAID-5 writes {penalty:.2}x one disk's"
    );
    assert!(w32 > 2.5 * w1, "{w32} against {w1}");
}

#[test]
fn an_unknown_array_is_refused_by_name() {
    let cfg = SimConfig {
        devices: vec!["dram".into(), "array:raid6".into()],
        ..SimConfig::default()
    };
    let e = cfg.resolve().unwrap_err().to_string();
    assert!(
        e.contains("devices[1]") && e.contains("raid5-hibachi"),
        "{e}"
    );
    // A RAID-5 named by its shape resolves; a shape md would not build
    // is refused with what is wrong.
    let shaped = |name: &str| SimConfig {
        devices: vec!["dram".into(), format!("array:{name}")],
        ..SimConfig::default()
    };
    assert!(shaped("raid5-4x64k").resolve().is_ok());
    let e = shaped("raid5-4x48k").resolve().unwrap_err().to_string();
    assert!(
        e.contains("devices[1]") && e.contains("power of two"),
        "{e}"
    );
}

/// A three-device run reports its third device (the array under DRAM and
/// NVRAM) in the results table, and a plot may name its columns; a
/// two-device experiment has no such column.
#[test]
fn a_third_device_has_its_own_result_columns() {
    use tiermux_sim::experiment::{runs_table, timeseries_table, Experiment};
    let text = |devices: &str| {
        format!(
            "name = \"t\"\n[base]\ndevices = [{devices}]\npolicy = \"passthrough\"\nvolume_blocks = 4096\nduration_s = 2.0\nwarmup_s = 0.5\nprefill = false\nsample_interval_ms = 500\n[base.workload]\nworking_set_blocks = 4096\nwrite_ratio = 1.0\n[[plot]]\nname = \"array\"\nx = \"policy\"\ny = \"dev2_written_bytes\"\n"
        )
    };
    let e = Experiment::parse(
        &text("\"dram\", \"dram\", \"array:raid5-hibachi\""),
        "t.toml",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (swept, cfg) = &e.runs[0];
    let r = run(cfg).unwrap();
    let pairs = [(swept.as_slice(), &r)];
    let t = runs_table(&e.keys, &pairs);
    let col = t
        .column("dev2_written_bytes")
        .expect("a column for the array");
    let written: u64 = t.rows[0][col].parse().unwrap();
    assert!(written > 0 && written == r.devices[2].written_bytes);
    let series = timeseries_table(&e.keys, &pairs);
    assert!(series.column("dev2_bytes_per_s").is_some());
    let err = Experiment::parse(&text("\"dram\", \"array:raid5-hibachi\""), "t.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("dev2_written_bytes"), "{err}");
}
