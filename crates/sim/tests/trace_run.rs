//! Block traces in the timed simulator: requests at their recorded times
//! or taken in order by closed-loop workers, the run ending with the
//! trace, every read checked, and bad trace runs refused by name.

use std::path::PathBuf;

use tiermux_sim::experiment::Experiment;
use tiermux_sim::{ClientSpec, SimConfig};
use tiermux_trace::TraceSource;

/// Windows FILETIME of the first request (100 ns units, as MSR traces).
const T0: u64 = 128_166_372_000_000_000;

/// An MSR Cambridge trace of `n` 4 KiB reads of distinct, scattered
/// pages, one every `gap_ms`; returns its path.
fn msr_reads(name: &str, n: u64, gap_ms: u64) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tiermux-trace-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.csv"));
    let text: String = (0..n)
        .map(|i| {
            let t = T0 + i * gap_ms * 10_000;
            format!("{t},host,0,Read,{},4096,100\n", (i * 7919 % n) * 3 * 4096)
        })
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// Every read goes to a device serving 1,000 ops/s one at a time.
fn passthrough_on_fixed(path: PathBuf, client: ClientSpec) -> SimConfig {
    SimConfig {
        devices: vec!["dram".into(), "fixed:1000".into()],
        policy: "passthrough".into(),
        trace: Some(TraceSource {
            path: Some(path),
            format: Some("msr".into()),
            ..TraceSource::default()
        }),
        client,
        duration_s: 100.0,
        warmup_s: 0.0,
        ..SimConfig::default()
    }
}

fn recorded(speedup: f64) -> ClientSpec {
    ClientSpec {
        workers: None,
        replay_speedup: Some(speedup),
        ..ClientSpec::default()
    }
}

#[test]
fn recorded_times_queue_as_a_deterministic_single_server_queue() {
    let n = 100;
    // Every 2 ms on a 1 ms server: nobody waits.
    let r = tiermux_sim::run(&passthrough_on_fixed(
        msr_reads("calm", n, 2),
        recorded(1.0),
    ))
    .unwrap();
    assert_eq!((r.requests, r.reads_checked), (n, n));
    assert!(
        (r.mean_latency_us - 1000.0).abs() < 1.0,
        "{}",
        r.mean_latency_us
    );
    // The run is the trace's 198 ms plus the last read's 1 ms.
    assert!(
        (r.throughput_ops_per_s - n as f64 / 0.199).abs() < 0.5,
        "{}",
        r.throughput_ops_per_s
    );
    // Four times faster, one every 0.5 ms: request i arrives at 0.5 i ms
    // and leaves at (i + 1) ms (D/D/1), so its latency is 1 + 0.5 i ms
    // and the mean over 100 is 1 + 0.5 * 49.5 = 25.75 ms.
    let r = tiermux_sim::run(&passthrough_on_fixed(
        msr_reads("busy", n, 2),
        recorded(4.0),
    ))
    .unwrap();
    assert_eq!(r.requests, n);
    assert!(
        (r.mean_latency_us - 25_750.0).abs() < 5.0,
        "{}",
        r.mean_latency_us
    );
    assert!(
        (r.p99_latency_us - 50_500.0).abs() / 50_500.0 < 0.02,
        "{}",
        r.p99_latency_us
    );
    // The run ends with the last read, at 100 ms.
    assert!(
        (r.throughput_ops_per_s - 1000.0).abs() < 0.5,
        "{}",
        r.throughput_ops_per_s
    );
}

#[test]
fn closed_loop_workers_take_the_trace_in_order_and_stop_at_its_end() {
    let n = 60;
    let one = ClientSpec {
        workers: Some(1),
        ..ClientSpec::default()
    };
    let r = tiermux_sim::run(&passthrough_on_fixed(msr_reads("closed", n, 50), one)).unwrap();
    // Recorded times are ignored: one read after the other, 1 ms each.
    assert_eq!(r.requests, n);
    assert!((r.mean_latency_us - 1000.0).abs() < 1.0);
    assert!(
        (r.throughput_ops_per_s - 1000.0).abs() < 0.5,
        "{}",
        r.throughput_ops_per_s
    );
    // A cap shorter than the trace stops it there.
    let mut capped = passthrough_on_fixed(msr_reads("capped", n, 50), ClientSpec::default());
    capped.duration_s = 0.0205;
    let r = tiermux_sim::run(&capped).unwrap();
    assert_eq!(r.requests, 20);
}

/// A generated MSR-like trace through every family of policies: every
/// request is replayed once, every read returns what was last written
/// (the simulator's version check fails the run otherwise) and the
/// working set is the trace's distinct pages.
#[test]
fn every_family_replays_a_generated_trace_whole() {
    let text = r#"
name = "trace-families"
[base]
devices = ["optane-p4800x", "sata-870"]
cache_share = 0.1
duration_s = 1000.0
warmup_s = 0.0
[base.trace]
preset = "wdev_0"
set = { requests = 3000 }
[[sweep]]
policy = ["classic", "nhc", "most", "hemem", "split", "passthrough"]
[[sweep]]
devices = [["dram", "nvm", "hdd"]]
middle_device_shares = [[0.1]]
policy = ["hibachi", "hybrid-lru", "stacked"]
[[sweep]]
devices = [["dram", "sata-870", "nvme-pcie3", "hdd"]]
cache_share = [0.01]
middle_device_shares = [[0.1, 0.1]]
policy = ["tica-ef", "tica-wed", "tica-a", "ucache", "s-rac"]
"#;
    let exp = Experiment::parse(text, "families.toml").unwrap();
    let configs: Vec<SimConfig> = exp.runs.iter().map(|(_, c)| c.clone()).collect();
    let results = tiermux_sim::experiment::run_all(&configs, 2, &|_| {});
    let source = configs[0].trace.clone().unwrap();
    let (trace, _) = source.load(std::path::Path::new(".")).unwrap();
    let timed = tiermux_trace::TimedTrace::from_trace(&trace, 4096);
    let reads = timed
        .requests
        .iter()
        .filter(|r| r.op == tiermux_core::Op::Read);
    let read_blocks: u64 = reads.map(|r| r.blocks as u64).sum();
    for (cfg, r) in configs.iter().zip(results) {
        let r = r.unwrap_or_else(|e| panic!("{}: {e}", cfg.policy));
        assert_eq!(r.requests, timed.requests.len() as u64, "{}", cfg.policy);
        assert_eq!(r.reads_checked, read_blocks, "{}", cfg.policy);
        assert_eq!(
            r.working_set_blocks, timed.distinct_blocks,
            "{}",
            cfg.policy
        );
    }
}

#[test]
fn bad_trace_runs_are_refused_by_name() {
    let base = |extra: &str| {
        format!(
            "name = \"x\"\n[base]\ndevices = [\"dram\", \"hdd\"]\npolicy = \"classic\"\n{extra}"
        )
    };
    let err = |text: String| {
        Experiment::parse(&text, "bad.toml")
            .unwrap_err()
            .to_string()
    };
    let e = err(base(
        "[base.trace]\npreset = \"ts_0\"\n[base.workload]\nwrite_ratio = 0.5\n",
    ));
    assert!(
        e.contains("workload") && e.contains("from the trace"),
        "{e}"
    );
    let e = err(base("[base.client]\nreplay_speedup = 2.0\n"));
    assert!(
        e.contains("client.replay_speedup") && e.contains("no trace"),
        "{e}"
    );
    let e = err(base(
        "[base.trace]\npreset = \"ts_0\"\n[base.client]\nreplay_speedup = 2.0\nworkers = 4\n",
    ));
    assert!(e.contains("leave out workers"), "{e}");
    let e = err(base("[base.trace]\npreset = \"ts_0\"\npage_bytes = 512\n"));
    assert!(e.contains("trace.page_bytes"), "{e}");
    let e = err(base(
        "[base.trace]\npath = \"no-such.msr\"\nformat = \"msr\"\n",
    ));
    assert!(e.contains("no-such.msr"), "{e}");
    let e = err(base("[base.trace]\npreset = \"no-such\"\n"));
    assert!(e.contains("no-such"), "{e}");
    let e = err(base("cache_share = 0.1\n"));
    assert!(
        e.contains("cache_share") && e.contains("working set"),
        "{e}"
    );
}
