//! `tiermux kv serve CONFIG` (`tiermux kv bench` is in `kv_bench.rs`): a key-value cache on a tiermux volume behind
//! the Redis protocol, until SIGINT or SIGTERM. The config is a volume
//! config (devices, policy) with a `[kv]` table for the cache.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Subcommand;
use serde::Deserialize;
use tiermux_engine::config::{parse_size, Listen};
use tiermux_engine::reactor::{build_reactor, precise_timers};
use tiermux_engine::{Runtime, Volume, VolumeConfig};
use tiermux_kv::{Cache, CacheConfig};
use tiermux_server::kv::KvServer;

/// The key-value layer's commands.
#[derive(Subcommand)]
pub enum KvCmd {
    /// Serve a key-value cache over the Redis protocol until SIGINT or
    /// SIGTERM (GET, SET with EX/PX, DEL, EXISTS, MGET, PING, INFO).
    Serve {
        /// A volume config with a `[kv]` table.
        config: PathBuf,
        /// Listen here instead of the `[kv]` table's `listen`
        /// (tcp:HOST:PORT, or unix:PATH).
        #[arg(long)]
        listen: Option<String>,
        /// Directory that relative paths in the config are taken from.
        #[arg(long, default_value = ".")]
        data_dir: PathBuf,
    },
    /// Run a named key-value workload on the cache over a simulated
    /// hierarchy, for several policies side by side (virtual time).
    Bench(crate::kv_bench::KvBenchArgs),
}

/// The `[kv]` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KvTable {
    /// Only "cache" for now.
    #[serde(default = "default_mode")]
    mode: String,
    /// Where to listen (default tcp:127.0.0.1:6379).
    listen: Option<String>,
    /// The DRAM cache's budget ("64MiB").
    dram: Option<String>,
    /// Share of the volume for the small-object cache.
    soc_share: Option<f64>,
    /// Largest item (encoded bytes) for the small-object cache.
    small_item_max_bytes: Option<u32>,
    /// Bytes of a large-object region ("1MiB").
    region: Option<String>,
    /// Regions in DRAM at once.
    region_buffers: Option<u32>,
}

fn default_mode() -> String {
    "cache".into()
}

fn size(field: &str, v: &Option<String>, default: u64) -> Result<u64> {
    match v {
        None => Ok(default),
        Some(s) => {
            parse_size(s).with_context(|| format!("kv.{field}: '{s}' is not a size such as 64MiB"))
        }
    }
}

/// Splits a config file into the volume's config and the `[kv]` table.
pub fn load(path: &Path, data_dir: &Path) -> Result<(VolumeConfig, CacheConfig, Listen)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut table: toml::Table =
        toml::from_str(&text).with_context(|| format!("{}", path.display()))?;
    let kv = table
        .remove("kv")
        .with_context(|| format!("{}: no [kv] table", path.display()))?;
    let kv: KvTable = kv
        .try_into()
        .with_context(|| format!("{}: [kv]", path.display()))?;
    anyhow::ensure!(
        kv.mode == "cache",
        "{}: kv.mode: '{}' is not a mode (\"cache\")",
        path.display(),
        kv.mode
    );
    let vol_text = toml::to_string(&table).context("re-encoding the volume config")?;
    let vol = VolumeConfig::parse(&vol_text, data_dir)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let d = CacheConfig::default();
    let region = size("region", &kv.region, d.region_bytes as u64)?;
    let cache = CacheConfig {
        volume_bytes: vol.size_bytes,
        dram_bytes: size("dram", &kv.dram, d.dram_bytes)?,
        soc_share: kv.soc_share.unwrap_or(d.soc_share),
        small_item_max_bytes: kv.small_item_max_bytes.unwrap_or(d.small_item_max_bytes),
        region_bytes: u32::try_from(region).context("kv.region: larger than 4 GiB")?,
        region_buffers: kv.region_buffers.unwrap_or(d.region_buffers),
        generation: start_generation(),
    };
    cache
        .validate()
        .map_err(|e| anyhow::anyhow!("{}: kv.{e}", path.display()))?;
    let listen = Listen::parse(
        kv.listen.as_deref().unwrap_or("tcp:127.0.0.1:6379"),
        data_dir,
    )?;
    Ok((vol, cache, listen))
}

/// A number no earlier run used, so that a restarted cache ignores the
/// buckets an earlier one left on the volume.
fn start_generation() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    tiermux_core::rng::splitmix64(t ^ (std::process::id() as u64) << 40)
}

/// Runs a `kv` command.
pub fn run(cmd: KvCmd) -> Result<()> {
    match cmd {
        KvCmd::Serve {
            config,
            listen,
            data_dir,
        } => serve(&config, listen.as_deref(), &data_dir),
        KvCmd::Bench(args) => crate::kv_bench::run(args),
    }
}

fn serve(config: &Path, listen: Option<&str>, data_dir: &Path) -> Result<()> {
    let (vol_cfg, cache_cfg, mut addr) = load(config, data_dir)?;
    if let Some(l) = listen {
        addr = Listen::parse(l, data_dir)?;
    }
    precise_timers();
    let mut reactor = build_reactor(vol_cfg.reactor).context("cannot set up the I/O reactor")?;
    let vol = Volume::open(&vol_cfg, reactor.as_mut())?;
    let cache = Cache::new(cache_cfg.clone()).map_err(|e| anyhow::anyhow!("kv.{e}"))?;
    let mut server = KvServer::new(addr.clone(), cache);
    let shown = server
        .bind(reactor.waker())
        .with_context(|| format!("cannot listen on {addr}"))?;
    let mut rt = Runtime::new(vol, reactor);
    let shutdown = server.shutdown_handle();
    crate::serve::stop_on_signals(move || shutdown.trigger())?;
    eprintln!(
        "tiermux kv: cache mode, {} MiB DRAM, {} MiB of a {} MiB volume for small objects, policy {}",
        cache_cfg.dram_bytes >> 20,
        cache_cfg.soc_bytes() >> 20,
        cache_cfg.volume_bytes >> 20,
        vol_cfg.policy
    );
    println!("tiermux kv: listening on {shown}");
    use std::io::Write;
    std::io::stdout().flush().ok();
    let stats = server.run(&mut rt)?;
    let c = stats.cache;
    eprintln!(
        "tiermux kv: {} connections, {} commands ({} bad), {} protocol errors; GET {} (DRAM hits {}, flash hits {}), SET {}, {} storage errors",
        stats.connections, stats.commands, stats.bad_commands, stats.protocol_errors, c.gets, c.dram_hits, c.flash_hits, c.sets, stats.io_errors
    );
    Ok(())
}
