//! `tiermux serve --metrics`: Prometheus metrics scraped while fio writes
//! and verifies through NBD move with the load, agree with each other, and
//! show what recovery did after a `kill -9`.
//!
//! Needs fio (`.ci/run` installs it), like `tests/nbd.rs`.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::nbd_served;
use nbd_served::*;

#[test]
fn metrics_move_under_fio_and_show_recovery() {
    if !have_tools(&["fio"]) {
        return;
    }
    let dir = data_dir("metrics");
    let (s, line) = Served::spawn_with(&dir, &["--metrics", "127.0.0.1:0"]);
    let addr = metrics_addr(&line);
    let (status, before) = get(&addr, "/metrics");
    assert!(status.contains("200"), "{status}");
    assert_eq!(must(&before, "tiermux_nbd_connections_total"), 0.0);
    assert_eq!(must(&before, "tiermux_volume_policy{policy=\"nhc\"}"), 1.0);
    assert!(get(&addr, "/other").0.contains("404"));

    // fio at a limited rate, so that the scrapes land while it runs.
    let fio = spawn_fio_verify(&s, "16M", 2000);
    let t0 = Instant::now();
    let mut during = Vec::new();
    let mut fio = Some(fio);
    let mut fio_out = String::new();
    while let Some(mut child) = fio.take() {
        let (_, m) = get(&addr, "/metrics");
        during.push(m);
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            fio_out = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(out.status.success(), "fio: {fio_out}");
        } else {
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "fio did not finish"
            );
            fio = Some(child);
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    assert!(fio_out.contains("err= 0"), "{fio_out}");

    // The values move while fio runs: requests rise from scrape to scrape.
    let requests: Vec<f64> = during
        .iter()
        .map(|m| must(m, "tiermux_requests_total"))
        .collect();
    let rises = requests.windows(2).filter(|w| w[1] > w[0]).count();
    assert!(rises >= 3, "requests over the scrapes: {requests:?}");
    assert!(
        requests.windows(2).all(|w| w[1] >= w[0]),
        "a counter fell: {requests:?}"
    );
    assert!(
        during
            .iter()
            .any(|m| must(m, "tiermux_nbd_open_connections") >= 1.0),
        "no scrape saw fio's connection"
    );

    std::thread::sleep(Duration::from_millis(100));
    let (_, after) = get(&addr, "/metrics");
    assert!(must(&after, "tiermux_nbd_connections_total") >= 1.0);
    assert!(
        must(&after, "tiermux_read_hits_total") + must(&after, "tiermux_read_misses_total") > 0.0
    );
    assert!(must(&after, "tiermux_journal_records_total") > 0.0);
    assert!(
        value(&after, "tiermux_dirty_bytes").is_some(),
        "write-back reports dirty bytes"
    );
    assert!(value(&after, "tiermux_policy_control{variable=\"load_admit\"}").is_some());
    // Each device's latency histogram counts exactly its operations, and
    // its operations moved whole blocks, one to 256 each (consecutive
    // blocks merge into one operation).
    for dev in ["fast", "slow"] {
        for dir in ["read", "write"] {
            let labels = format!("{{device=\"{dev}\",dir=\"{dir}\"}}");
            let ops = must(&after, &format!("tiermux_device_ops_total{labels}"));
            let bytes = must(&after, &format!("tiermux_device_bytes_total{labels}"));
            let count = must(
                &after,
                &format!("tiermux_device_latency_seconds_count{labels}"),
            );
            let inf = must(
                &after,
                &format!("tiermux_device_latency_seconds_bucket{{le=\"+Inf\",device=\"{dev}\",dir=\"{dir}\"}}"),
            );
            assert_eq!((count, inf), (ops, ops), "{dev} {dir}");
            assert_eq!(bytes % 4096.0, 0.0, "{dev} {dir}: {bytes} bytes");
            let blocks = bytes / 4096.0;
            assert!(
                ops <= blocks && blocks <= ops * 256.0,
                "{dev} {dir}: {ops} operations moved {blocks} blocks"
            );
        }
    }
    let cached = "tiermux_device_ops_total{device=\"fast\",dir=\"write\"}";
    assert!(
        must(&after, cached) > 0.0,
        "write-back wrote nothing to the cache"
    );

    dashboard_queries_only_exported_metrics(&after);

    // After kill -9 the next start replays the journal and says so.
    s.kill9();
    let (s, line) = Served::spawn_with(&dir, &["--metrics", "127.0.0.1:0"]);
    let (_, m) = get(&metrics_addr(&line), "/metrics");
    assert!(must(&m, "tiermux_recovery_journal_records") > 0.0, "{m}");
    assert!(must(&m, "tiermux_recovery_seconds") > 0.0);
    s.stop();
    std::fs::remove_dir_all(&dir).ok();
}

/// Every metric the Grafana dashboard in `examples/` queries is one the
/// endpoint exports (the dashboard itself is not loaded into Grafana here).
fn dashboard_queries_only_exported_metrics(metrics: &str) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/grafana/tiermux-volume.json"
    );
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut names = Vec::new();
    for panel in dash["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for (i, _) in expr.match_indices("tiermux_") {
                let name: String = expr[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                names.push(name);
            }
        }
    }
    assert!(names.len() >= 10, "{names:?}");
    for n in names {
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with(&format!("{n}{{")) || l.starts_with(&format!("{n} "))),
            "the dashboard queries {n}, which the endpoint does not export"
        );
    }
}

#[test]
fn a_metrics_address_that_cannot_be_bound_is_named() {
    let dir = data_dir("metrics-bad");
    let out = Command::new(env!("CARGO_BIN_EXE_tiermux"))
        .args([
            "serve",
            "volume.toml",
            "--data-dir",
            ".",
            "--metrics",
            "256.0.0.1:99",
        ])
        .current_dir(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("metrics on 256.0.0.1:99"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
