//! Named key-value workloads: YCSB's core workloads, CacheBench's
//! lookaside get/set mixes, Meta's production mixes (MOST Table 4), the
//! bursty cache workload (MOST Figure 10) and a hot-spot shift (Orthus
//! Figure 12b), each as the `[workload]`, `[kv]` and client settings of a
//! run. `tiermux kv bench` runs them; experiment files spell the same
//! settings out.

use crate::config::SimConfig;
use crate::kvconfig::KvSpec;
use crate::workload::{Pattern, Schedule};

/// A named workload: its name and what it models.
pub struct KvWorkload {
    /// The name `tiermux kv bench --workload` takes.
    pub name: &'static str,
    /// What it is and where it comes from.
    pub about: &'static str,
    apply: fn(&mut SimConfig, &mut KvSpec),
}

/// The knobs every named workload takes from the command line.
#[derive(Clone, Debug, PartialEq)]
pub struct KvKnobs {
    /// Keys in the workload.
    pub keys: u64,
    /// Zipfian skew for the workloads that use one.
    pub theta: f64,
    /// Value size, bytes, for the workloads that do not fix their own.
    pub value_bytes: u32,
}

impl Default for KvKnobs {
    fn default() -> Self {
        KvKnobs {
            keys: 20_000,
            theta: 0.8,
            value_bytes: 1024,
        }
    }
}

/// The skew the knobs set (a workload starts from a Zipfian pattern).
fn theta(c: &SimConfig) -> f64 {
    match c.workload.pattern {
        Pattern::Zipf { theta } => theta,
        _ => unreachable!("a named workload starts from the knobs' Zipfian pattern"),
    }
}

/// Zipfian keys spread over the key space, `updates` of the commands SETs.
fn ycsb(c: &mut SimConfig, updates: f64) {
    c.workload.scramble = true;
    c.workload.write_ratio = updates;
}

/// Every named workload.
pub const KV_WORKLOADS: &[KvWorkload] = &[
    KvWorkload {
        name: "ycsb-a",
        about: "YCSB A: 50 % reads, 50 % updates, Zipfian",
        apply: |c, _| ycsb(c, 0.5),
    },
    KvWorkload {
        name: "ycsb-b",
        about: "YCSB B: 95 % reads, 5 % updates, Zipfian",
        apply: |c, _| ycsb(c, 0.05),
    },
    KvWorkload {
        name: "ycsb-c",
        about: "YCSB C: reads only, Zipfian",
        apply: |c, _| ycsb(c, 0.0),
    },
    KvWorkload {
        name: "ycsb-d",
        about: "YCSB D: 95 % reads of the latest inserts, 5 % inserts",
        apply: |c, _| {
            c.workload.pattern = Pattern::Latest { theta: theta(c) };
            c.workload.write_ratio = 0.05;
        },
    },
    KvWorkload {
        name: "ycsb-f",
        about: "YCSB F: 50 % reads, 50 % read-modify-writes, Zipfian",
        apply: |c, kv| {
            ycsb(c, 0.5);
            kv.read_modify_write = true;
        },
    },
    KvWorkload {
        name: "cachebench-soc",
        about: "CacheBench lookaside, 1 KB values, 10 % sets (MOST Figure 8a's small-object mix)",
        apply: |c, kv| {
            ycsb(c, 0.1);
            kv.value_bytes_min = 1024;
            kv.value_bytes_max = 1024;
        },
    },
    KvWorkload {
        name: "cachebench-loc",
        about: "CacheBench lookaside, 16 KB values, 10 % sets (MOST Figure 8b's large-object mix)",
        apply: |c, kv| {
            ycsb(c, 0.1);
            kv.value_bytes_min = 16384;
            kv.value_bytes_max = 16384;
            kv.soc_share = 0.1;
        },
    },
    KvWorkload {
        name: "prod-a",
        about: "MOST Table 4 A, flat-kvcache: 98 % GET, 2 % GET of keys never set; keys 16-255 B; popularity and values (335 B on average) from CacheBench's config",
        apply: |c, kv| {
            production(c, kv, "flat-kvcache", (16, 255));
            kv.lone_get = 0.02;
        },
    },
    KvWorkload {
        name: "prod-b",
        about: "MOST Table 4 B, graph-leader: 82 % GET, 18 % lone GET; keys 8-16 B; popularity and values (860 B) from CacheBench's config",
        apply: |c, kv| {
            production(c, kv, "graph-leader", (8, 16));
            kv.lone_get = 0.18;
        },
    },
    KvWorkload {
        name: "prod-c",
        about: "MOST Table 4 C, kvcache-reg: 87 % GET, 12 % SET, 0.3 % lone SET; keys 8-16 B; popularity and values (33,112 B) from CacheBench's config",
        apply: |c, kv| {
            production(c, kv, "kvcache-reg", (8, 16));
            c.workload.write_ratio = 0.12 / 0.99;
            kv.lone_get = 0.00001;
            kv.lone_set = 0.003;
            kv.soc_share = 0.1;
        },
    },
    KvWorkload {
        name: "prod-d",
        about: "MOST Table 4 D, kvcache-wc: GET 0.6 and lone SET 0.21, scaled to 1; keys 8-16 B; popularity and values (92,422 B) from CacheBench's config",
        apply: |c, kv| {
            production(c, kv, "kvcache-wc", (8, 16));
            kv.lone_get = 0.00001;
            kv.lone_set = 0.26;
            kv.soc_share = 0.1;
        },
    },
    KvWorkload {
        name: "bursty",
        about: "MOST Figure 10: 95 % GET, 5 % SET, 20 % of keys take 90 % of commands, values 2-4 KB; a 60 s burst (4x clients) every 180 s",
        apply: |c, kv| {
            c.workload.pattern = Pattern::Hotset {
                hot_fraction: 0.2,
                hot_access_fraction: 0.9,
            };
            c.workload.scramble = true;
            c.workload.write_ratio = 0.05;
            kv.value_bytes_min = 2048;
            kv.value_bytes_max = 4096;
            let mut times_s = Vec::new();
            let mut factors = Vec::new();
            let mut t = 120.0;
            while t < c.duration_s {
                times_s.extend([t, t + 60.0]);
                factors.extend([4.0, 1.0]);
                t += 180.0;
            }
            c.client.schedule = Schedule::Steps { times_s, factors };
        },
    },
    KvWorkload {
        name: "ycsb-e",
        about: "YCSB E (store only): 95 % scans of 100 keys with their values from a Zipfian key, 5 % inserts of new keys",
        apply: |c, kv| {
            ycsb(c, 0.0);
            kv.lone_set = 0.05;
            kv.scan = 0.95;
            kv.scan_length = 100;
        },
    },
    KvWorkload {
        name: "zippydb",
        about: "Orthus Figure 12a's ZippyDB (store only): 85 % GET, 14 % SET, 1 % SCAN; six key ranges, one hot (80 % of commands); values of 16 KB on average; a diurnal load, a two-day trace sped up 1000x (a day is 86.4 s)",
        apply: |c, kv| {
            c.workload.pattern = Pattern::Hotset {
                hot_fraction: 1.0 / 6.0,
                hot_access_fraction: 0.8,
            };
            c.workload.scramble = false;
            c.workload.write_ratio = 0.14 / 0.99;
            kv.scan = 0.01;
            kv.scan_length = 20;
            kv.value_bytes_min = 1024;
            kv.value_bytes_max = 31 * 1024;
            c.client.schedule = Schedule::Diurnal {
                period_s: 86.4,
                min_factor: 0.25,
            };
        },
    },
    KvWorkload {
        name: "hotspot-shift",
        about: "Orthus Figure 12b: YCSB C whose hot keys move halfway through the run (a cache: to keys never set; a store: from the start of its keys to their end)",
        apply: |c, kv| {
            ycsb(c, 0.0);
            c.workload.shift_at_s = Some(c.duration_s / 2.0);
            if kv.is_store() {
                c.workload.scramble = false;
                c.workload.shift_reverses = true;
            }
        },
    },
];

/// One of MOST Table 4's production mixes: keys drawn by the popularity
/// and values by the sizes of its CacheBench config (`crate::cachebench`),
/// keys of `keys` bytes, GETs only (the caller adds the rest of the mix).
fn production(c: &mut SimConfig, kv: &mut KvSpec, mix: &str, keys: (u32, u32)) {
    ycsb(c, 0.0);
    c.workload.pattern = Pattern::Cachebench { mix: mix.into() };
    kv.value_sizes = Some(mix.into());
    kv.key_bytes_min = keys.0;
    kv.key_bytes_max = keys.1;
}

/// Sets `cfg` up for the named workload with `knobs`.
pub fn apply_kv_workload(name: &str, knobs: &KvKnobs, cfg: &mut SimConfig) -> Result<(), String> {
    let w = KV_WORKLOADS
        .iter()
        .find(|w| w.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = KV_WORKLOADS.iter().map(|w| w.name).collect();
            format!("unknown workload '{name}' (one of {})", names.join(", "))
        })?;
    let mut kv = cfg.kv.clone().unwrap_or_default();
    kv.value_bytes_min = knobs.value_bytes;
    kv.value_bytes_max = knobs.value_bytes;
    cfg.workload.working_set_blocks = Some(knobs.keys);
    cfg.workload.pattern = Pattern::Zipf { theta: knobs.theta };
    (w.apply)(cfg, &mut kv);
    cfg.kv = Some(kv);
    Ok(())
}
