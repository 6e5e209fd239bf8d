//! `tiermux sim` runs no more key-value runs at once than their volumes'
//! bytes fit this machine's memory, and says so.

use crate::common::cli;
use cli::{tiermux, Scratch};

#[test]
fn key_value_runs_go_as_many_at_once_as_their_volumes_fit() {
    let memory_bytes = tiermux_sim::memory::machine_memory_bytes().expect("/proc/meminfo");
    // Each volume is 0.3 of the memory: a run fits, but two threads that
    // may each hold two copies do not.
    let volume_blocks = memory_bytes * 3 / 10 / 4096;
    // All items in large-object regions, written in order: the few keys
    // touch a few MiB of the volume.
    let experiment = format!(
        r#"
name = "wide-volume"
description = "two short cache runs over a volume of 0.3 of the memory"

[base]
devices = ["optane-905p", "flash-970pro"]
cache_blocks = 1024
volume_blocks = {volume_blocks}
duration_s = 0.002
warmup_s = 0.0

[base.workload]
working_set_blocks = 100

[base.kv]
soc_share = 0.0

[[sweep]]
policy = ["classic", "nhc"]
"#
    );
    let s = Scratch::new("sim-memory");
    let file = s.path().join("wide.toml");
    std::fs::write(&file, experiment).unwrap();
    let out_dir = s.path().join("out");
    let out = tiermux(&[
        "sim",
        file.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
        "--threads",
        "2",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("key-value runs 1 at a time, not 2"),
        "{stderr}"
    );
    let results = std::fs::read_to_string(out_dir.join("results.csv")).unwrap();
    assert_eq!(results.lines().count(), 3, "{results}");
}
