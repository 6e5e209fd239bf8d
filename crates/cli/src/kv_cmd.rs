//! `tiermux kv serve CONFIG` (`tiermux kv bench` is in `kv_bench.rs`): a
//! key-value cache or store on a tiermux volume behind the Redis protocol,
//! until SIGINT or SIGTERM. The config is a volume config (devices,
//! policy) with a `[kv]` table for the machine.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Subcommand;
use serde::Deserialize;
use tiermux_engine::config::{parse_size, Listen};
use tiermux_engine::reactor::{build_reactor, precise_timers};
use tiermux_engine::{Runtime, Volume, VolumeConfig};
use tiermux_kv::{CacheConfig, Machine, MachineConfig, RegionEviction, StoreConfig};
use tiermux_server::kv::KvServer;

/// The key-value layer's commands.
#[derive(Subcommand)]
pub enum KvCmd {
    /// Serve a key-value cache or store over the Redis protocol until
    /// SIGINT or SIGTERM (GET, SET, DEL, EXISTS, MGET, PING, INFO; SET
    /// with EX/PX in cache mode, SCAN in store mode).
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
        /// For testing: keep writes not yet synced apart and, on SIGUSR1,
        /// simulate a power cut on the real files (unsynced writes lost,
        /// kept or torn) and exit with status 86. The file (relative to
        /// the data directory) counts the simulated reboots.
        #[arg(long, value_name = "STATE_FILE")]
        simulate_power_loss: Option<PathBuf>,
        /// Take control commands (`tiermux ctl get`/`set`) on this Unix
        /// socket (relative to the data directory): read and change the
        /// volume policy's parameters while serving.
        #[arg(long, value_name = "SOCKET")]
        control: Option<PathBuf>,
    },
    /// Run a named key-value workload on the cache over a simulated
    /// hierarchy, for several policies side by side (virtual time).
    Bench(crate::kv_bench::KvBenchArgs),
}

/// The `[kv]` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KvTable {
    /// "cache" or "store".
    #[serde(default = "default_mode")]
    mode: String,
    /// Where to listen (default tcp:127.0.0.1:6379).
    listen: Option<String>,
    /// The DRAM cache's budget ("64MiB").
    dram: Option<String>,
    /// Bytes of the volume the flash caches use, from its start ("932MiB";
    /// default the whole volume).
    flash: Option<String>,
    /// Share of the flash caches for the small-object cache.
    soc_share: Option<f64>,
    /// Largest item (encoded bytes) for the small-object cache.
    small_item_max_bytes: Option<u32>,
    /// Bytes of a large-object region ("1MiB").
    region: Option<String>,
    /// Regions in DRAM at once.
    region_buffers: Option<u32>,
    /// Discard (TRIM) each evicted region on the volume (default true).
    trim_regions: Option<bool>,
    /// Which region goes first: "lru" (default) or "fifo".
    region_eviction: Option<String>,
    /// Items that may wait for a large-object region ("256MiB").
    insert_queue: Option<String>,
    /// Store: bytes of each key-index checkpoint slot ("32MiB").
    index: Option<String>,
    /// Store: checkpoint after this much log ("64MiB"; default an eighth
    /// of the log).
    checkpoint_every: Option<String>,
    /// The largest device write ("1MiB"): a store's log write, or a piece
    /// of a cache's region write.
    max_write: Option<String>,
    /// Bytes of replies the server holds for all its connections together
    /// ("1GiB").
    reply_memory: Option<String>,
}

impl KvTable {
    fn cache_only(&self) -> Option<&'static str> {
        [
            (self.dram.is_some(), "dram"),
            (self.flash.is_some(), "flash"),
            (self.soc_share.is_some(), "soc_share"),
            (self.small_item_max_bytes.is_some(), "small_item_max_bytes"),
            (self.region.is_some(), "region"),
            (self.region_buffers.is_some(), "region_buffers"),
            (self.trim_regions.is_some(), "trim_regions"),
            (self.region_eviction.is_some(), "region_eviction"),
            (self.insert_queue.is_some(), "insert_queue"),
        ]
        .into_iter()
        .find_map(|(set, name)| set.then_some(name))
    }

    fn store_only(&self) -> Option<&'static str> {
        [
            (self.index.is_some(), "index"),
            (self.checkpoint_every.is_some(), "checkpoint_every"),
        ]
        .into_iter()
        .find_map(|(set, name)| set.then_some(name))
    }

    fn cache_config(&self, volume_bytes: u64) -> Result<CacheConfig> {
        let d = CacheConfig::default();
        let region = size("region", &self.region, d.region_bytes as u64)?;
        let flash_bytes = size("flash", &self.flash, volume_bytes)?;
        tiermux_kv::cache::check_flash_bytes(flash_bytes, volume_bytes)
            .map_err(|problem| anyhow::anyhow!("kv.flash: {problem}"))?;
        Ok(CacheConfig {
            volume_bytes: flash_bytes,
            dram_bytes: size("dram", &self.dram, d.dram_bytes)?,
            soc_share: self.soc_share.unwrap_or(d.soc_share),
            small_item_max_bytes: self.small_item_max_bytes.unwrap_or(d.small_item_max_bytes),
            region_bytes: u32::try_from(region).context("kv.region: larger than 4 GiB")?,
            region_buffers: self.region_buffers.unwrap_or(d.region_buffers),
            max_write_bytes: u32::try_from(size(
                "max_write",
                &self.max_write,
                d.max_write_bytes as u64,
            )?)
            .context("kv.max_write: larger than 4 GiB")?,
            trim_regions: self.trim_regions.unwrap_or(d.trim_regions),
            region_eviction: match self.region_eviction.as_deref() {
                None => d.region_eviction,
                Some(name) => RegionEviction::from_name(name).with_context(|| {
                    format!("kv.region_eviction: '{name}' is not \"lru\" or \"fifo\"")
                })?,
            },
            insert_queue_bytes: size("insert_queue", &self.insert_queue, d.insert_queue_bytes)?,
            generation: start_generation(),
        })
    }

    fn store_config(&self, volume_bytes: u64) -> Result<StoreConfig> {
        let d = StoreConfig::default();
        let max_write = size("max_write", &self.max_write, d.max_write_bytes as u64)?;
        Ok(StoreConfig {
            volume_bytes,
            index_bytes: size("index", &self.index, d.index_bytes)?,
            checkpoint_every_bytes: size("checkpoint_every", &self.checkpoint_every, 0)?,
            max_write_bytes: u32::try_from(max_write).context("kv.max_write: larger than 4 GiB")?,
            generation: start_generation(),
            ..d
        })
    }
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

/// A key-value config file, read: the volume, the machine on it, and the
/// server in front.
pub struct KvFile {
    /// The volume's config.
    pub volume: VolumeConfig,
    /// The cache's or store's config.
    pub machine: MachineConfig,
    /// Where the server listens.
    pub listen: Listen,
    /// Bytes of replies the server holds for all its connections together.
    pub reply_memory_bytes: u64,
}

/// Splits a config file into the volume's config and the `[kv]` table.
pub fn load(path: &Path, data_dir: &Path) -> Result<KvFile> {
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
    let vol_text = toml::to_string(&table).context("re-encoding the volume config")?;
    let vol = VolumeConfig::parse(&vol_text, data_dir)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let wrong = |field: &str, mode: &str| {
        anyhow::anyhow!(
            "{}: kv.{field} applies to {mode} mode, and kv.mode is '{}'",
            path.display(),
            kv.mode
        )
    };
    let machine = match kv.mode.as_str() {
        "cache" => {
            if let Some(f) = kv.store_only() {
                return Err(wrong(f, "store"));
            }
            MachineConfig::Cache(kv.cache_config(vol.size_bytes)?)
        }
        "store" => {
            if let Some(f) = kv.cache_only() {
                return Err(wrong(f, "cache"));
            }
            MachineConfig::Store(kv.store_config(vol.size_bytes)?)
        }
        m => anyhow::bail!(
            "{}: kv.mode: '{m}' is not a mode (\"cache\" or \"store\")",
            path.display()
        ),
    };
    let valid = match &machine {
        MachineConfig::Cache(c) => c.validate(),
        MachineConfig::Store(s) => s.validate(),
    };
    valid.map_err(|e| anyhow::anyhow!("{}: kv.{e}", path.display()))?;
    let listen = Listen::parse(
        kv.listen.as_deref().unwrap_or("tcp:127.0.0.1:6379"),
        data_dir,
    )?;
    let reply_memory_bytes = size(
        "reply_memory",
        &kv.reply_memory,
        tiermux_server::kv::DEFAULT_REPLY_MEMORY_BYTES,
    )?;
    if reply_memory_bytes == 0 {
        anyhow::bail!(
            "{}: kv.reply_memory: must be more than zero",
            path.display()
        );
    }
    Ok(KvFile {
        volume: vol,
        machine,
        listen,
        reply_memory_bytes,
    })
}

/// A number no earlier run used, so that a restarted cache ignores the
/// buckets an earlier one left on the volume (a store takes it only when
/// it formats).
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
            simulate_power_loss,
            control,
        } => serve(
            &config,
            listen.as_deref(),
            &data_dir,
            KvServeOptions {
                power_loss: simulate_power_loss.as_deref(),
                control: control.as_deref(),
            },
        ),
        KvCmd::Bench(args) => crate::kv_bench::run(args),
    }
}

/// What `tiermux kv serve` adds to its config.
struct KvServeOptions<'a> {
    /// With a state file: SIGUSR1 simulates a power cut.
    power_loss: Option<&'a Path>,
    /// The control socket (`tiermux ctl`).
    control: Option<&'a Path>,
}

fn serve(config: &Path, listen: Option<&str>, data_dir: &Path, opts: KvServeOptions) -> Result<()> {
    let KvFile {
        volume: vol_cfg,
        machine: machine_cfg,
        listen: mut addr,
        reply_memory_bytes,
    } = load(config, data_dir)?;
    if let Some(l) = listen {
        addr = Listen::parse(l, data_dir)?;
    }
    precise_timers();
    let mut reactor = build_reactor(vol_cfg.reactor).context("cannot set up the I/O reactor")?;
    reactor.set_spin_ns(vol_cfg.spin_us * 1000);
    let mut reactor = crate::serve::power_loss_on_sigusr1(reactor, data_dir, opts.power_loss)?;
    let vol = Volume::open(&vol_cfg, reactor.as_mut())?;
    let machine = Machine::new(machine_cfg.clone()).map_err(|e| anyhow::anyhow!("kv.{e}"))?;
    let mut server = KvServer::new(addr.clone(), machine);
    server.set_reply_memory_bytes(reply_memory_bytes);
    let shown = server
        .bind(reactor.waker())
        .with_context(|| format!("cannot listen on {addr}"))?;
    // Kept to the end: dropping it removes the socket file.
    let _control = match opts.control {
        Some(path) => {
            let path = data_dir.join(path);
            let endpoint = server
                .start_control(&path)
                .with_context(|| format!("control socket {}", path.display()))?;
            eprintln!("tiermux kv: control on {}", path.display());
            Some(endpoint)
        }
        None => None,
    };
    let mut rt = Runtime::new(vol, reactor);
    let shutdown = server.shutdown_handle();
    crate::serve::stop_on_signals(move || shutdown.trigger())?;
    let what = match &machine_cfg {
        MachineConfig::Cache(c) => format!(
            "cache mode, {} MiB DRAM, {} MiB of a {} MiB volume for small objects",
            c.dram_bytes >> 20,
            c.soc_bytes() >> 20,
            c.volume_bytes >> 20
        ),
        MachineConfig::Store(s) => format!(
            "store mode, a {} MiB value log, key index slots of {} MiB",
            s.layout().log_bytes >> 20,
            s.index_bytes >> 20
        ),
    };
    eprintln!(
        "tiermux kv: {what}, policy {}; up to {} clients, {} MiB of replies for them all",
        vol_cfg.policy,
        server.max_clients(),
        reply_memory_bytes >> 20
    );
    println!("tiermux kv: listening on {shown}");
    use std::io::Write;
    std::io::stdout().flush().ok();
    let stats = server.run(&mut rt)?;
    let c = stats.summary;
    eprintln!(
        "tiermux kv: {} connections ({} refused as over the limit), {} commands ({} bad), {} protocol errors; GET {} (DRAM hits {}, volume hits {}), SET {}, {} storage errors",
        stats.connections, stats.connections_refused, stats.commands, stats.bad_commands, stats.protocol_errors, c.gets, c.dram_hits, c.flash_hits, c.sets, stats.io_errors
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples")
            .join(name)
    }

    #[test]
    fn the_example_configs_load() {
        let dir = std::env::temp_dir();
        let cache = load(&example("kv-cache.toml"), &dir)
            .expect("kv-cache.toml")
            .machine;
        let MachineConfig::Cache(c) = cache else {
            panic!("a cache")
        };
        assert_eq!(c.insert_queue_bytes, 16 << 20);
        assert_eq!(c.region_eviction, RegionEviction::Lru);
        let KvFile {
            machine: store,
            listen,
            ..
        } = load(&example("kv-store.toml"), &dir).expect("kv-store.toml");
        let MachineConfig::Store(s) = store else {
            panic!("a store")
        };
        assert_eq!(
            (s.index_bytes, s.checkpoint_every_bytes),
            (32 << 20, 128 << 20)
        );
        assert_eq!(listen.to_string(), "tcp:127.0.0.1:6380");
    }

    #[test]
    fn an_unknown_region_eviction_is_named() {
        let scratch = tempfile::tempdir().expect("dir");
        let dir = scratch.path();
        let text = std::fs::read_to_string(example("kv-cache.toml")).expect("example");
        let path = dir.join("bad.toml");
        let bad = text.replace("region_eviction = \"lru\"", "region_eviction = \"lfu\"");
        assert_ne!(bad, text, "the example sets region_eviction");
        std::fs::write(&path, bad).expect("write");
        let Err(e) = load(&path, dir) else {
            panic!("an eviction named lfu was taken")
        };
        let err = format!("{e:#}");
        assert!(err.contains("kv.region_eviction: 'lfu'"), "{err}");
        let fifo = text.replace("region_eviction = \"lru\"", "region_eviction = \"fifo\"");
        std::fs::write(&path, fifo).expect("write");
        let cache = load(&path, dir).expect("fifo").machine;
        let MachineConfig::Cache(c) = cache else {
            panic!("a cache")
        };
        assert_eq!(c.region_eviction, RegionEviction::Fifo);
    }

    /// `examples/kv-cache.toml` loaded from `dir`, its `[kv]` table's `key`
    /// set to `value` (a TOML value such as `"16MiB"`), or left out when
    /// `value` is `None`.
    fn load_cache_example(dir: &Path, key: &str, value: Option<&str>) -> Result<KvFile> {
        let text = std::fs::read_to_string(example("kv-cache.toml")).expect("example");
        let mut text: String = text
            .lines()
            .filter(|l| l.split('=').next().map(str::trim) != Some(key))
            .map(|l| format!("{l}\n"))
            .collect();
        if let Some(v) = value {
            text = text.replace("[kv]", &format!("[kv]\n{key} = {v}"));
        }
        let path = dir.join("kv-cache.toml");
        std::fs::write(&path, text).expect("write");
        load(&path, dir)
    }

    #[test]
    fn the_flash_cache_takes_the_size_given_within_the_volume() {
        let scratch = tempfile::tempdir().expect("dir");
        let dir = scratch.path();
        let KvFile {
            volume: vol,
            machine: whole,
            ..
        } = load_cache_example(dir, "flash", None).expect("the example");
        let MachineConfig::Cache(whole) = whole else {
            panic!("a cache")
        };
        assert_eq!(whole.volume_bytes, vol.size_bytes);
        let part = load_cache_example(dir, "flash", Some("\"16MiB\""))
            .expect("16MiB")
            .machine;
        let MachineConfig::Cache(part) = part else {
            panic!("a cache")
        };
        assert_eq!(part.volume_bytes, 16 << 20);
        for bad in ["1TiB", "4097B", "0B"] {
            let value = format!("\"{bad}\"");
            let Err(e) = load_cache_example(dir, "flash", Some(&value)) else {
                panic!("flash = {bad} was taken")
            };
            let err = format!("{e:#}");
            assert!(err.contains("kv.flash:"), "{bad}: {err}");
        }
    }

    /// The server's reply memory defaults to 1 GiB, takes a size, and
    /// refuses zero or a word by name.
    #[test]
    fn reply_memory_is_a_positive_size() {
        let scratch = tempfile::tempdir().expect("dir");
        let dir = scratch.path();
        let bytes = |value: Option<&str>| {
            load_cache_example(dir, "reply_memory", value).map(|f| f.reply_memory_bytes)
        };
        assert_eq!(bytes(None).expect("default"), 1 << 30);
        assert_eq!(bytes(Some("\"256MiB\"")).expect("256MiB"), 256 << 20);
        for (bad, says) in [("0B", "must be more than zero"), ("lots", "is not a size")] {
            let value = format!("\"{bad}\"");
            let Err(e) = bytes(Some(&value)) else {
                panic!("reply_memory = {bad} was taken")
            };
            let err = format!("{e:#}");
            assert!(
                err.contains("kv.reply_memory:") && err.contains(says),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn a_setting_of_the_other_mode_is_named() {
        let scratch = tempfile::tempdir().expect("dir");
        let dir = scratch.path();
        let text = std::fs::read_to_string(example("kv-store.toml")).expect("example");
        for (from, to, says) in [
            (
                "index = \"32MiB\"",
                "dram = \"1MiB\"",
                "kv.dram applies to cache mode",
            ),
            (
                "mode = \"store\"",
                "mode = \"cache\"",
                "kv.index applies to store mode",
            ),
            (
                "mode = \"store\"",
                "mode = \"stor\"",
                "'stor' is not a mode",
            ),
            (
                "max_write = \"1MiB\"",
                "max_write = \"1KiB\"",
                "kv.max_write_bytes: 1024",
            ),
        ] {
            let path = dir.join("bad.toml");
            std::fs::write(&path, text.replace(from, to)).expect("write");
            let Err(e) = load(&path, dir) else {
                panic!("{to} was taken")
            };
            let err = format!("{e:#}");
            assert!(err.contains(says), "{err}");
        }
    }
}
