//! The built-in device profiles: the devices of the four papers (Orthus
//! Table 1 and §6.1, MOST Table 1 and §4.2, Hibachi §V-B), each parameter
//! cited to its source; TICA's are added by `tica_profiles`. The profile
//! type, its checks and the model it derives are in `profile`.

use crate::economics::DAYS_PER_YEAR;
use crate::profile::{cite, dir, spec, DirTargets, ProfileSpec};

const ORTHUS_T1: &str = "Orthus (FAST '21) Table 1";
const MOST_T1: &str = "MOST Table 1 (QD1 read latency; 32-thread bandwidth)";

pub(crate) const LAT: [&str; 2] = ["read.latency_us_4k", "write.latency_us_4k"];

const HIBACHI_LAT: &str = "Hibachi (MSST '17) §V-B: average DRAM access latency 50 ns; NVRAM read latency 1, 5 and 10x DRAM's";

/// Hibachi's latency study: a DRAM of 50 ns and NVRAMs of 1, 5 and 10
/// times that, each with the DRAM's bandwidth (the paper gives latencies
/// only), so that they differ in access latency alone.
fn hibachi_memory(v: &mut Vec<ProfileSpec>) {
    for (name, times) in [
        ("dram-hibachi", 1.0),
        ("nvram-hibachi-1x", 1.0),
        ("nvram-hibachi-5x", 5.0),
        ("nvram-hibachi-10x", 10.0),
    ] {
        let lat_us = 0.05 * times;
        let mut p = spec(
            name,
            &format!("memory of {:.0} ns access latency (Hibachi's latency study)", lat_us * 1e3),
            &format!("{HIBACHI_LAT}. Assumed: the bandwidths of the `dram` profile (Orthus Table 1: 15 GB/s; 6 GB/s one stream)"),
            dir(lat_us, None, 15.0, None),
            dir(lat_us, None, 15.0, None),
        );
        p.read.qd1_gb_per_s = Some(6.0);
        p.write.qd1_gb_per_s = Some(6.0);
        cite(&mut p, &LAT, HIBACHI_LAT);
        cite(
            &mut p,
            &["read.gb_per_s_4k", "write.gb_per_s_4k"],
            &format!("Assumed, as the `dram` profile: {ORTHUS_T1}, 15 GB/s"),
        );
        cite(
            &mut p,
            &["read.qd1_gb_per_s", "write.qd1_gb_per_s"],
            "Assumed, as the `dram` profile: one stream moves 6 GB/s",
        );
        v.push(p);
    }
}

/// The Orthus Table 1 memory devices (DRAM, Optane DCPM).
fn orthus_table1_memory(v: &mut Vec<ProfileSpec>) {
    let mut dram = spec(
        "dram",
        "DDR4 DRAM (SK Hynix 16 GB)",
        "Orthus Table 1: 80 ns, 15 GB/s read and write. Assumed: one stream moves 6 GB/s (non-temporal copies), which sets the QD1 latency of a 4 KiB block",
        dir(0.08, None, 15.0, None),
        dir(0.08, None, 15.0, None),
    );
    dram.read.qd1_gb_per_s = Some(6.0);
    dram.write.qd1_gb_per_s = Some(6.0);
    cite(
        &mut dram,
        &LAT,
        &format!("{ORTHUS_T1} (SK Hynix DDR4 16 GB): 80 ns"),
    );
    cite(
        &mut dram,
        &["read.gb_per_s_4k", "write.gb_per_s_4k"],
        &format!("{ORTHUS_T1}: 15 GB/s read and write"),
    );
    cite(&mut dram, &["read.qd1_gb_per_s", "write.qd1_gb_per_s"], "Assumed (not measured): one stream of non-temporal copies moves 6 GB/s; sets the QD1 latency of a 4 KiB block");
    v.push(dram);
    let mut nvm = spec(
        "nvm",
        "Intel Optane DCPM 128 GB, App Direct",
        "Orthus Table 1: 300 ns, 6.8 GB/s read, 2.3 GB/s write. Assumed from Yang et al. (FAST '20): one stream reads 2.2 GB/s and writes 1.2 GB/s, and write bandwidth falls beyond 4 concurrent writers (Orthus Fig. 2: NVM/Optane writes invert under load); reads slow under concurrent writes",
        dir(0.3, None, 6.8, None),
        dir(0.3, None, 2.3, None),
    );
    nvm.read.qd1_gb_per_s = Some(2.2);
    nvm.write.qd1_gb_per_s = Some(1.2);
    nvm.write_contention_threads = 4;
    nvm.write_contention_factor = 0.25;
    nvm.write_interference = 1.0;
    cite(
        &mut nvm,
        &LAT,
        &format!("{ORTHUS_T1} (Intel Optane DCPM): 300 ns"),
    );
    cite(
        &mut nvm,
        &["read.gb_per_s_4k"],
        &format!("{ORTHUS_T1}: 6.8 GB/s read"),
    );
    cite(
        &mut nvm,
        &["write.gb_per_s_4k"],
        &format!("{ORTHUS_T1}: 2.3 GB/s write"),
    );
    cite(&mut nvm, &["read.qd1_gb_per_s", "write.qd1_gb_per_s"], "Yang et al. (FAST '20), single-thread DCPM bandwidth: about 2.2 GB/s read, 1.2 GB/s write (read from their figures)");
    cite(&mut nvm, &["write_contention_threads"], "Yang et al. (FAST '20): DCPM write bandwidth peaks at about 4 concurrent writers and falls beyond");
    cite(&mut nvm, &["write_contention_factor"], "Assumed (not measured): the rate of that fall; chosen so that NVM/Optane writes invert under load as Orthus Fig. 2 shows");
    cite(&mut nvm, &["write_interference"], "Assumed (not measured): reads slow under concurrent writes, as Yang et al. (FAST '20) report for DCPM");
    v.push(nvm);
}

/// AnandTech's Optane SSD DC P4800X review (2017), "Checking Intel's
/// Numbers": 4 KiB random reads at QD1 and QD16 on the P4800X and on the
/// Intel P3700 NVMe flash SSD.
const ANANDTECH_P4800X: &str = "AnandTech, Intel Optane SSD DC P4800X review (2017)";
const P4800X_MIXED: &str = "Intel Optane SSD DC P4800X datasheet (as printed by AnandTech): 500,000 IOPS of 4 KiB 70/30 mixed reads and writes at QD16";

/// The Orthus Table 1 low-latency SSD (Optane 905P): Table 1's latency and
/// large-transfer bandwidth, with the size- and concurrency-dependence
/// that Table 1 leaves out taken from measurements of the same platform.
fn orthus_optane_ssd() -> ProfileSpec {
    let mut optane = spec(
        "optane-905p",
        "Intel Optane SSD 905P (low-latency SSD, PCIe 3, seven-channel controller)",
        &format!("{ORTHUS_T1}: 10 µs, 2.5 GB/s read, 2.3 GB/s write; the P4800X (same controller) as measured by {ANANDTECH_P4800X}"),
        dir(10.0, None, 2.395, None),
        dir(10.0, None, 2.048, None),
    );
    optane.read.gb_per_s_large = Some(2.5);
    optane.write.gb_per_s_large = Some(2.3);
    optane.read.qd1_gb_per_s = Some(1.25);
    optane.read.p99_over_p50 = Some(10.0 / 9.0);
    optane.channels = 7;
    optane.write_interference = 0.57;
    cite(
        &mut optane,
        &LAT,
        &format!("{ORTHUS_T1} (low-latency SSD): 10 µs, for reads and writes"),
    );
    cite(&mut optane, &["read.gb_per_s_4k"], &format!("{ANANDTECH_P4800X}: 584.8k IOPS of 4 KiB random reads at QD16 (saturated: the median latency is 25 µs)"));
    cite(&mut optane, &["read.gb_per_s_large"], &format!("{ORTHUS_T1}: 2.5 GB/s read, read as the vendor's large-transfer figure (the P4800X's datasheet gives 2.4 GB/s at 64 KiB)"));
    cite(&mut optane, &["write.gb_per_s_4k"], "Intel Optane SSD DC P4800X datasheet (as printed by AnandTech): 500,000 IOPS of 4 KiB random writes at QD16");
    cite(
        &mut optane,
        &["write.gb_per_s_large"],
        &format!("{ORTHUS_T1}: 2.3 GB/s write, read as the vendor's large-transfer figure"),
    );
    cite(&mut optane, &["read.qd1_gb_per_s"], "AnandTech, Intel Optane SSD 900P review (2017): sustained 128 kB reads jump from QD1 to QD2 and hold steady after, so one request moves about half the peak; 1.25 GB/s is half of 2.5");
    cite(
        &mut optane,
        &["read.p99_over_p50"],
        &format!("{ANANDTECH_P4800X}: QD1 4 KiB random read median 9 µs, 99th percentile 10 µs"),
    );
    cite(&mut optane, &["write_interference"], &format!("{P4800X_MIXED}, against 550,000 reads (measured 584.8k) and 500,000 writes: reads at 30 % writes cost 1 + 0.57 x 0.3 times as much"));
    cite(&mut optane, &["channels"], "AnandTech, Intel Optane SSD 900P review (2017): the 900P/P4800X controller has a seven-channel interface to the 3D XPoint memory (the 905P keeps the platform)");
    optane
}

/// The Orthus Table 1 NVMe Flash SSD (Samsung 970 Pro): Table 1's latency
/// and write bandwidth, the datasheet's 4 KiB IOPS held at every size (no
/// figure gives its larger random reads), and flash's buffered writes and
/// deep internal parallelism from named measurements.
fn orthus_flash_ssd() -> ProfileSpec {
    let mut flash = spec(
        "flash-970pro",
        "Samsung 970 Pro NVMe Flash SSD (PCIe 3, 64-layer MLC V-NAND), random access",
        &format!("{ORTHUS_T1}: 80 µs, ~2.0 GB/s write (its ~3.0 GB/s read is sequential); Samsung's 970 Pro figures, random reads at the 4 KiB rate at every size; flash tails as measured by {ANANDTECH_P4800X}"),
        dir(80.0, None, 2.048, None),
        dir(25.0, None, 2.048, None),
    );
    flash.read.qd1_gb_per_s = Some(1.5);
    flash.read.p99_over_p50 = Some(96.0 / 76.0);
    flash.channels = 64;
    cite(
        &mut flash,
        &["read.latency_us_4k"],
        &format!("{ORTHUS_T1} (NVMe Flash SSD): 80 µs"),
    );
    cite(&mut flash, &["write.latency_us_4k"], &format!("{ANANDTECH_P4800X}: thanks to their write caches, flash SSDs' QD1 random write latencies are only 2-3x the Optane SSD's (10 µs); 25 µs"));
    cite(&mut flash, &["write.gb_per_s_4k"], &format!("Samsung 970 Pro specifications (HotHardware's 970 review): random IOPS peak at about 500K (4 KiB, QD32 x 4 threads). Writes move at this rate at every size: {ORTHUS_T1}'s ~2.0 GB/s sequential write is the same figure rounded"));
    cite(&mut flash, &["read.gb_per_s_4k"], "Samsung 970 Pro specifications (HotHardware's 970 review): random IOPS peak at about 500K (4 KiB, QD32 x 4 threads). No figure gives the drive's larger random reads, so they move at this rate: not slower (a large read is served as 4 KiB pages in parallel), not at Orthus Table 1's ~3.0 GB/s (a sequential figure)");

    cite(&mut flash, &["read.qd1_gb_per_s"], "MOST Table 1, PCIe 3.0 Samsung 960 flash SSD: QD1 read latency 82 µs at 4 KiB and 90 µs at 16 KiB, so one request streams its extra 12 KiB at about 1.5 GB/s");
    cite(&mut flash, &["read.p99_over_p50"], &format!("{ANANDTECH_P4800X}: QD1 4 KiB random read on the Intel P3700 NVMe flash SSD, median 76 µs, 99th percentile 96 µs"));
    cite(&mut flash, &["channels"], &format!("Derived: 500K IOPS at 80 µs needs at least 40 reads in service at once (Little's law); 64 independent units (dies and planes) let the host link, not the units, bind at QD128, and leave QD16 latency-bound, as {ANANDTECH_P4800X} measured for flash (P3700: 167k IOPS at QD16, median 91 µs)"));
    flash
}

/// The other Orthus Table 1 SSDs.
fn orthus_table1_ssds(v: &mut Vec<ProfileSpec>) {
    v.push(orthus_optane_ssd());
    v.push(orthus_flash_ssd());
    let mut sata = spec(
        "sata-520",
        "Intel 520 SATA Flash SSD",
        &format!("{ORTHUS_T1}: 180 µs, 0.5 GB/s read and write"),
        dir(180.0, None, 0.5, None),
        dir(180.0, None, 0.5, None),
    );
    cite(
        &mut sata,
        &LAT,
        &format!("{ORTHUS_T1} (SATA Flash SSD): 180 µs"),
    );
    cite(
        &mut sata,
        &["read.gb_per_s_4k", "write.gb_per_s_4k"],
        &format!("{ORTHUS_T1}: 0.5 GB/s read and write"),
    );
    v.push(sata);
}

/// A MOST Table 1 device: QD1 read latency and 32-thread bandwidth at 4
/// and 16 KiB; write latency as `write_note` says.
fn most_table1(
    name: &str,
    description: &str,
    read: DirTargets,
    write: DirTargets,
    write_note: &str,
) -> ProfileSpec {
    let bw = |t: &DirTargets| format!("{}/{}", t.gb_per_s_4k, t.gb_per_s_16k.unwrap_or(f64::NAN));
    let lat = format!(
        "{}/{} µs",
        read.latency_us_4k,
        read.latency_us_16k.unwrap_or(f64::NAN)
    );
    let source = format!(
        "{MOST_T1}: {lat}, read {} GB/s, write {} GB/s at 4/16 KiB; {write_note}",
        bw(&read),
        bw(&write)
    );
    let mut p = spec(name, description, &source, read, write);
    cite(
        &mut p,
        &["read.latency_us_4k", "read.latency_us_16k"],
        &format!("{MOST_T1}: QD1 read latency {lat} at 4/16 KiB"),
    );
    cite(
        &mut p,
        &[
            "read.gb_per_s_4k",
            "read.gb_per_s_16k",
            "write.gb_per_s_4k",
            "write.gb_per_s_16k",
        ],
        &format!("{MOST_T1}: 32-thread bandwidth at 4/16 KiB"),
    );
    cite(
        &mut p,
        &["write.latency_us_4k", "write.latency_us_16k"],
        write_note,
    );
    p
}

/// Gives `p` a warranted endurance of `full_writes` full-device writes
/// over `years`, cited to `source`.
fn rate_endurance(p: &mut ProfileSpec, full_writes: f64, years: f64, source: &str) {
    p.endurance_writes_per_gb = Some(full_writes);
    p.warranty_years = Some(years);
    cite(p, &["endurance_writes_per_gb", "warranty_years"], source);
}

/// The built-in profiles.
pub fn builtin_profiles() -> Vec<ProfileSpec> {
    let mut v = Vec::new();
    orthus_table1_memory(&mut v);
    hibachi_memory(&mut v);
    orthus_table1_ssds(&mut v);
    let mut p4800x = most_table1(
        "optane-p4800x",
        "Intel Optane SSD P4800X 750 GB",
        dir(11.0, Some(18.0), 2.2, Some(2.4)),
        dir(11.0, Some(18.0), 2.2, Some(2.2)),
        "write latency taken equal to read (assumed; MOST Table 1 gives reads only)",
    );
    p4800x.read.p99_over_p50 = Some(10.0 / 9.0);
    cite(
        &mut p4800x,
        &["read.p99_over_p50"],
        &format!("{ANANDTECH_P4800X}: QD1 4 KiB random read median 9 µs, 99th percentile 10 µs"),
    );
    // 1 / 500k = 0.7 r (1 + 0.3 f) + 0.3 w with r = w = 4096 B / 2.2 GB/s.
    p4800x.write_interference = 0.353;
    cite(&mut p4800x, &["write_interference"], &format!("{P4800X_MIXED}, against this profile's 2.2 GB/s (537k IOPS) of 4 KiB reads and of writes: reads at 30 % writes cost 1 + 0.353 x 0.3 times as much (the MOST paper reports interference, less severe than the flash SSDs')"));
    rate_endurance(
        &mut p4800x,
        30.0 * DAYS_PER_YEAR * 5.0,
        5.0,
        "MOST §4.2, citing Intel's P4800X specification: \"a warranted endurance of 30 DWPD over 5 years\"",
    );
    v.push(p4800x);
    v.push(most_table1(
        "nvme-pcie4",
        "PCIe 4.0 NVMe Flash SSD",
        dir(66.0, Some(86.0), 1.5, Some(3.3)),
        dir(20.0, Some(30.0), 1.9, Some(2.3)),
        "write latency assumed 20/30 µs (flash writes complete in the device buffer; not measured)",
    ));
    let mut pcie3 = most_table1(
        "nvme-pcie3",
        "Samsung 960 NVMe Flash SSD 1 TB (PCIe 3.0)",
        dir(82.0, Some(90.0), 1.0, Some(1.6)),
        dir(20.0, Some(30.0), 1.5, Some(1.6)),
        "write latency assumed 20/30 µs (flash writes complete in the device buffer; not measured)",
    );
    pcie3.read.p99_over_p50 = Some(96.0 / 76.0);
    cite(&mut pcie3, &["read.p99_over_p50"], &format!("{ANANDTECH_P4800X}: QD1 4 KiB random read on the Intel P3700, a PCIe 3 NVMe flash SSD: median 76 µs, 99th percentile 96 µs"));
    // 1 / 265k = 0.7 r (1 + 0.3 f) + 0.3 w with r = 1 / 460k, w = 1 / 175k.
    pcie3.write_interference = 1.178;
    cite(&mut pcie3, &["write_interference"], "Intel SSD DC P3700 product specification (330566-005US), a PCIe 3 NVMe flash SSD standing in for the 960 (no mixed figure published): 4 KiB random 70/30 reads and writes up to 265K IOPS, against 460K reads and 175K writes: reads at 30 % writes cost 1 + 1.178 x 0.3 times as much (the MOST paper: NVMe and SATA \"exhibit more severe read/write interference than the Optane device\")");
    rate_endurance(
        &mut pcie3,
        0.37 * DAYS_PER_YEAR * 3.0,
        3.0,
        "MOST §4.2, citing Samsung's 960 specification: \"the 1 TB capacity-tier device rated for 0.37 DWPD over 3 years\"",
    );
    v.push(pcie3);
    v.push(most_table1(
        "nvme-rdma",
        "PCIe 4.0 NVMe Flash SSD over RDMA (25 Gbps)",
        dir(88.0, Some(114.0), 1.2, Some(2.7)),
        dir(30.0, Some(45.0), 1.7, Some(2.3)),
        "write latency assumed 30/45 µs (buffered flash write plus the network round trip; not measured)",
    ));
    let mut sata = most_table1(
        "sata-870",
        "Samsung 870 SATA Flash SSD 1 TB",
        dir(104.0, Some(146.0), 0.38, Some(0.5)),
        dir(40.0, Some(60.0), 0.38, Some(0.5)),
        "write latency assumed 40/60 µs (buffered flash write over SATA; not measured)",
    );
    rate_endurance(
        &mut sata,
        600.0,
        5.0,
        "Samsung 870 EVO data sheet, 1 TB model: 600 TB written over a 5-year warranty (the MOST paper names no 870 variant or rating; EVO assumed)",
    );
    v.push(sata);
    let mut hdd = spec(
        "hdd",
        "7200 rpm hard disk",
        "No paper table. Assumed: 4.2 ms average seek + 4.2 ms half rotation = 8.4 ms per random access, one head (1 channel), 200 MB/s media rate",
        dir(8400.0, None, 0.2, None),
        dir(8400.0, None, 0.2, None),
    );
    hdd.channels = 1;
    cite(
        &mut hdd,
        &LAT,
        "Assumed (no paper table): 4.2 ms average seek plus 4.2 ms half rotation at 7200 rpm",
    );
    cite(
        &mut hdd,
        &["read.gb_per_s_4k", "write.gb_per_s_4k"],
        "Assumed (no paper table): 200 MB/s media rate",
    );
    cite(
        &mut hdd,
        &["channels"],
        "One head: random accesses are served one at a time",
    );
    v.push(hdd);
    crate::tica_profiles::add_tica_devices(&mut v);
    for mb in [50.0, 25.0, 10.0] {
        let mut f = spec(
            &format!("flashsim-{}", mb as u32),
            &format!("FlashSim-emulated flash device limited to {mb} MB/s"),
            &format!("Orthus §6.1: FlashSim devices with maximum speeds of 50, 25 and 10 MB/s (this one {mb} MB/s). Assumed: 100 µs access latency"),
            dir(100.0 + 4096.0 / mb, None, mb / 1e3, None),
            dir(100.0 + 4096.0 / mb, None, mb / 1e3, None),
        );
        cite(&mut f, &LAT, "Assumed (the paper gives none): 100 µs access plus a 4 KiB transfer at the device's rate");
        cite(
            &mut f,
            &["read.gb_per_s_4k", "write.gb_per_s_4k"],
            &format!("Orthus §6.1: FlashSim limited to {mb} MB/s"),
        );
        v.push(f);
    }
    v
}
