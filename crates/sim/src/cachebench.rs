//! CacheBench's production distributions: the key popularity and value
//! sizes of the four `ssd_perf` configs that MOST Table 4 names (A
//! flat-kvcache, B graph-leader, C kvcache-reg, D kvcache-wc), as tables
//! derived from CacheLib's files by `scripts/cachebench-tables.py`
//! (`crates/sim/data/cachebench/`, each file naming its source and commit).
//!
//! A popularity table is CacheBench's: classes of keys, each with a number
//! of objects and their accesses, so that every key of a class is equally
//! likely. [`KeyClasses`] lays a table over a run's keys, hottest class
//! first, scaled to the number of keys as CacheBench scales a table to its
//! `numKeys`. A value-size table is a discrete distribution of sizes.

use std::sync::OnceLock;

use tiermux_core::rng::Rng;

/// The mixes with tables, in MOST Table 4's order.
pub const MIXES: [&str; 4] = ["flat-kvcache", "graph-leader", "kvcache-reg", "kvcache-wc"];

/// The CSV text of each mix's tables: popularity, then value sizes.
const DATA: [(&str, &str); 4] = [
    (
        include_str!("../data/cachebench/flat-kvcache-popularity.csv"),
        include_str!("../data/cachebench/flat-kvcache-values.csv"),
    ),
    (
        include_str!("../data/cachebench/graph-leader-popularity.csv"),
        include_str!("../data/cachebench/graph-leader-values.csv"),
    ),
    (
        include_str!("../data/cachebench/kvcache-reg-popularity.csv"),
        include_str!("../data/cachebench/kvcache-reg-values.csv"),
    ),
    (
        include_str!("../data/cachebench/kvcache-wc-popularity.csv"),
        include_str!("../data/cachebench/kvcache-wc-values.csv"),
    ),
];

/// A mix's key popularity: `(objects, weight)` per class, the class with the
/// most accesses per object first. Objects and weights are relative.
#[derive(Debug, PartialEq)]
pub struct Popularity {
    /// The classes, hottest first.
    pub classes: Vec<(f64, f64)>,
}

/// A mix's value sizes: each size with its probability.
#[derive(Debug, PartialEq)]
pub struct ValueSizes {
    sizes: Vec<u32>,
    /// Cumulative probability up to and including each size; the last is 1.
    cumulative: Vec<f64>,
    mean_bytes: f64,
}

impl ValueSizes {
    /// The size for a uniformly distributed 64-bit `hash`.
    pub fn size_for(&self, hash: u64) -> u32 {
        let u = (hash >> 11) as f64 / (1u64 << 53) as f64;
        let i = self.cumulative.partition_point(|&c| c <= u);
        self.sizes[i.min(self.sizes.len() - 1)]
    }

    /// The mean size, bytes.
    pub fn mean_bytes(&self) -> f64 {
        self.mean_bytes
    }

    /// The smallest size, bytes.
    pub fn min_bytes(&self) -> u32 {
        *self.sizes.iter().min().expect("a size")
    }

    /// The largest size, bytes.
    pub fn max_bytes(&self) -> u32 {
        *self.sizes.iter().max().expect("a size")
    }
}

/// The `(a, b)` rows of one of our CSV tables (comment lines start with
/// `#`, then a header).
fn rows(csv: &str) -> Vec<(f64, f64)> {
    let mut lines = csv.lines().filter(|l| !l.starts_with('#'));
    let header = lines.next().expect("a header");
    assert!(header.contains(','), "header {header:?}");
    lines
        .map(|l| {
            let (a, b) = l.split_once(',').expect("two columns");
            let a: f64 = a.parse().expect("a number");
            let b: f64 = b.parse().expect("a number");
            assert!(a > 0.0 && b >= 0.0, "row {l:?}");
            (a, b)
        })
        .collect()
}

fn parse(popularity_csv: &str, values_csv: &str) -> (Popularity, ValueSizes) {
    let classes = rows(popularity_csv);
    assert!(!classes.is_empty());
    let pairs = rows(values_csv);
    let total: f64 = pairs.iter().map(|p| p.1).sum();
    assert!(total > 0.0);
    let mut seen = 0.0;
    let mut cumulative: Vec<f64> = pairs
        .iter()
        .map(|p| {
            seen += p.1;
            seen / total
        })
        .collect();
    *cumulative.last_mut().expect("a size") = 1.0;
    let mean_bytes = pairs.iter().map(|p| p.0 * p.1).sum::<f64>() / total;
    let sizes = pairs.iter().map(|p| p.0 as u32).collect();
    (
        Popularity { classes },
        ValueSizes {
            sizes,
            cumulative,
            mean_bytes,
        },
    )
}

fn tables() -> &'static [(Popularity, ValueSizes)] {
    static TABLES: OnceLock<Vec<(Popularity, ValueSizes)>> = OnceLock::new();
    TABLES.get_or_init(|| DATA.iter().map(|(p, v)| parse(p, v)).collect())
}

/// The problem with a mix name that is not one of [`MIXES`], for an error.
pub fn unknown_mix(mix: &str) -> String {
    format!(
        "unknown CacheBench mix '{mix}' (one of {})",
        MIXES.join(", ")
    )
}

fn index(mix: &str) -> Option<usize> {
    MIXES.iter().position(|&m| m == mix)
}

/// The key popularity of `mix`, if it is one of [`MIXES`].
pub fn popularity(mix: &str) -> Option<&'static Popularity> {
    index(mix).map(|i| &tables()[i].0)
}

/// The value sizes of `mix`, if it is one of [`MIXES`].
pub fn value_sizes(mix: &str) -> Option<&'static ValueSizes> {
    index(mix).map(|i| &tables()[i].1)
}

/// A popularity table laid over keys `0..keys`: each class a range of keys
/// in proportion to its objects, hottest first, drawn by its weight and
/// uniformly within. A class too small for one key of its own adds its
/// weight to the next class that has one (or, at the end, to the last), as
/// when a key stands for many objects.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyClasses {
    /// The first key of each class, and `keys` last.
    starts: Vec<u64>,
    /// Cumulative probability up to and including each class; the last is 1.
    cumulative: Vec<f64>,
}

impl KeyClasses {
    /// `table` over `keys` keys (at least one).
    pub fn new(table: &Popularity, keys: u64) -> KeyClasses {
        assert!(keys >= 1);
        let objects: f64 = table.classes.iter().map(|c| c.0).sum();
        let weight: f64 = table.classes.iter().map(|c| c.1).sum();
        assert!(objects > 0.0 && weight > 0.0);
        let mut starts = vec![0u64];
        let mut weights: Vec<f64> = Vec::new();
        let (mut seen, mut pending) = (0.0, 0.0);
        for (i, &(n, w)) in table.classes.iter().enumerate() {
            seen += n;
            let end = if i + 1 == table.classes.len() {
                keys
            } else {
                ((seen / objects * keys as f64).round() as u64).min(keys)
            };
            pending += w;
            if end > *starts.last().expect("a start") {
                starts.push(end);
                weights.push(pending);
                pending = 0.0;
            }
        }
        *weights.last_mut().expect("the last class has keys") += pending;
        assert_eq!(*starts.last().expect("an end"), keys);
        assert_eq!(starts.len(), weights.len() + 1);
        let mut acc = 0.0;
        let mut cumulative: Vec<f64> = weights
            .iter()
            .map(|w| {
                acc += w;
                acc / weight
            })
            .collect();
        *cumulative.last_mut().expect("a class") = 1.0;
        KeyClasses { starts, cumulative }
    }

    /// A key, drawn by popularity.
    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let u = rng.next_f64();
        let c = self
            .cumulative
            .partition_point(|&p| p <= u)
            .min(self.cumulative.len() - 1);
        let (start, end) = (self.starts[c], self.starts[c + 1]);
        start + rng.below(end - start)
    }

    /// The probability of drawing `key`.
    pub fn probability(&self, key: u64) -> f64 {
        let c = self.starts.partition_point(|&s| s <= key) - 1;
        let before = if c == 0 { 0.0 } else { self.cumulative[c - 1] };
        (self.cumulative[c] - before) / (self.starts[c + 1] - self.starts[c]) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value tables keep MOST Table 4's mean value sizes (the table
    /// gives 335, 860, 33,112 and 92,422 bytes; graph-leader's two pools,
    /// joined by their key shares, give 858).
    #[test]
    fn value_tables_keep_table_4s_means() {
        for (mix, mean) in MIXES.iter().zip([335.0, 860.0, 33_112.0, 92_422.0]) {
            let v = value_sizes(mix).unwrap();
            assert!(
                (v.mean_bytes() / mean - 1.0).abs() < 0.005,
                "{mix}: {}",
                v.mean_bytes()
            );
        }
        let c = value_sizes("kvcache-reg").unwrap();
        assert_eq!((c.min_bytes(), c.max_bytes()), (2175, 523_458));
    }

    /// Drawn sizes follow the table: the mean of many draws is the table's.
    #[test]
    fn drawn_sizes_have_the_tables_mean() {
        let v = value_sizes("kvcache-wc").unwrap();
        let n = 200_000u64;
        let sum: f64 = (0..n)
            .map(|i| v.size_for(tiermux_core::rng::splitmix64(i)) as f64)
            .sum();
        let mean = sum / n as f64;
        assert!((mean / v.mean_bytes() - 1.0).abs() < 0.02, "{mean}");
    }

    /// kvcache-reg's source: 1 % of the objects take 80.4 % of the
    /// accesses and 10 % take 94.5 % (computed from CacheLib's pop.json).
    /// Laid over 60,000 keys, the hottest 600 keys carry that share.
    #[test]
    fn key_classes_keep_the_skew_of_the_source() {
        let t = popularity("kvcache-reg").unwrap();
        let k = KeyClasses::new(t, 60_000);
        let share = |n: u64| (0..n).map(|key| k.probability(key)).sum::<f64>();
        assert!((share(600) - 0.804).abs() < 0.01, "{}", share(600));
        assert!((share(6_000) - 0.945).abs() < 0.01, "{}", share(6_000));
        assert!((share(60_000) - 1.0).abs() < 1e-9);
        let mut rng = Rng::new(7);
        let hot = (0..100_000).filter(|_| k.sample(&mut rng) < 600).count();
        assert!((hot as f64 / 1e5 - share(600)).abs() < 0.01, "{hot}");
    }

    /// Classes too small for a key of their own give their weight to the
    /// next class: over one key, every access goes to it.
    #[test]
    fn tiny_classes_merge_into_the_next() {
        let t = Popularity {
            classes: vec![(1.0, 50.0), (1.0, 30.0), (98.0, 20.0)],
        };
        // 100 objects over 10 keys: the first two classes round to no key,
        // so the third takes all ten with every class's weight.
        let k = KeyClasses::new(&t, 10);
        assert_eq!(k.starts, vec![0, 10]);
        assert!((k.probability(3) - 0.1).abs() < 1e-12);
        let k = KeyClasses::new(&t, 100);
        assert_eq!(k.starts, vec![0, 1, 2, 100]);
        assert!((k.probability(0) - 0.5).abs() < 1e-12);
        assert!((k.probability(50) - 0.2 / 98.0).abs() < 1e-12);
        let mut rng = Rng::new(1);
        assert!((0..1000).all(|_| k.sample(&mut rng) < 100));
        assert_eq!(KeyClasses::new(&t, 1).starts, vec![0, 1]);
    }
}
