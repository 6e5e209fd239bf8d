//! `tiermux serve`: a volume behind an NBD socket until SIGINT or SIGTERM.

use std::path::Path;

use anyhow::{Context, Result};
use tiermux_engine::config::Listen;
use tiermux_engine::reactor::{build_reactor, precise_timers};
use tiermux_engine::volume::MAX_REQUEST_BYTES;
use tiermux_engine::{Volume, VolumeConfig};
use tiermux_server::proto::Export;
use tiermux_server::Server;

/// Runs the server for `config`; `socket` overrides the config's listener
/// with a Unix socket, and relative paths are taken from `data_dir`.
pub fn serve(config: &Path, socket: Option<&Path>, data_dir: &Path) -> Result<()> {
    let mut cfg = VolumeConfig::load(config, data_dir)?;
    if let Some(s) = socket {
        cfg.listen = Listen::Unix(data_dir.join(s));
    }
    precise_timers();
    let mut reactor = build_reactor(cfg.reactor).context("cannot set up the I/O reactor")?;
    let mut vol = Volume::open(&cfg)?;
    let rec = vol.recovery().clone();
    let mut server = Server::new(
        cfg.listen.clone(),
        Export {
            name: cfg.export.clone(),
            size_bytes: vol.size_bytes(),
            preferred_block: vol.block_size(),
            max_request: MAX_REQUEST_BYTES,
        },
    );
    let shown = server
        .bind(reactor.waker())
        .with_context(|| format!("cannot listen on {}", cfg.listen))?;
    let shutdown = server.shutdown_handle();
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .context("cannot install signal handlers")?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            shutdown.trigger();
        }
    });
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
                d.profile_name
                    .as_ref()
                    .map(|p| format!(", emulated {p}"))
                    .unwrap_or_default()
            )
        })
        .collect();
    eprintln!(
        "tiermux: volume of {} MiB in {}-byte blocks, policy {}, {} reactor; devices: {}",
        vol.size_bytes() >> 20,
        vol.block_size(),
        vol.policy().name(),
        reactor.kind(),
        devices.join(", ")
    );
    if rec.fresh {
        eprintln!("tiermux: new metadata in {}", cfg.metadata_dir.display());
    } else {
        eprintln!(
            "tiermux: recovered {} placed blocks ({} from the checkpoint, {} journal records, {} torn bytes dropped) in {:.1} ms",
            rec.entries, rec.checkpoint_entries, rec.journal_records, rec.discarded_bytes, rec.elapsed_ms
        );
    }
    println!("tiermux: listening on {shown}, export '{}'", cfg.export);
    use std::io::Write;
    std::io::stdout().flush().ok();
    let stats = server.run(&mut vol, reactor.as_mut())?;
    let st = vol.stats();
    let (records, checkpoints) = vol.metadata_counters();
    let per_device: Vec<String> = vol
        .devices()
        .iter()
        .map(|d| {
            format!(
                "{} read {} MiB, wrote {} MiB",
                d.name,
                d.counters.read_bytes >> 20,
                d.counters.write_bytes >> 20
            )
        })
        .collect();
    eprintln!(
        "tiermux: stopped after {} requests on {} connections ({} bad requests, {} protocol violations); read hits {} misses {}; {}; {} metadata records, {} checkpoints (the last at exit)",
        st.requests,
        stats.connections,
        stats.bad_requests,
        stats.protocol_violations,
        st.read_hits,
        st.read_misses,
        per_device.join(", "),
        records,
        checkpoints
    );
    Ok(())
}
