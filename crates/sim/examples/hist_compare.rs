//! Compares the core's latency histogram with the `hdrhistogram` crate on
//! what the simulator and the engine ask of it: recording a value per
//! request, quantiles (p50 to p99.99) and the interval merge and reset.
//!
//! ```sh
//! cargo run --release -p tiermux-sim --example hist_compare
//! ```
//!
//! Values: 2 million latencies in ns from a mixture shaped like a storage
//! device's (most near 80 µs, a 1 % slow mode near 400 µs, a 0.01 % tail up
//! to 10 ms), from a fixed seed. Quantile errors are relative to the exact
//! order statistic; times are the best of five runs, ns per value.

use std::time::Instant;

use hdrhistogram::Histogram as Hdr;
use tiermux_core::rng::Rng;
use tiermux_core::Histogram;

const N: usize = 2_000_000;
const QUANTILES: [f64; 5] = [0.5, 0.9, 0.99, 0.999, 0.9999];

fn values() -> Vec<u64> {
    let mut rng = Rng::new(42);
    (0..N)
        .map(|_| {
            let u = rng.next_f64();
            let base = if u < 0.0001 {
                1_000_000.0 + rng.next_f64() * 9_000_000.0
            } else if u < 0.0101 {
                300_000.0 + rng.next_f64() * 200_000.0
            } else {
                60_000.0 + rng.next_f64() * 40_000.0
            };
            base as u64
        })
        .collect()
}

/// Best of five: ns per value of `f` over the values.
fn time_per_value(f: &mut dyn FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_nanos() as f64 / N as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let v = values();
    let mut sorted = v.clone();
    sorted.sort_unstable();
    let exact = |q: f64| sorted[((q * N as f64).ceil() as usize).clamp(1, N) - 1] as f64;

    let mut ours = Histogram::new();
    let record_ours = time_per_value(&mut || {
        ours.clear();
        for &x in &v {
            ours.record(std::hint::black_box(x));
        }
    });
    println!(
        "| histogram | record ns/value | memory KiB | merge µs | {} |",
        QUANTILES
            .map(|q| format!("p{} error %", q * 100.0))
            .join(" | ")
    );
    println!("|---|---|---|---|{}", "---|".repeat(QUANTILES.len()));
    let merge_ours = {
        let mut acc = Histogram::new();
        let t = Instant::now();
        for _ in 0..100 {
            acc.merge(&ours);
        }
        t.elapsed().as_nanos() as f64 / 100.0 / 1e3
    };
    let errs: Vec<String> = QUANTILES
        .iter()
        .map(|&q| format!("{:.3}", (ours.quantile(q) as f64 / exact(q) - 1.0) * 100.0))
        .collect();
    let ours_kib = (64 - 7 + 1) * 128 * 8 / 1024;
    println!(
        "| tiermux (7 sub-bucket bits) | {record_ours:.2} | {ours_kib} | {merge_ours:.1} | {} |",
        errs.join(" | ")
    );

    for sigfig in [2u8, 3] {
        let mut h = Hdr::<u64>::new_with_bounds(1, 3_600_000_000_000, sigfig).expect("bounds");
        let record = time_per_value(&mut || {
            h.reset();
            for &x in &v {
                h.record(std::hint::black_box(x)).expect("in range");
            }
        });
        let merge = {
            let mut acc = Hdr::<u64>::new_from(&h);
            let t = Instant::now();
            for _ in 0..100 {
                acc.add(&h).expect("same bounds");
            }
            t.elapsed().as_nanos() as f64 / 100.0 / 1e3
        };
        let errs: Vec<String> = QUANTILES
            .iter()
            .map(|&q| {
                format!(
                    "{:.3}",
                    (h.value_at_quantile(q) as f64 / exact(q) - 1.0) * 100.0
                )
            })
            .collect();
        let kib = h.distinct_values() * 8 / 1024;
        println!("| hdrhistogram ({sigfig} significant digits) | {record:.2} | {kib} | {merge:.1} | {} |", errs.join(" | "));
    }
}
