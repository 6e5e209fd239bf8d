//! Write spikes: groups of items written together every so often, in a
//! workload that otherwise reads (MOST Figure 7d: "occasional write
//! spikes every 0.1, 1, 30 seconds", as when a model's parameters are
//! refreshed in a cache that serves them).
//!
//! The groups take consecutive ranks from rank 0, in the order listed, so
//! that with a hotset pattern they are hot data, read as often as any
//! other hot item between spikes. From `period_s` on, every `period_s`
//! a group's spike starts: its items are written once each, in rank
//! order, ahead of every other request, so that the clients write the
//! whole group back to back.

use serde::{Deserialize, Serialize};

/// One group of items written every `period_s`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteSpike {
    /// Time between the group's spikes, s.
    pub period_s: f64,
    /// Items in the group, each written once a spike.
    pub items: u64,
}

/// A check of `spikes` against a working set of `working_set` items: the
/// offending field and what is wrong.
pub fn check(spikes: &[WriteSpike], working_set: Option<u64>) -> Result<(), (String, String)> {
    for (i, s) in spikes.iter().enumerate() {
        let field = |name: &str| format!("workload.write_spikes[{i}].{name}");
        if !(s.period_s.is_finite() && s.period_s > 0.0) {
            return Err((
                field("period_s"),
                format!("must be positive, got {}", s.period_s),
            ));
        }
        if s.items == 0 {
            return Err((field("items"), "must be at least 1".into()));
        }
    }
    let total: u64 = spikes.iter().map(|s| s.items).sum();
    match working_set {
        Some(w) if total > w => Err((
            "workload.write_spikes".into(),
            format!("the groups hold {total} items, more than the working set's {w}"),
        )),
        _ => Ok(()),
    }
}

/// The spikes' state while a workload runs.
#[derive(Clone, Debug)]
pub struct SpikeWriter {
    groups: Vec<Group>,
}

#[derive(Clone, Debug)]
struct Group {
    period_ns: u64,
    first_rank: u64,
    items: u64,
    next_ns: u64,
    /// The next item of a spike under way.
    cursor: Option<u64>,
}

impl SpikeWriter {
    /// The spikes of `spikes`, each group's ranks cut to `working_set`.
    pub fn new(spikes: &[WriteSpike], working_set: u64) -> SpikeWriter {
        let mut first_rank = 0;
        let groups = spikes
            .iter()
            .map(|s| {
                let period_ns = ((s.period_s * 1e9) as u64).max(1);
                let g = Group {
                    period_ns,
                    first_rank,
                    items: s.items.min(working_set.saturating_sub(first_rank)),
                    next_ns: period_ns,
                    cursor: None,
                };
                first_rank += g.items;
                g
            })
            .collect();
        SpikeWriter { groups }
    }

    /// Whether there are no groups.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The rank the next request writes at time `now_ns` when a spike is
    /// under way or due, taking `step` items (the request's blocks);
    /// `None` when no spike is.
    pub fn next_rank(&mut self, now_ns: u64, step: u64) -> Option<u64> {
        assert!(step >= 1, "a request covers at least one item");
        for g in &mut self.groups {
            if g.items == 0 {
                continue;
            }
            if g.cursor.is_none() && now_ns >= g.next_ns {
                // Spikes missed while the clients were busy are not made
                // up: the next one is a period after the last due.
                let behind = (now_ns - g.next_ns) / g.period_ns + 1;
                g.next_ns += behind * g.period_ns;
                g.cursor = Some(0);
            }
            if let Some(c) = g.cursor {
                let next = c + step;
                g.cursor = (next < g.items).then_some(next);
                return Some(g.first_rank + c);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spike(period_s: f64, items: u64) -> WriteSpike {
        WriteSpike { period_s, items }
    }

    #[test]
    fn each_group_writes_its_items_once_a_period_ahead_of_other_requests() {
        let mut w = SpikeWriter::new(&[spike(1.0, 3), spike(2.0, 2)], 100);
        assert_eq!(w.next_rank(999_999_999, 1), None, "nothing before 1 s");
        let at = |w: &mut SpikeWriter, t_s: f64| w.next_rank((t_s * 1e9) as u64, 1);
        // At 1 s the first group (ranks 0-2) writes, back to back.
        assert_eq!(at(&mut w, 1.0), Some(0));
        assert_eq!(at(&mut w, 1.0), Some(1));
        assert_eq!(at(&mut w, 1.1), Some(2));
        assert_eq!(at(&mut w, 1.2), None);
        // At 2 s both are due: the first group, then the second (3-4).
        let got: Vec<_> = (0..6).map(|_| at(&mut w, 2.0)).collect();
        assert_eq!(got, [Some(0), Some(1), Some(2), Some(3), Some(4), None]);
        // Requests of two items step by two.
        let mut w = SpikeWriter::new(&[spike(1.0, 5)], 100);
        let got: Vec<_> = (0..4).map(|_| w.next_rank(1_000_000_000, 2)).collect();
        assert_eq!(got, [Some(0), Some(2), Some(4), None]);
    }

    #[test]
    fn missed_spikes_are_not_made_up() {
        let mut w = SpikeWriter::new(&[spike(0.1, 1)], 10);
        assert_eq!(w.next_rank(1_050_000_000, 1), Some(0));
        assert_eq!(w.next_rank(1_050_000_000, 1), None, "one spike, not ten");
        assert_eq!(w.next_rank(1_100_000_000, 1), Some(0));
    }

    #[test]
    fn groups_are_checked_and_cut_to_the_working_set() {
        assert!(check(&[spike(1.0, 4), spike(30.0, 6)], Some(10)).is_ok());
        let (field, _) = check(&[spike(0.0, 4)], Some(10)).unwrap_err();
        assert_eq!(field, "workload.write_spikes[0].period_s");
        let (field, _) = check(&[spike(1.0, 4), spike(1.0, 0)], None).unwrap_err();
        assert_eq!(field, "workload.write_spikes[1].items");
        let (field, msg) = check(&[spike(1.0, 8), spike(1.0, 8)], Some(10)).unwrap_err();
        assert_eq!(field, "workload.write_spikes");
        assert!(msg.contains("16 items"), "{msg}");
        let mut w = SpikeWriter::new(&[spike(1.0, 8), spike(1.0, 8)], 10);
        let got: Vec<_> = (0..11).map(|_| w.next_rank(1_000_000_000, 1)).collect();
        assert_eq!(got.iter().flatten().count(), 10, "{got:?}");
    }
}
