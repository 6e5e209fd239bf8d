//! `tiermux trace info` reads a trace's arrivals back as the generator's
//! burst settings, and those settings, given to `trace generate`, make a
//! trace whose arrivals look the same.

use crate::common::cli;
use cli::{ok, Scratch};

/// The `--set` arguments of the "as bursts" line, and the mean gap and
/// its coefficient of variation from the "arrivals" line.
fn arrivals(info: &str) -> (Vec<String>, f64, f64) {
    let line = |start: &str| {
        info.lines()
            .find(|l| l.trim_start().starts_with(start))
            .unwrap_or_else(|| panic!("no '{start}' line in:\n{info}"))
            .to_string()
    };
    let sets = line("as bursts")
        .split_whitespace()
        .filter(|w| w.contains('='))
        .map(str::to_string)
        .collect();
    let a = line("arrivals");
    let number_after = |word: &str| -> f64 {
        let rest = &a[a.find(word).unwrap() + word.len()..];
        let n: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        n.parse().unwrap()
    };
    (sets, number_after("mean gap"), number_after("CV"))
}

/// Generates a ts_0 trace of 100,000 requests with `sets` (KEY=VALUE)
/// into `dir/name` and returns what `trace info` says of it.
fn generate_and_read(dir: &Scratch, name: &str, sets: &[&str]) -> String {
    let path = dir.path().join(name);
    let path = path.to_str().unwrap();
    let mut args = vec!["trace", "generate", path, "--preset", "ts_0"];
    for s in ["requests=100000"].iter().chain(sets) {
        args.extend(["--set", s]);
    }
    ok(&args);
    ok(&["trace", "info", path])
}

#[test]
fn bursts_read_back_regenerate_alike() {
    let dir = Scratch::new("trace-info");
    let bursts = [
        "mean_interarrival_us=300",
        "burst_mean_requests=50",
        "burst_idle_us=35000",
    ];
    let (sets, gap_us, cv) = arrivals(&generate_and_read(&dir, "first.msr", &bursts));
    // 300 + 35,000 / 50 us on average, far burstier than Poisson.
    assert!((gap_us / 1000.0 - 1.0).abs() < 0.05, "mean gap {gap_us} us");
    assert!(cv > 4.0, "CV {cv}");
    assert_eq!(sets.len(), 3, "{sets:?}");

    let mut again: Vec<&str> = vec!["seed=2"];
    again.extend(sets.iter().map(String::as_str));
    let (_, gap2_us, cv2) = arrivals(&generate_and_read(&dir, "again.msr", &again));
    assert!(
        (gap2_us / gap_us - 1.0).abs() < 0.1,
        "{gap2_us} vs {gap_us} us"
    );
    assert!((cv2 / cv - 1.0).abs() < 0.1, "CV {cv2} vs {cv}");

    // Poisson arrivals: a CV near 1 and no bursts to fit.
    let info = generate_and_read(&dir, "poisson.msr", &[]);
    assert!(!info.contains("as bursts"), "{info}");
    assert!(
        info.contains("CV 1.0") || info.contains("CV 0.99"),
        "{info}"
    );
}
