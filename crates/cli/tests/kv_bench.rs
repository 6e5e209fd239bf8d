//! `tiermux kv bench`: named workloads on the key-value cache over a
//! simulated hierarchy, policies side by side.

use std::process::{Command, Output};

fn kv_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tiermux"))
        .args(["kv", "bench"])
        .args(args)
        .output()
        .expect("runs tiermux")
}

const SMALL: &[&str] = &[
    "--keys",
    "3000",
    "--perf-mib",
    "16",
    "--volume-mib",
    "64",
    "--dram-mib",
    "0.25",
    "--duration",
    "0.4",
    "--warmup",
    "0.2",
];

#[test]
fn compares_policies_side_by_side() {
    let out = kv_bench(
        &[
            &["--workload", "ycsb-b", "--policy", "classic,nhc,most"],
            SMALL,
        ]
        .concat(),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{text}");
    assert_eq!(rows[0][0], "classic");
    assert_eq!(rows[0][2], "1.000", "{text}");
    for r in &rows {
        let ops: f64 = r[1].parse().unwrap();
        let hits: f64 = r[5].parse().unwrap();
        assert!(ops > 1000.0 && hits > 0.5, "{text}");
    }
}

#[test]
fn every_listed_workload_runs() {
    let list = kv_bench(&["--list"]);
    let text = String::from_utf8_lossy(&list.stdout).to_string();
    let names: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| {
            let mode = if l.contains("store only") {
                "store"
            } else {
                "cache"
            };
            Some((l.split_whitespace().next()?, mode))
        })
        .chain([("ycsb-a", "store"), ("ycsb-c", "store")])
        .collect();
    assert!(names.len() >= 17, "{text}");
    for (name, mode) in names {
        let args = ["--workload", name, "--policy", "classic", "--mode", mode];
        let mut small = SMALL.to_vec();
        if name == "zippydb" {
            // Its values average 16 KB.
            let at = small
                .iter()
                .position(|a| *a == "--volume-mib")
                .expect("a size");
            small[at + 1] = "160";
        }
        let out = kv_bench(&[&args[..], &small].concat());
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn bad_choices_are_refused_by_name() {
    for (args, want) in [
        (&["--workload", "ycsb-e"][..], "kv.scan: SCAN needs mode"),
        (&["--workload", "nope"][..], "unknown workload 'nope'"),
        (&["--policy", "nope"][..], "nope"),
        (
            &["--devices", "optane-905p,nope"][..],
            "unknown profile 'nope'",
        ),
        (&["--value-bytes", "4"][..], "kv.value_bytes_min"),
        (
            &["--mode", "store", "--value-bytes", "30000"][..],
            "--volume-mib: 3000 keys of about 30048 bytes need 85 MiB",
        ),
    ] {
        let out = kv_bench(&[args, SMALL].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(want),
            "{args:?}: {err}"
        );
    }
}
