//! TICA in zero-time replay: outcomes with an independent source, and the
//! behaviours the TICA paper describes (EF spares the SSDs the writes WED
//! spends on hits).

use crate::common;
use crate::common::two_ssds;

use common::skewed;
use tiermux_core::replacement::ReplacementKind;
use tiermux_core::rng::Rng;
use tiermux_core::{Op, Purpose};
use tiermux_trace::replay::{hit_ratio, ReplayStats};
use two_ssds::run;

fn ssd_writes(s: &ReplayStats) -> u64 {
    s.blocks_written(1) + s.blocks_written(2)
}

/// With reads only, TICA-EF is LRU over the DRAM's read partition (50
/// pages less the 5-page write partition), hit for hit, and never writes
/// an SSD.
#[test]
fn ef_reads_alone_are_lru_over_the_read_partition() {
    let a = skewed(60_000, 3_000, 0, 1);
    let s = run("tica-ef", &a, 500);
    let lru = hit_ratio(a.iter().map(|x| x.0), ReplacementKind::Lru, 45);
    assert_eq!(s.read_hit_ratio(), lru);
    assert_eq!(ssd_writes(&s), 0);
    assert_eq!(s.storage_runs(), 0, "reads write nothing home");
}

/// Reads over 400 pages (eight times the DRAM, within an SSD), writes
/// spread over 2,000 others.
fn reads_beyond_dram(n: usize, seed: u64) -> Vec<(u64, Op)> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            if rng.below(100) < 30 {
                (1_000 + rng.below(2_000), Op::Write)
            } else {
                (rng.below(400).min(rng.below(400)), Op::Read)
            }
        })
        .collect()
}

/// EF writes the SSDs only for client writes (the WO copy and the mover's
/// RO copy: at most two per write); WED also copies DRAM victims to WO,
/// writing more and, when the read working set outgrows the DRAM, hitting
/// more, as the paper's Figures 8 and 14 say. TICA-A, seeing the DRAM
/// thrash, runs WED here.
#[test]
fn ef_spares_the_ssds_what_wed_spends_on_hits() {
    let a = reads_beyond_dram(80_000, 2);
    let ef = run("tica-ef", &a, 500);
    let wed = run("tica-wed", &a, 500);
    let adaptive = run("tica-a", &a, 500);
    let writes = ef.write_accesses();
    assert!(
        ssd_writes(&ef) <= 2 * writes,
        "{} > 2 x {writes}",
        ssd_writes(&ef)
    );
    for d in [1, 2] {
        assert_eq!(
            ef.writes[d][Purpose::Admit.index()],
            0,
            "EF admits nothing to SSD {d}"
        );
    }
    assert_eq!(
        ef.writes[2][Purpose::Migrate.index()],
        0,
        "EF demotes nothing"
    );
    assert!(wed.writes[2][Purpose::Migrate.index()] > 0, "WED demotes");
    assert!(ssd_writes(&wed) > ssd_writes(&ef));
    // The WO-SSD serves WED's extra hits.
    assert!(wed.read_hit_ratio() > ef.read_hit_ratio() + 0.2);
    assert!(wed.read_hit_ratio_on(2) > 0.2 && ef.read_hit_ratio_on(2) == 0.0);
    assert!(adaptive.read_hit_ratio() > ef.read_hit_ratio() + 0.2);
    println!(
        "SSD writes: EF {}, A {}, WED {}; read hits: EF {:.4}, A {:.4}, WED {:.4}",
        ssd_writes(&ef),
        ssd_writes(&adaptive),
        ssd_writes(&wed),
        ef.read_hit_ratio(),
        adaptive.read_hit_ratio(),
        wed.read_hit_ratio()
    );
}

/// Where reads and writes share a skewed set of pages, WED's copies of
/// DRAM victims push recently written pages off the SSDs, and it hits no
/// more than EF: the paper's Webserver and Exchange, where EF wins.
#[test]
fn wed_gains_nothing_when_reads_follow_writes() {
    let a = skewed(80_000, 3_000, 30, 2);
    let ef = run("tica-ef", &a, 500);
    let wed = run("tica-wed", &a, 500);
    assert!(wed.read_hit_ratio() <= ef.read_hit_ratio());
    assert!(ssd_writes(&wed) > ssd_writes(&ef));
}
