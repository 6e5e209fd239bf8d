//! Runs of consecutive dirty pages, for Hibachi's Right Transformation:
//! each maximal run of consecutive page numbers, found by its start and
//! its end (the paper's two hash maps) and ordered by length (its
//! priority queue), so that the longest is found in O(log n).

use std::collections::{BTreeMap, BTreeSet};

/// The runs of a set of pages.
#[derive(Clone, Debug, Default)]
pub struct Runs {
    /// Run start -> length.
    by_start: BTreeMap<u64, u64>,
    /// (length, start), longest last.
    by_length: BTreeSet<(u64, u64)>,
}

impl Runs {
    /// The run holding `page`, as (start, length).
    pub fn run_of(&self, page: u64) -> Option<(u64, u64)> {
        let (&start, &len) = self.by_start.range(..=page).next_back()?;
        (page < start + len).then_some((start, len))
    }

    /// Adds `page` (not yet in a run), merging with its neighbours.
    pub fn insert(&mut self, page: u64) {
        assert!(
            self.run_of(page).is_none(),
            "page {page} is already in a run"
        );
        let mut start = page;
        let mut len = 1;
        if let Some((s, l)) = page.checked_sub(1).and_then(|p| self.run_of(p)) {
            self.remove_run(s, l);
            start = s;
            len += l;
        }
        if let Some(l) = page
            .checked_add(1)
            .and_then(|p| self.by_start.get(&p).copied())
        {
            self.remove_run(page + 1, l);
            len += l;
        }
        self.add_run(start, len);
    }

    /// Removes `page` from its run, splitting it; false when it is in none.
    pub fn remove(&mut self, page: u64) -> bool {
        let Some((start, len)) = self.run_of(page) else {
            return false;
        };
        self.remove_run(start, len);
        if page > start {
            self.add_run(start, page - start);
        }
        let end = start + len;
        if page + 1 < end {
            self.add_run(page + 1, end - page - 1);
        }
        true
    }

    /// The longest run, as (start, length); the lowest start among equals.
    pub fn longest(&self) -> Option<(u64, u64)> {
        let &(len, _) = self.by_length.last()?;
        let &(_, start) = self.by_length.range((len, 0)..).next()?;
        Some((start, len))
    }

    /// Pages in all runs.
    pub fn pages(&self) -> u64 {
        self.by_start.values().sum()
    }

    fn add_run(&mut self, start: u64, len: u64) {
        self.by_start.insert(start, len);
        self.by_length.insert((len, start));
    }

    fn remove_run(&mut self, start: u64, len: u64) {
        assert_eq!(self.by_start.remove(&start), Some(len), "run at {start}");
        assert!(self.by_length.remove(&(len, start)), "run at {start}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's example: 3-6 and a new page 7 make 3-7.
    #[test]
    fn pages_merge_and_split_into_runs() {
        let mut r = Runs::default();
        for p in [3, 4, 5, 6] {
            r.insert(p);
        }
        assert_eq!(r.longest(), Some((3, 4)));
        r.insert(7);
        assert_eq!(r.longest(), Some((3, 5)));
        r.insert(10);
        r.insert(9);
        assert_eq!(r.run_of(10), Some((9, 2)));
        r.insert(8);
        assert_eq!(r.longest(), Some((3, 8)));
        assert!(r.remove(5));
        assert_eq!(r.run_of(4), Some((3, 2)));
        assert_eq!(r.longest(), Some((6, 5)));
        assert!(!r.remove(5));
        assert_eq!(r.pages(), 7);
        r.insert(0);
        assert_eq!(r.run_of(0), Some((0, 1)));
    }

    /// Against a plain set over random inserts and removals.
    #[test]
    fn runs_agree_with_a_set() {
        let mut rng = crate::rng::Rng::new(5);
        let mut r = Runs::default();
        let mut set = BTreeSet::new();
        for _ in 0..20_000 {
            let p = rng.below(300);
            if set.contains(&p) {
                assert!(r.remove(p));
                set.remove(&p);
            } else {
                r.insert(p);
                set.insert(p);
            }
            let mut best = (0, 0);
            let mut run: Option<(u64, u64)> = None;
            for &q in &set {
                run = match run {
                    Some((s, l)) if s + l == q => Some((s, l + 1)),
                    _ => Some((q, 1)),
                };
                let (s, l) = run.unwrap();
                if l > best.1 {
                    best = (s, l);
                }
            }
            assert_eq!(r.longest().unwrap_or((0, 0)), best);
            assert_eq!(r.pages(), set.len() as u64);
        }
    }
}
