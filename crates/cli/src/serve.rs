//! `tiermux serve`: a volume behind an NBD socket until SIGINT or SIGTERM.

use std::path::Path;

use anyhow::{Context, Result};
use std::sync::{Arc, Mutex};
use tiermux_engine::config::Listen;

use tiermux_engine::reactor::power_loss::PowerLossReactor;
use tiermux_engine::reactor::{build_reactor, precise_timers, Reactor};
use tiermux_engine::volume::MAX_REQUEST_BYTES;
use tiermux_engine::{Runtime, Volume, VolumeConfig};
use tiermux_server::metrics::{MetricsEndpoint, VolumeInfo};
use tiermux_server::proto::Export;
use tiermux_server::server::LiveStats;
use tiermux_server::{Server, Shutdown};

/// A volume on its event loop and a bound server, ready to run.
struct Ready {
    rt: Runtime,
    server: Server,
    /// The address actually bound ("unix:PATH" or "tcp:ADDR").
    shown: String,
}

/// Opens the volume for `cfg`, builds its reactor (wrapped by `wrap`) and
/// binds its listener.
fn open(
    cfg: &VolumeConfig,
    wrap: impl FnOnce(Box<dyn Reactor>) -> Result<Box<dyn Reactor>>,
) -> Result<Ready> {
    precise_timers();
    let mut reactor = build_reactor(cfg.reactor).context("cannot set up the I/O reactor")?;
    reactor.set_spin_ns(cfg.spin_us * 1000);
    let mut reactor = wrap(reactor)?;
    let vol = Volume::open(cfg, reactor.as_mut())?;
    let all_files_in_memory = vol.devices().iter().all(|d| d.memory_backed);
    let mut server = Server::new(
        cfg.listen.clone(),
        Export {
            name: cfg.export.clone(),
            size_bytes: vol.size_bytes(),
            preferred_block: vol.block_size(),
            max_request: MAX_REQUEST_BYTES,
            structured_replies: cfg.offers_structured_replies(all_files_in_memory),
            read_ahead: cfg.reads_ahead(all_files_in_memory),
        },
    );
    if let Some(bytes) = cfg.request_memory_bytes {
        server.set_request_memory_bytes(bytes);
    }
    let shown = server
        .bind(reactor.waker())
        .with_context(|| format!("cannot listen on {}", cfg.listen))?;
    Ok(Ready {
        rt: Runtime::new(vol, reactor),
        server,
        shown,
    })
}

/// A volume served on a background thread of this process, for callers
/// that measure it (`tiermux bench`).
pub struct Background {
    /// The NBD URI clients connect to.
    pub uri: String,
    shutdown: Shutdown,
    live: Arc<Mutex<LiveStats>>,
    thread: std::thread::JoinHandle<Result<()>>,
}

impl Background {
    /// Opens and serves `cfg` on a new thread; returns once it listens.
    pub fn start(cfg: VolumeConfig) -> Result<Background> {
        let (tx, rx) = std::sync::mpsc::channel();
        let export = cfg.export.clone();
        let thread = std::thread::Builder::new()
            .name("tiermux-serve".into())
            .spawn(move || -> Result<()> {
                let mut ready = match open(&cfg, Ok) {
                    Ok(r) => r,
                    Err(e) => {
                        let msg = format!("{e:#}");
                        let _ = tx.send(Err(msg.clone()));
                        anyhow::bail!(msg);
                    }
                };
                let _ = tx.send(Ok((
                    ready.shown.clone(),
                    ready.server.shutdown_handle(),
                    ready.server.live_stats(),
                )));
                ready.server.run(&mut ready.rt)?;
                Ok(())
            })?;
        let (listen, shutdown, live) = match rx.recv() {
            Ok(Ok(x)) => x,
            Ok(Err(msg)) => anyhow::bail!(msg),
            Err(_) => anyhow::bail!("the server thread ended before listening"),
        };
        let uri = match listen.strip_prefix("unix:") {
            Some(path) => format!("nbd+unix:///{export}?socket={path}"),
            None => format!("nbd://{}/{export}", listen.trim_start_matches("tcp:")),
        };
        Ok(Background {
            uri,
            shutdown,
            live,
            thread,
        })
    }

    /// The latest published snapshot.
    pub fn live(&self) -> LiveStats {
        self.live.lock().expect("live stats").clone()
    }

    /// Stops the server (in-flight requests finish, the volume
    /// checkpoints) and returns the final snapshot.
    pub fn stop(self) -> Result<LiveStats> {
        self.shutdown.trigger();
        match self.thread.join() {
            Ok(r) => r?,
            Err(_) => anyhow::bail!("the server thread panicked"),
        }
        Ok(self.live.lock().expect("live stats").clone())
    }
}

/// What `tiermux serve` adds to a volume config.
pub struct ServeOptions<'a> {
    /// A Unix socket to listen on instead of the config's listener.
    pub socket: Option<&'a Path>,
    /// With a state file: writes not yet synced are kept apart and SIGUSR1
    /// simulates a power cut (`reactor/power_loss.rs`).
    pub power_loss: Option<&'a Path>,
    /// HOST:PORT of the metrics endpoint.
    pub metrics: Option<&'a str>,
    /// The control socket (`tiermux ctl`).
    pub control: Option<&'a Path>,
}

/// `r` as it is, or with a state file (relative to `data_dir`) wrapped so
/// that writes not yet synced are kept apart and SIGUSR1 simulates a power
/// cut on the real files (`reactor/power_loss.rs`), for `--simulate-power-loss`.
pub fn power_loss_on_sigusr1(
    r: Box<dyn Reactor>,
    data_dir: &Path,
    state: Option<&Path>,
) -> Result<Box<dyn Reactor>> {
    let Some(state) = state else {
        return Ok(r);
    };
    let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, cut.clone())
        .context("cannot install the SIGUSR1 handler")?;
    let state = data_dir.join(state);
    let wrapped = PowerLossReactor::new(r, state.clone(), cut)
        .with_context(|| format!("power-loss state {}", state.display()))?;
    eprintln!("tiermux: simulating power loss: SIGUSR1 cuts the power (unsynced writes are lost, kept or torn)");
    Ok(Box::new(wrapped))
}

/// Runs the server for `config`; relative paths are taken from `data_dir`.
pub fn serve(config: &Path, data_dir: &Path, opts: ServeOptions<'_>) -> Result<()> {
    let ServeOptions {
        socket,
        power_loss,
        metrics,
        control,
    } = opts;
    let mut cfg = VolumeConfig::load(config, data_dir)?;
    if let Some(s) = socket {
        cfg.listen = Listen::Unix(data_dir.join(s));
    }
    let wrap = |r: Box<dyn Reactor>| power_loss_on_sigusr1(r, data_dir, power_loss);
    let Ready {
        mut rt,
        mut server,
        shown,
    } = open(&cfg, wrap)?;
    let vol = rt.volume();
    let shutdown = server.shutdown_handle();
    stop_on_signals(move || shutdown.trigger())?;
    log_start(vol, rt.reactor_kind(), &cfg);
    let metrics = match metrics {
        Some(addr) => Some(
            MetricsEndpoint::start(addr, server.live_stats(), volume_info(vol))
                .map_err(anyhow::Error::msg)?,
        ),
        None => None,
    };
    let control = match control {
        Some(path) => {
            let path = data_dir.join(path);
            let endpoint = server
                .start_control(&path, volume_info(vol))
                .with_context(|| format!("control socket {}", path.display()))?;
            Some(endpoint)
        }
        None => None,
    };
    let mut metrics_note = metrics
        .as_ref()
        .map(|m| format!(", metrics on http://{}/metrics", m.addr))
        .unwrap_or_default();
    if let Some(c) = &control {
        metrics_note += &format!(", control on {}", c.path.display());
    }
    println!(
        "tiermux: listening on {shown}, export '{}'{metrics_note}",
        cfg.export
    );
    use std::io::Write;
    std::io::stdout().flush().ok();
    let stats = server.run(&mut rt)?;
    log_stop(rt.volume(), &stats);
    Ok(())
}

/// Sends `line` to the control socket `socket` and prints the answer; an
/// answered error is this command's error.
pub fn ctl(socket: &Path, line: &str) -> Result<()> {
    let answer = tiermux_server::control::request(socket, line)
        .with_context(|| format!("control socket {}", socket.display()))?;
    match answer {
        Ok(text) => {
            print!("{text}");
            Ok(())
        }
        Err(e) => anyhow::bail!("{e}"),
    }
}

/// What the metrics say of the volume beside its live counters.
fn volume_info(vol: &Volume) -> VolumeInfo {
    VolumeInfo {
        devices: vol.devices().iter().map(|d| d.name.clone()).collect(),
        block_bytes: vol.block_size() as u64,
        policy: vol.policy().name().to_string(),
        recovery_ms: vol.recovery().elapsed_ms,
        recovery_journal_records: vol.recovery().journal_records,
    }
}

/// Calls `stop` (once) on the first SIGINT or SIGTERM.
pub fn stop_on_signals(stop: impl FnOnce() + Send + 'static) -> Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .context("cannot install signal handlers")?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            stop();
        }
    });
    Ok(())
}

/// Logs the volume's devices, policy and what recovery found.
fn log_start(vol: &Volume, reactor_kind: &str, cfg: &VolumeConfig) {
    let rec = vol.recovery();
    let devices: Vec<String> = vol
        .devices()
        .iter()
        .map(|d| {
            format!(
                "{} ({}, {} MiB{}{}{})",
                d.name,
                d.path.display(),
                d.size_bytes >> 20,
                if d.direct { ", O_DIRECT" } else { "" },
                if d.memory_backed {
                    ", in memory: I/O inline"
                } else {
                    ""
                },
                d.layers()
                    .iter()
                    .map(|l| format!(", {l}"))
                    .collect::<String>()
            )
        })
        .collect();
    eprintln!(
        "tiermux: volume of {} MiB in {}-byte blocks, policy {}, {} reactor; devices: {}",
        vol.size_bytes() >> 20,
        vol.block_size(),
        vol.policy().name(),
        reactor_kind,
        devices.join(", ")
    );
    if rec.fresh {
        eprintln!("tiermux: new metadata in {}", cfg.metadata_dir.display());
    } else {
        eprintln!(
            "tiermux: recovered {} placed blocks ({} from the checkpoint, {} journal records, {} torn bytes dropped) in {:.1} ms",
            rec.entries, rec.checkpoint_entries, rec.journal_records, rec.discarded_bytes, rec.elapsed_ms
        );
        if rec.rebooted {
            eprintln!(
                "tiermux: the machine rebooted since the last run: recovered the state of the last durable mark, {} later journal records not replayed (writes acknowledged before the last completed FLUSH or with FUA are all there)",
                rec.unmarked_records
            );
        }
    }
}

/// Logs what the server and the volume did.
fn log_stop(vol: &Volume, stats: &tiermux_server::server::ServerStats) {
    let st = vol.stats();
    let (records, checkpoints) = vol.metadata_counters();
    let per_device: Vec<String> = vol
        .devices()
        .iter()
        .map(|d| {
            format!(
                "{} read {} MiB in {} operations, wrote {} MiB in {}",
                d.name,
                d.counters.read_bytes >> 20,
                d.counters.read_ops,
                d.counters.write_bytes >> 20,
                d.counters.write_ops
            )
        })
        .collect();
    eprintln!(
        "tiermux: stopped after {} requests on {} connections ({} bad requests, {} protocol violations, {} refused while too many handshakes waited, {} as over the limit; {} reads ahead, {} of them answered a client); read hits {} misses {}; {}; {} metadata records, {} checkpoints (the last at exit); {} marks, {} device writes waited for one; {} device operations merged {} blocks; {} device errors",
        st.requests,
        stats.connections,
        stats.bad_requests,
        stats.protocol_violations,
        stats.handshakes_refused,
        stats.connections_refused,
        stats.reads_ahead,
        stats.reads_ahead_used,
        st.read_hits,
        st.read_misses,
        per_device.join(", "),
        records,
        checkpoints,
        st.marks,
        st.writes_held,
        st.merged_ops,
        st.merged_blocks,
        st.device_errors
    );
    if st.discards + st.discards_failed + st.discards_skipped > 0 {
        eprintln!(
            "tiermux: {} discards freed {} blocks; {} freed blocks not discarded (reused, or still being read); {} discards failed",
            st.discards, st.discarded_blocks, st.discards_skipped, st.discards_failed
        );
    }
    if st.device_errors > 0 {
        eprintln!("tiermux: {}", device_error_summary(vol, &st));
    }
}

/// What device errors did: reads tried again, requests failed, entries
/// repaired, devices out of service and the blocks at risk on them.
fn device_error_summary(
    vol: &tiermux_engine::Volume,
    st: &tiermux_engine::volume::VolumeStats,
) -> String {
    let mut out = format!(
        "device errors: {} failed, {} block reads tried again, {} requests answered with an error, {} placements repaired",
        st.device_errors, st.read_retries, st.failed_requests, st.repairs
    );
    for (d, dev) in vol.devices().iter().enumerate() {
        if st.out_of_service & (1 << d) != 0 {
            let at_risk = vol.at_risk_blocks(d as u8);
            out += &format!("; device '{}' out of service", dev.name);
            if at_risk > 0 {
                out += &format!(", AT RISK: {at_risk} blocks whose newest data is only on it");
            }
        }
    }
    out
}
