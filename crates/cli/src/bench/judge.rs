//! Verdicts against the bench file's acceptance bars.

use super::config::BenchConfig;
use super::report::Report;

/// Judges the acceptance bars; returns the verdict lines and whether all
/// passed.
pub(super) fn judge(cfg: &BenchConfig, report: &Report) -> (Vec<String>, bool) {
    let a = &cfg.acceptance;
    let limit = report.limits.get(&a.workload).copied().unwrap_or(f64::NAN);
    let find = |label: &str, level: u32| {
        report
            .rows
            .iter()
            .find(|r| {
                r.section == "policy"
                    && r.workload == a.workload
                    && r.config == label
                    && r.inflight == level
            })
            .map(|r| r.ops_per_s)
    };
    let mut lines = Vec::new();
    let mut passed = true;
    let mut judged = 0;
    for &level in cfg.levels.iter().filter(|&&l| l >= a.high_load_inflight) {
        let (Some(b), Some(c)) = (find(&a.baseline, level), find(&a.candidate, level)) else {
            continue;
        };
        judged += 1;
        let speedup = c / b;
        let frac = c / limit;
        let ok1 = speedup >= a.min_speedup;
        let ok2 = frac >= a.min_limit_fraction;
        passed &= ok1 && ok2;
        lines.push(format!(
            "{} in flight, {}: {} / {} = {:.2}x (bar {:.2}x) {}; {} / limit = {:.2} (bar {:.2}) {}",
            level,
            a.workload,
            a.candidate,
            a.baseline,
            speedup,
            a.min_speedup,
            if ok1 { "met" } else { "NOT met" },
            a.candidate,
            frac,
            a.min_limit_fraction,
            if ok2 { "met" } else { "NOT met" }
        ));
    }
    if judged == 0 {
        lines.push(format!(
            "no level at or above {} in flight was run: high-load bars not judged",
            a.high_load_inflight
        ));
        passed = false;
    }
    let (line, ok) = judge_low_load(
        cfg,
        find(&a.baseline, a.low_load_inflight),
        find(&a.candidate, a.low_load_inflight),
    );
    lines.push(line);
    passed &= ok;
    (lines, passed)
}

/// The low-load bar: the candidate's ops/s within the tolerance of the
/// baseline's; the verdict line and whether it is met.
fn judge_low_load(
    cfg: &BenchConfig,
    baseline: Option<f64>,
    candidate: Option<f64>,
) -> (String, bool) {
    let a = &cfg.acceptance;
    match (baseline, candidate) {
        (Some(b), Some(c)) => {
            let diff = (c - b) / b;
            let ok = diff.abs() <= a.low_load_tolerance;
            let line = format!(
                "{} in flight, {}: {} differs from {} by {:+.1} % (bar ±{:.0} %) {}",
                a.low_load_inflight,
                a.workload,
                a.candidate,
                a.baseline,
                diff * 100.0,
                a.low_load_tolerance * 100.0,
                if ok { "met" } else { "NOT met" }
            );
            (line, ok)
        }
        _ => {
            let line = format!(
                "{} in flight was not run: the low-load bar is not judged",
                a.low_load_inflight
            );
            (line, false)
        }
    }
}
