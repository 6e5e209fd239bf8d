use tiermux_sim::workload::WorkloadSpec;
use tiermux_sim::{run, SimConfig};
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let load: f64 = args.get(1).map(|s| s.parse().unwrap()).unwrap_or(2.0);
    let bs: u32 = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(65536);
    for (policy, params) in [
        ("classic", vec![]),
        ("nhc", vec![]),
        ("split", vec![("split_rate", 0.6)]),
        ("split", vec![("split_rate", 0.5)]),
    ] {
        let mut c = SimConfig::default();
        c.policy = policy.into();
        c.block_size = bs;
        c.cache_blocks = 4096;
        c.workload = WorkloadSpec {
            hit_ratio: Some(0.95),
            ..Default::default()
        };
        c.client.workers = None;
        c.client.load = Some(load);
        c.duration_s = 2.0;
        c.warmup_s = 1.0;
        for (k, v) in params {
            c.params.insert(k.into(), toml::Value::Float(v));
        }
        let t = std::time::Instant::now();
        let r = run(&c).unwrap();
        println!("{policy:8} workers {} tput {:.0} ops/s ({:.2} GB/s) mean {:.1}us p99 {:.1}us hit {:.3} dev0 {:.2} dev1 {:.2} GB/s  ctrl {:?} events {} wall {:.2}s",
            r.workers, r.throughput_ops_per_s, r.throughput_bytes_per_s/1e9, r.mean_latency_us, r.p99_latency_us, r.hit_ratio,
            r.devices[0].bytes_per_s/1e9, r.devices[1].bytes_per_s/1e9, r.controller, r.events, t.elapsed().as_secs_f64());
    }
}
