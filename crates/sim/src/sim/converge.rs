//! Convergence time after a load step, from a run's time series.
//!
//! Definition: after a step at `t_step_s`, the phase lasts until the next
//! step or the end of the run. Its settled throughput is the mean over the
//! phase's last quarter of samples. The run has converged from the start
//! of the first sample after which every sample of the phase is within
//! `tolerance` (relative) of the settled throughput; the convergence time
//! is that moment minus `t_step_s` (0 when the first sample already is).
//! A phase with fewer than 4 samples, or whose last sample is outside the
//! band, has no convergence time.

use super::results::Sample;

/// Relative band of the settled throughput that counts as converged.
pub const DEFAULT_TOLERANCE: f64 = 0.05;

/// Seconds from `t_step_s` until the throughput stays within `tolerance`
/// of its settled value before `t_end_s`; `None` when the phase is too
/// short to tell. `interval_s` is the samples' length.
pub fn convergence_s(
    samples: &[Sample],
    interval_s: f64,
    t_step_s: f64,
    t_end_s: f64,
    tolerance: f64,
) -> Option<f64> {
    let phase: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.t_s - interval_s >= t_step_s - 1e-9 && s.t_s <= t_end_s + 1e-9)
        .collect();
    if phase.len() < 4 {
        return None;
    }
    let tail = &phase[phase.len() * 3 / 4..];
    let settled = tail.iter().map(|s| s.throughput_ops_per_s).sum::<f64>() / tail.len() as f64;
    let within = |s: &&Sample| (s.throughput_ops_per_s - settled).abs() <= tolerance * settled;
    let first_settled = phase.iter().rposition(|s| !within(s)).map_or(0, |i| i + 1);
    // The last sample itself outside the band: the phase never settled.
    let start = phase.get(first_settled)?.t_s - interval_s;
    Some((start - t_step_s).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(xs: &[f64]) -> Vec<Sample> {
        xs.iter()
            .enumerate()
            .map(|(i, &x)| Sample {
                t_s: (i + 1) as f64,
                throughput_ops_per_s: x,
                mean_latency_us: 0.0,
                hit_ratio: f64::NAN,
                device_bytes_per_s: Vec::new(),
                load: 0.0,
                controller: Vec::new(),
            })
            .collect()
    }

    #[test]
    fn the_time_from_the_step_until_the_band_holds() {
        // A step at 2 s; the phase climbs 50, 80, 97, then holds near 100.
        let s = series(&[10.0, 10.0, 50.0, 80.0, 97.0, 100.0, 101.0, 99.0, 100.0]);
        // Samples end at 3..9 s in the phase; the last one outside 5 % of
        // the settled 100 ends at 4 s, so the band holds from 4 s: 2 s.
        assert_eq!(convergence_s(&s, 1.0, 2.0, 9.0, 0.05), Some(2.0));
        assert_eq!(convergence_s(&s, 1.0, 5.0, 9.0, 0.05), Some(0.0));
        assert_eq!(convergence_s(&s, 1.0, 7.0, 9.0, 0.05), None);
    }

    /// A phase that ends outside its own settled band (here the last
    /// quarter averages 95, and the last sample is 70) never converged.
    #[test]
    fn a_phase_that_ends_outside_the_band_has_no_convergence_time() {
        let s = series(&[10.0, 100.0, 100.0, 100.0, 100.0, 100.0, 120.0, 70.0]);
        assert_eq!(convergence_s(&s, 1.0, 1.0, 8.0, 0.05), None);
    }
}
