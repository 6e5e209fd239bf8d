//! Prometheus metrics of a served volume: an HTTP endpoint (`GET
//! /metrics`) that renders the server's live snapshot ([`LiveStats`],
//! published by the event loop every 20 ms) in the OpenMetrics text format,
//! with `prometheus-client` for the encoding and `tiny_http` for HTTP. The
//! event loop does no work for a scrape.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tiermux_engine::device::{LatencyBuckets, LATENCY_BUCKET_BOUNDS_US};

use crate::server::LiveStats;

/// What does not change while the volume is served: its devices, policy
/// and what recovery found when it opened.
#[derive(Clone, Debug, Default)]
pub struct VolumeInfo {
    /// Device names, in the volume's order.
    pub devices: Vec<String>,
    /// Block size, bytes (dirty blocks are reported in bytes).
    pub block_bytes: u64,
    /// The policy's name.
    pub policy: String,
    /// Wall-clock time of recovery at open, ms.
    pub recovery_ms: f64,
    /// Journal records replayed at open.
    pub recovery_journal_records: u64,
}

/// The content type of the OpenMetrics text format.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Debug)]
struct Snapshot {
    live: Arc<Mutex<LiveStats>>,
    info: VolumeInfo,
}

type Labels = Vec<(&'static str, String)>;

/// Writes one metric family: `samples` of `kind` under `name`.
fn family(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    samples: &[(Labels, f64)],
) -> std::fmt::Result {
    let encode = |e: MetricEncoder, v: f64| match kind {
        MetricType::Counter => ConstCounter::new(v).encode(e),
        _ => ConstGauge::new(v).encode(e),
    };
    let mut m = enc.encode_descriptor(name, help, None, kind)?;
    if let [(labels, v)] = samples {
        if labels.is_empty() {
            return encode(m, *v);
        }
    }
    for (labels, v) in samples {
        assert!(!labels.is_empty(), "{name}: several samples need labels");
        encode(m.encode_family(labels)?, *v)?;
    }
    Ok(())
}

/// One unlabelled sample.
fn one(v: u64) -> [(Labels, f64); 1] {
    [(Vec::new(), v as f64)]
}

impl Snapshot {
    fn devices(&self, l: &LiveStats, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        let mut ops = Vec::new();
        let mut bytes = Vec::new();
        let mut down = Vec::new();
        for (d, c) in l.devices.iter().enumerate() {
            let name = self.info.devices.get(d).cloned().unwrap_or(d.to_string());
            let lab = |dir: &str| vec![("device", name.clone()), ("dir", dir.to_string())];
            ops.push((lab("read"), c.read_ops as f64));
            ops.push((lab("write"), c.write_ops as f64));
            bytes.push((lab("read"), c.read_bytes as f64));
            bytes.push((lab("write"), c.write_bytes as f64));
            let out = l.volume.out_of_service >> d & 1;
            down.push((vec![("device", name)], out as f64));
        }
        let c = MetricType::Counter;
        family(
            enc,
            "tiermux_device_ops",
            "Device operations completed",
            c,
            &ops,
        )?;
        family(
            enc,
            "tiermux_device_bytes",
            "Bytes moved by device operations",
            c,
            &bytes,
        )?;
        family(
            enc,
            "tiermux_device_out_of_service",
            "1 when the device was taken out of service after failures",
            MetricType::Gauge,
            &down,
        )?;
        let mut m = enc.encode_descriptor(
            "tiermux_device_latency_seconds",
            "Device operation latency, from submission to completion",
            None,
            MetricType::Histogram,
        )?;
        for (d, c) in l.devices.iter().enumerate() {
            let name = self.info.devices.get(d).cloned().unwrap_or(d.to_string());
            for (dir, h) in [("read", &c.read_latency), ("write", &c.write_latency)] {
                let labels = vec![("device", name.clone()), ("dir", dir.to_string())];
                histogram(m.encode_family(&labels)?, h)?;
            }
        }
        Ok(())
    }

    fn volume(&self, l: &LiveStats, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        let v = &l.volume;
        let c = MetricType::Counter;
        let counters: [(&str, &str, u64); 9] = [
            ("tiermux_requests", "Client requests finished", v.requests),
            (
                "tiermux_read_hits",
                "Block reads served from a cached or faster copy",
                v.read_hits,
            ),
            (
                "tiermux_read_misses",
                "Block reads that missed",
                v.read_misses,
            ),
            (
                "tiermux_failed_requests",
                "Client requests answered with an I/O error",
                v.failed_requests,
            ),
            (
                "tiermux_device_errors",
                "Device operations that failed",
                v.device_errors,
            ),
            (
                "tiermux_read_retries",
                "Block reads that failed and were tried again",
                v.read_retries,
            ),
            (
                "tiermux_discarded_blocks",
                "Blocks of space the volume stopped using that were discarded (TRIM)",
                v.discarded_blocks,
            ),
            (
                "tiermux_journal_records",
                "Metadata journal records written",
                l.journal_records,
            ),
            (
                "tiermux_checkpoints",
                "Metadata checkpoints written",
                l.checkpoints,
            ),
        ];
        for (name, help, value) in counters {
            family(enc, name, help, c, &one(value))?;
        }
        self.volume_gauges(l, enc)
    }

    /// The volume's gauges: dirty bytes, the policy and its controller,
    /// and what recovery took when the volume opened.
    fn volume_gauges(&self, l: &LiveStats, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        if let Some((_, dirty)) = l.controller.iter().find(|(k, _)| k == "dirty_blocks") {
            let bytes = dirty * self.info.block_bytes as f64;
            let s = [(Vec::new(), bytes)];
            let help = "Cached bytes newer than their home copy";
            family(enc, "tiermux_dirty_bytes", help, MetricType::Gauge, &s)?;
        }
        let controls: Vec<(Labels, f64)> = l
            .controller
            .iter()
            .map(|(k, x)| (vec![("variable", k.clone())], *x))
            .collect();
        let help = "The policy's controller variables (NHC's load_admit and data_admit, MOST's offload_ratio and mirrored_bytes, ...)";
        family(
            enc,
            "tiermux_policy_control",
            help,
            MetricType::Gauge,
            &controls,
        )?;
        let s = [(vec![("policy", self.info.policy.clone())], 1.0)];
        family(
            enc,
            "tiermux_volume_policy",
            "The volume's policy (value 1)",
            MetricType::Gauge,
            &s,
        )?;
        let s = [(Vec::new(), self.info.recovery_ms / 1e3)];
        let help = "Wall-clock time of recovery when the volume opened";
        family(enc, "tiermux_recovery_seconds", help, MetricType::Gauge, &s)?;
        let help = "Journal records replayed when the volume opened";
        let s = one(self.info.recovery_journal_records);
        family(
            enc,
            "tiermux_recovery_journal_records",
            help,
            MetricType::Gauge,
            &s,
        )
    }

    fn nbd(&self, l: &LiveStats, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        let s = &l.server;
        let c = MetricType::Counter;
        let counters: [(&str, &str, u64); 5] = [
            (
                "tiermux_nbd_connections",
                "NBD connections that entered transmission",
                s.connections,
            ),
            (
                "tiermux_nbd_bad_requests",
                "NBD requests answered with an error for being malformed",
                s.bad_requests,
            ),
            (
                "tiermux_nbd_protocol_violations",
                "NBD connections closed for breaking the protocol",
                s.protocol_violations,
            ),
            (
                "tiermux_nbd_handshakes_refused",
                "NBD connections refused while too many handshakes waited",
                s.handshakes_refused,
            ),
            (
                "tiermux_nbd_connections_refused",
                "NBD connections closed at once because the most the server holds were open",
                s.connections_refused,
            ),
        ];
        for (name, help, value) in counters {
            family(enc, name, help, c, &one(value))?;
        }
        let help = "NBD connections open";
        family(
            enc,
            "tiermux_nbd_open_connections",
            help,
            MetricType::Gauge,
            &one(l.open_connections),
        )
    }
}

/// Encodes `h` as a histogram sample, in seconds.
fn histogram(mut e: MetricEncoder, h: &LatencyBuckets) -> std::fmt::Result {
    let bounds = LATENCY_BUCKET_BOUNDS_US
        .iter()
        .map(|&us| us as f64 / 1e6)
        .chain(std::iter::once(f64::MAX));
    let buckets: Vec<(f64, u64)> = bounds.zip(h.counts).collect();
    e.encode_histogram::<NoLabelSet>(h.sum_ns as f64 / 1e9, h.count(), &buckets, None)
}

impl Collector for Snapshot {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let l = self.live.lock().expect("live stats").clone();
        self.devices(&l, &mut enc)?;
        self.volume(&l, &mut enc)?;
        self.nbd(&l, &mut enc)
    }
}

/// The metrics text for a snapshot.
pub fn render(live: &Arc<Mutex<LiveStats>>, info: &VolumeInfo) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Snapshot {
        live: live.clone(),
        info: info.clone(),
    }));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .expect("encoding into a String cannot fail");
    out
}

/// A running metrics endpoint; stops when dropped.
pub struct MetricsEndpoint {
    /// The address it listens on.
    pub addr: SocketAddr,
    http: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsEndpoint {
    /// Listens on `addr` (HOST:PORT; port 0 picks one) and serves `GET
    /// /metrics` from `live` on a thread of its own. Other paths get 404,
    /// other methods 405.
    pub fn start(
        addr: &str,
        live: Arc<Mutex<LiveStats>>,
        info: VolumeInfo,
    ) -> Result<MetricsEndpoint, String> {
        let http = tiny_http::Server::http(addr).map_err(|e| format!("metrics on {addr}: {e}"))?;
        let bound = http
            .server_addr()
            .to_ip()
            .ok_or_else(|| format!("metrics on {addr}: not an IP address"))?;
        let http = Arc::new(http);
        let h = http.clone();
        let thread = std::thread::Builder::new()
            .name("tiermux-metrics".into())
            .spawn(move || {
                while let Ok(req) = h.recv() {
                    let _ = answer(req, &live, &info);
                }
            })
            .map_err(|e| format!("metrics thread: {e}"))?;
        Ok(MetricsEndpoint {
            addr: bound,
            http,
            thread: Some(thread),
        })
    }
}

fn answer(
    req: tiny_http::Request,
    live: &Arc<Mutex<LiveStats>>,
    info: &VolumeInfo,
) -> std::io::Result<()> {
    let path = req.url().split('?').next().unwrap_or("");
    let response = if *req.method() != tiny_http::Method::Get {
        tiny_http::Response::from_string("only GET\n").with_status_code(405)
    } else if path != "/metrics" {
        tiny_http::Response::from_string("metrics are at /metrics\n").with_status_code(404)
    } else {
        let header =
            tiny_http::Header::from_bytes("Content-Type", CONTENT_TYPE).expect("a valid header");
        tiny_http::Response::from_string(render(live, info)).with_header(header)
    };
    req.respond(response)
}

impl Drop for MetricsEndpoint {
    fn drop(&mut self) {
        self.http.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(text: &str, line_start: &str) -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(line_start))
            .unwrap_or_else(|| panic!("no '{line_start}' in\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    }

    #[test]
    fn the_snapshot_renders_as_openmetrics() {
        let mut l = LiveStats::default();
        let mut d = tiermux_engine::device::DeviceCounters {
            read_ops: 3,
            read_bytes: 12288,
            ..Default::default()
        };
        for ns in [800, 15_000, 15_000] {
            d.read_latency.record(ns);
        }
        l.devices = vec![d, Default::default()];
        l.volume.read_hits = 7;
        l.volume.out_of_service = 0b10;
        l.controller = vec![("load_admit".into(), 0.25), ("dirty_blocks".into(), 3.0)];
        l.server.connections = 2;
        l.open_connections = 1;
        let info = VolumeInfo {
            devices: vec!["fast".into(), "slow".into()],
            block_bytes: 4096,
            policy: "nhc".into(),
            recovery_ms: 1500.0,
            recovery_journal_records: 9,
        };
        let t = render(&Arc::new(Mutex::new(l)), &info);
        assert!(t.ends_with("# EOF\n"), "{t}");
        assert_eq!(
            sample(&t, "tiermux_device_ops_total{device=\"fast\",dir=\"read\"}"),
            3.0
        );
        assert_eq!(
            sample(
                &t,
                "tiermux_device_bytes_total{device=\"fast\",dir=\"read\"}"
            ),
            12288.0
        );
        let b = |le: &str| {
            format!(
                "tiermux_device_latency_seconds_bucket{{le=\"{le}\",device=\"fast\",dir=\"read\"}}"
            )
        };
        assert_eq!(sample(&t, &b("0.000001")), 1.0, "{t}");
        assert_eq!(sample(&t, &b("0.00001")), 1.0);
        assert_eq!(sample(&t, &b("0.00002")), 3.0, "cumulative");
        assert_eq!(sample(&t, &b("+Inf")), 3.0);
        let sum = "tiermux_device_latency_seconds_sum{device=\"fast\",dir=\"read\"}";
        assert!((sample(&t, sum) - 30.8e-6).abs() < 1e-12);
        assert_eq!(
            sample(&t, "tiermux_device_out_of_service{device=\"slow\"}"),
            1.0
        );
        assert_eq!(sample(&t, "tiermux_read_hits_total"), 7.0);
        assert_eq!(sample(&t, "tiermux_dirty_bytes"), 12288.0);
        assert_eq!(
            sample(&t, "tiermux_policy_control{variable=\"load_admit\"}"),
            0.25
        );
        assert_eq!(sample(&t, "tiermux_volume_policy{policy=\"nhc\"}"), 1.0);
        assert_eq!(sample(&t, "tiermux_recovery_seconds"), 1.5);
        assert_eq!(sample(&t, "tiermux_nbd_connections_total"), 2.0);
        assert_eq!(sample(&t, "tiermux_nbd_open_connections"), 1.0);
    }
}
