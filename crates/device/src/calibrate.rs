//! Measuring device models the way the papers measured devices: QD1
//! latency and closed-loop throughput at a given concurrency.

use tiermux_core::rng::Rng;
use tiermux_core::Op;

use crate::model::{DeviceModel, SimDevice};

/// Mean latency of `bytes`-sized operations issued one at a time, ns.
pub fn qd1_latency_ns(model: &DeviceModel, dir: Op, bytes: u64) -> f64 {
    let mut d = SimDevice::new(model.clone());
    let mut rng = Rng::new(11);
    let mut now = 0u64;
    let n = 2000;
    for _ in 0..n {
        let done = d.submit(now, dir, bytes, rng.next_u64(), 0);
        d.complete(dir);
        now = done;
    }
    now as f64 / n as f64
}

/// Operations per second with `workers` closed-loop workers, each issuing
/// its next `bytes`-sized operation (random address) as soon as one ends.
pub fn closed_loop_throughput(model: &DeviceModel, dir: Op, bytes: u64, workers: u32) -> f64 {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut d = SimDevice::new(model.clone());
    let mut rng = Rng::new(13);
    let mut heap = BinaryHeap::new();
    for _ in 0..workers {
        heap.push(Reverse(d.submit(0, dir, bytes, rng.next_u64(), 0)));
    }
    let total = 20_000u64.max(workers as u64 * 200);
    let warm = total / 10;
    let mut t_warm = 0;
    let mut last = 0;
    for i in 0..total {
        let Reverse(t) = heap.pop().expect("worker");
        d.complete(dir);
        if i == warm {
            t_warm = t;
        }
        last = t;
        heap.push(Reverse(d.submit(t, dir, bytes, rng.next_u64(), 0)));
    }
    (total - 1 - warm) as f64 * 1e9 / (last - t_warm).max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{builtin_profiles, find_builtin};

    /// Every profile with table numbers reproduces them: QD1 latency and
    /// peak bandwidth (32 threads for MOST Table 1) at 4 and 16 KiB, within 2 %.
    #[test]
    fn profiles_match_their_calibration_points() {
        for p in builtin_profiles() {
            let m = p.model().unwrap();
            for (dir, t) in [(Op::Read, &p.read), (Op::Write, &p.write)] {
                let mut points = vec![(4096u64, t.latency_us_4k, t.gb_per_s_4k)];
                if let (Some(l), Some(b)) = (t.latency_us_16k, t.gb_per_s_16k) {
                    points.push((16384, l, b));
                }
                // MOST Table 1 (two-point profiles) measured 32 threads;
                // Orthus Table 1 gives peak (datasheet) bandwidth, reached at
                // high concurrency, or where writers start to contend when
                // the profile models contention.
                let threads = if dir == Op::Write && p.write_contention_threads > 0 {
                    p.write_contention_threads
                } else if t.gb_per_s_16k.is_some() {
                    32
                } else {
                    256
                };
                for (size, lat_us, gb) in points {
                    let bw = closed_loop_throughput(&m, dir, size, threads) * size as f64 / 1e9;
                    if p.channels == 1 {
                        // A disk: the bandwidth figure is the sequential media
                        // rate; random accesses are one per access time.
                        let iops = bw * 1e9 / size as f64;
                        assert!(
                            (iops * lat_us * 1e-6 - 1.0).abs() < 0.02,
                            "{} {iops}",
                            p.name
                        );
                        continue;
                    }
                    assert!(
                        (bw - gb).abs() / gb < 0.02,
                        "{} {dir:?} {size}: {bw} GB/s vs {gb}",
                        p.name
                    );
                    if t.qd1_gb_per_s.is_none() && (t.latency_us_16k.is_some() || size == 4096) {
                        let lat = qd1_latency_ns(&m, dir, size) / 1e3;
                        // One-latency profiles whose pipe alone exceeds the
                        // latency (memory) are checked through qd1_gb_per_s.
                        if m.read.access_ns(size) > 0.0 || dir == Op::Write {
                            assert!(
                                (lat - lat_us).abs() / lat_us < 0.02,
                                "{} {dir:?} {size}: {lat} µs vs {lat_us}",
                                p.name
                            );
                        }
                    }
                }
            }
        }
    }

    /// Orthus Figure 2's shape: Optane SSD is far faster than Flash at QD1
    /// but the ratio collapses with concurrency until the two are nearly
    /// identical; NVM writes beat Optane alone but lose badly under load.
    #[test]
    fn figure2_ratios() {
        let m = |n: &str| find_builtin(n).unwrap().model().unwrap();
        let (optane, flash, nvm) = (m("optane-905p"), m("flash-970pro"), m("nvm"));
        let r = |a: &DeviceModel, b: &DeviceModel, dir, n| {
            closed_loop_throughput(a, dir, 4096, n) / closed_loop_throughput(b, dir, 4096, n)
        };
        assert!(r(&optane, &flash, Op::Read, 1) > 4.0);
        assert!(r(&optane, &flash, Op::Read, 32) < 1.6);
        let high = r(&optane, &flash, Op::Read, 64);
        assert!((1.0 / 1.25..1.25).contains(&high), "{high}");
        assert!(r(&nvm, &optane, Op::Write, 1) > 2.0);
        assert!(r(&nvm, &optane, Op::Write, 32) < 0.5);
    }

    #[test]
    fn fixed_rate_is_exact() {
        let m = DeviceModel::fixed_rate(100.0);
        assert!((closed_loop_throughput(&m, Op::Read, 4096, 1) - 100.0).abs() < 1e-6);
        assert!((closed_loop_throughput(&m, Op::Read, 4096, 32) - 100.0).abs() < 1e-6);
    }
}
