//! The TICA paper's devices: a read-optimized and a write-optimized SATA
//! SSD, and the power of its DRAM.
//!
//! The paper names no SSD models ("WO- and RO-SSDs are selected from
//! enterprise-grade SSDs", §5.1) and its device figure (Fig. 1) is lost in
//! the text. What the text gives is a ratio: replacing one SSD of a
//! mirrored pair of WO-SSDs by an RO-SSD "results in almost 5x performance
//! degradation in write requests", and "the performance gap of different
//! SSDs is smaller in read requests" (§3, Fig. 4); MLC reads are
//! "comparable" to SLC's. So both SSDs take the timing of the SATA flash
//! SSD that MOST Table 1 measured (`sata-870`), and the RO-SSD writes five
//! times slower, in latency and in bandwidth. Power and endurance come
//! from TICA Table 1.

use crate::economics::{tica_table1, TICA_TABLE1_SOURCE};
use crate::profile::{cite, ProfileSpec};

/// TICA §3 (Fig. 4): an RO-SSD in a mirrored WO-SSD pair makes writes
/// almost five times slower.
const RO_WRITE_SLOWDOWN: f64 = 5.0;

const TICA_FIG4: &str = "TICA (Salkhordeh et al.) §3, Fig. 4: an RO-SSD in place of one SSD of a mirrored WO-SSD pair \"results in almost 5x performance degradation in write requests\"";

fn set_power(p: &mut ProfileSpec, class: &str) {
    let e = tica_table1(class).expect("a TICA Table 1 class");
    p.power = Some(e.power());
    p.endurance_writes_per_gb = e.endurance_writes_per_gb;
    let mut cited = vec!["power.read_w", "power.write_w", "power.idle_w"];
    if e.endurance_writes_per_gb.is_some() {
        cited.push("endurance_writes_per_gb");
    }
    cite(p, &cited, &format!("{TICA_TABLE1_SOURCE} ({class})"));
}

/// Adds `ro-ssd` and `wo-ssd` after `sata-870`, and TICA Table 1's DRAM
/// power to `dram`.
pub(crate) fn add_tica_devices(v: &mut Vec<ProfileSpec>) {
    let sata = v
        .iter()
        .find(|p| p.name == "sata-870")
        .cloned()
        .expect("the sata-870 profile is built in first");
    if let Some(dram) = v.iter_mut().find(|p| p.name == "dram") {
        set_power(dram, "dram");
    }
    let ssd = |name: &str, what: &str, timing: String| {
        let mut p = sata.clone();
        p.name = name.into();
        p.description = format!("TICA's {what} SATA SSD (model not named)");
        p.source = format!("TICA names no model: {timing}; power from {TICA_TABLE1_SOURCE}");
        // TICA Table 1 rates endurance without a warranty period.
        p.warranty_years = None;
        p.cite.remove("warranty_years");
        set_power(&mut p, name);
        p
    };
    let wo = ssd(
        "wo-ssd",
        "write-optimized",
        format!("the timing of `sata-870` ({})", sata.source),
    );
    let mut ro = ssd(
        "ro-ssd",
        "read-optimized",
        format!(
            "reads as `sata-870` ({}); writes five times slower ({TICA_FIG4})",
            sata.source
        ),
    );
    let w = &mut ro.write;
    w.latency_us_4k *= RO_WRITE_SLOWDOWN;
    w.latency_us_16k = w.latency_us_16k.map(|l| l * RO_WRITE_SLOWDOWN);
    w.gb_per_s_4k /= RO_WRITE_SLOWDOWN;
    w.gb_per_s_16k = w.gb_per_s_16k.map(|b| b / RO_WRITE_SLOWDOWN);
    let slower = format!("{TICA_FIG4}: `sata-870`'s write latency times {RO_WRITE_SLOWDOWN}, its bandwidth over {RO_WRITE_SLOWDOWN}");
    cite(
        &mut ro,
        &[
            "write.latency_us_4k",
            "write.latency_us_16k",
            "write.gb_per_s_4k",
            "write.gb_per_s_16k",
        ],
        &slower,
    );
    let at = v
        .iter()
        .position(|p| p.name == "sata-870")
        .expect("found above")
        + 1;
    v.insert(at, wo);
    v.insert(at, ro);
}

#[cfg(test)]
mod tests {
    use crate::find_builtin;

    /// TICA §3's ratio holds in the derived models, and reads match.
    #[test]
    fn the_ro_ssd_writes_five_times_slower_and_reads_alike() {
        let ro = find_builtin("ro-ssd").unwrap().model().unwrap();
        let wo = find_builtin("wo-ssd").unwrap().model().unwrap();
        let qd1_ns = |d: &crate::DirModel, b: u64| d.pipe_ns(b) + d.access_ns(b);
        for bytes in [4096u64, 16384] {
            // QD1 latency and the pipe time (peak bandwidth) alike.
            let latency = qd1_ns(&ro.write, bytes) / qd1_ns(&wo.write, bytes);
            let pipe = ro.write.pipe_ns(bytes) / wo.write.pipe_ns(bytes);
            for ratio in [latency, pipe] {
                assert!((ratio - 5.0).abs() < 1e-6, "{bytes}: {ratio}");
            }
            assert_eq!(qd1_ns(&ro.read, bytes), qd1_ns(&wo.read, bytes));
        }
        let p = find_builtin("wo-ssd").unwrap().power.unwrap();
        assert_eq!((p.read_w, p.write_w, p.idle_w), (2.4, 3.1, 1.3));
        let p = find_builtin("ro-ssd").unwrap().power.unwrap();
        assert_eq!((p.read_w, p.write_w, p.idle_w), (3.3, 3.4, 0.07));
        assert_eq!(find_builtin("dram").unwrap().power.unwrap().idle_w, 4.0);
    }
}
