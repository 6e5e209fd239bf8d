//! The `[kv]` table of a run: the simulator drives the key-value layer's
//! cache (`tiermux-kv`, CacheLib's shape) or store (Orthus-KV's shape)
//! over the volume instead of issuing block requests. The run's `[workload]` then chooses keys: its
//! items are keys (`working_set_blocks` is the number of keys), its
//! `write_ratio` is the share of SETs, and its pattern, scrambling and
//! hot-spot shift apply to keys as they would to blocks.

use serde::{Deserialize, Serialize};

use tiermux_kv::cache::CacheConfig;
use tiermux_kv::{Machine, MachineConfig, RegionEviction, StoreConfig};

use crate::cachebench::ValueSizes;
use crate::config::ConfigError;

/// A key-value cache or store and the mix of commands its clients send.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvSpec {
    /// "cache" (CacheLib's shape) or "store" (Orthus-KV's: a value log and
    /// a key index; misses do not happen, expiry and lookaside do not
    /// apply). The DRAM and object-cache settings are the cache's; the
    /// store's are `index_bytes` and the scans.
    #[serde(default = "default_mode")]
    pub mode: String,
    /// Store: bytes of each key-index checkpoint slot (0: a sixteenth of
    /// the volume).
    #[serde(default)]
    pub index_bytes: u64,
    /// Bytes of the largest device write: a store's log write (a group
    /// commit), or a piece of a cache's region write (CacheBench's
    /// `deviceMaxWriteSize`; the pieces go one after another).
    #[serde(default = "default_max_write_bytes")]
    pub max_write_bytes: u32,
    /// Store: share of commands that SCAN `scan_length` keys from a key of
    /// the workload, with their values.
    #[serde(default)]
    pub scan: f64,
    /// Store: keys a SCAN reads.
    #[serde(default = "default_scan_length")]
    pub scan_length: u32,
    /// The DRAM cache's budget, bytes.
    #[serde(default = "default_dram_bytes")]
    pub dram_bytes: u64,
    /// Cache: bytes of the volume the flash caches use, from its start
    /// (CacheLib's `nvmCacheSizeMB`); 0, the default: the whole volume.
    /// The rest of the volume is free capacity the hierarchy policy may
    /// use (MOST's mirrored class counts against it).
    #[serde(default)]
    pub flash_bytes: u64,
    /// The share of the flash caches given to the small-object cache.
    #[serde(default = "default_soc_share")]
    pub soc_share: f64,
    /// Items whose encoding is at most this go to the small-object cache.
    #[serde(default = "default_small_item_max_bytes")]
    pub small_item_max_bytes: u32,
    /// Bytes of a large-object region.
    #[serde(default = "default_region_bytes")]
    pub region_bytes: u32,
    /// Regions held in DRAM at once.
    #[serde(default = "default_region_buffers")]
    pub region_buffers: u32,
    /// Discard (TRIM) each evicted large-object region on the volume
    /// before reusing it, so that tiering sees its next write as new data.
    #[serde(default = "default_true")]
    pub trim_regions: bool,
    /// Which large-object region goes when a clean one is needed: "lru"
    /// (the least recently read, CacheLib's default) or "fifo" (the
    /// oldest written).
    #[serde(default = "default_region_eviction")]
    pub region_eviction: String,
    /// Bytes of items that may wait for a large-object region (CacheLib's
    /// parcel memory); past it, items DRAM evicts are dropped.
    #[serde(default = "default_insert_queue_bytes")]
    pub insert_queue_bytes: u64,
    /// Smallest key, bytes (each key's size is fixed by a hash of its number).
    #[serde(default = "default_key_bytes")]
    pub key_bytes_min: u32,
    /// Largest key, bytes.
    #[serde(default = "default_key_bytes")]
    pub key_bytes_max: u32,
    /// Smallest value, bytes (sizes are uniform between min and max and
    /// drawn again at every SET).
    #[serde(default = "default_value_bytes")]
    pub value_bytes_min: u32,
    /// Largest value, bytes.
    #[serde(default = "default_value_bytes")]
    pub value_bytes_max: u32,
    /// Draw value sizes from a CacheBench production config's distribution
    /// instead (`flat-kvcache`, `graph-leader`, `kvcache-reg` or
    /// `kvcache-wc`, [`crate::cachebench`]); `value_bytes_min` and
    /// `value_bytes_max` are then not used.
    #[serde(default)]
    pub value_sizes: Option<String>,
    /// Share of commands that GET a key never set (CacheBench's "LoneGet").
    #[serde(default)]
    pub lone_get: f64,
    /// Share of commands that SET a key never set before ("LoneSet").
    #[serde(default)]
    pub lone_set: f64,
    /// Share of commands that DELete a key of the workload.
    #[serde(default)]
    pub del: f64,
    /// A GET that misses is followed, after `backing_latency_us`, by a SET
    /// of the key, by the same client (a lookaside cache).
    #[serde(default = "default_true")]
    pub lookaside: bool,
    /// The backing store's latency for a lookaside miss, µs.
    #[serde(default)]
    pub backing_latency_us: f64,
    /// Every SET is a read-modify-write: a GET of the key first (YCSB-F).
    #[serde(default)]
    pub read_modify_write: bool,
    /// Time a command spends in the cache's code before it reaches the
    /// DRAM cache, µs (counted in its latency).
    #[serde(default = "default_op_cpu_us")]
    pub op_cpu_us: f64,
    /// CPU cores the commands' `op_cpu_us` share: a command waits for a
    /// free core (default: as many as there are clients, so none waits).
    #[serde(default)]
    pub cpu_cores: Option<u32>,
    /// Set every key, coldest first, before the run starts (in zero time;
    /// the volume blocks written first are placed by the policy's warm-up).
    #[serde(default = "default_true")]
    pub prefill: bool,
}

fn default_mode() -> String {
    "cache".into()
}
fn default_max_write_bytes() -> u32 {
    StoreConfig::default().max_write_bytes
}
fn default_scan_length() -> u32 {
    50
}
fn default_dram_bytes() -> u64 {
    CacheConfig::default().dram_bytes
}
fn default_soc_share() -> f64 {
    CacheConfig::default().soc_share
}
fn default_small_item_max_bytes() -> u32 {
    CacheConfig::default().small_item_max_bytes
}
fn default_region_bytes() -> u32 {
    CacheConfig::default().region_bytes
}
fn default_region_buffers() -> u32 {
    CacheConfig::default().region_buffers
}
fn default_region_eviction() -> String {
    "lru".into()
}
fn default_insert_queue_bytes() -> u64 {
    CacheConfig::default().insert_queue_bytes
}
fn default_key_bytes() -> u32 {
    16
}
fn default_value_bytes() -> u32 {
    1024
}
fn default_true() -> bool {
    true
}
fn default_op_cpu_us() -> f64 {
    2.0
}

impl Default for KvSpec {
    fn default() -> Self {
        toml::from_str("").expect("every field has a default")
    }
}

/// The smallest value a run may set: room for the key number and version
/// the checker reads back.
pub const MIN_VALUE_BYTES: u32 = 16;

fn check(field: &str, ok: bool, message: impl FnOnce() -> String) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError::new(format!("kv.{field}"), message()))
    }
}

impl KvSpec {
    /// Bytes of a volume of `volume_bytes` that the flash caches use.
    pub fn flash_cache_bytes(&self, volume_bytes: u64) -> u64 {
        match self.flash_bytes {
            0 => volume_bytes,
            n => n,
        }
    }

    /// The cache over a volume of `volume_bytes`.
    pub fn cache_config(&self, volume_bytes: u64, seed: u64) -> CacheConfig {
        CacheConfig {
            volume_bytes: self.flash_cache_bytes(volume_bytes),
            dram_bytes: self.dram_bytes,
            soc_share: self.soc_share,
            small_item_max_bytes: self.small_item_max_bytes,
            region_bytes: self.region_bytes,
            region_buffers: self.region_buffers,
            max_write_bytes: self.max_write_bytes,
            trim_regions: self.trim_regions,
            region_eviction: RegionEviction::from_name(&self.region_eviction).unwrap_or_default(),
            insert_queue_bytes: self.insert_queue_bytes,
            generation: seed | 1,
        }
    }

    /// The store over a volume of `volume_bytes`.
    pub fn store_config(&self, volume_bytes: u64, seed: u64) -> StoreConfig {
        StoreConfig {
            volume_bytes,
            index_bytes: match self.index_bytes {
                0 => volume_bytes / 16 / 4096 * 4096,
                n => n,
            },
            max_write_bytes: self.max_write_bytes,
            generation: seed | 1,
            ..StoreConfig::default()
        }
    }

    /// The machine of the spec's mode over a volume of `volume_bytes`.
    pub fn machine_config(&self, volume_bytes: u64, seed: u64) -> MachineConfig {
        match self.mode.as_str() {
            "store" => MachineConfig::Store(self.store_config(volume_bytes, seed)),
            _ => MachineConfig::Cache(self.cache_config(volume_bytes, seed)),
        }
    }

    /// For a store: whether `keys` keys of the mean record size fit the
    /// live share of the log a volume of `volume_bytes` gives it. The
    /// error names the volume they need, in MiB. (Keys inserted during a
    /// run come on top; a SET the full store refuses is counted, not
    /// lost.)
    /// The key index is checked first: whether it holds an entry for each
    /// key at the mean key size.
    pub fn check_store_room(&self, keys: u64, volume_bytes: u64) -> Result<(), ConfigError> {
        if !self.is_store() {
            return Ok(());
        }
        self.check_index_room(keys, volume_bytes)?;
        let room = |bytes: u64| self.store_config(bytes, 1).max_live_bytes();
        let store = self.store_config(volume_bytes, 1);
        let mean_key = (self.key_bytes_min + self.key_bytes_max) as usize / 2;
        let mean_value = self.mean_value_bytes() as usize;
        let record = tiermux_kv::store::record::encoded_len(mean_key, mean_value) as u64;
        let live = keys.saturating_mul(record);
        if live <= store.max_live_bytes() {
            return Ok(());
        }
        // The smallest whole number of MiB that holds them: double, then halve.
        let mut high_mib = (volume_bytes >> 20).max(1);
        while room(high_mib << 20) < live && high_mib < 1 << 40 {
            high_mib *= 2;
        }
        let mut low_mib = high_mib / 2;
        while high_mib - low_mib > 1 {
            let mid = (low_mib + high_mib) / 2;
            if room(mid << 20) >= live {
                high_mib = mid;
            } else {
                low_mib = mid;
            }
        }
        let volume_mib = volume_bytes >> 20;
        Err(ConfigError::new(
            "volume_blocks",
            format!(
                "{keys} keys of about {record} bytes need {} MiB of live log, and a {volume_mib} MiB volume gives the store {} MiB (a {} MiB log, at most {:.0} % live); give it at least {} MiB",
                live >> 20,
                store.max_live_bytes() >> 20,
                store.layout().log_bytes >> 20,
                store.max_live_share * 100.0,
                high_mib
            ),
        ))
    }

    /// For a store: whether its key index holds the entries of `keys`
    /// keys of the mean key size (a key is at least its number's digits
    /// and a letter). The error names the index they need, in bytes, or
    /// the volume whose sixteenth holds it when `index_bytes` is left to
    /// the volume.
    fn check_index_room(&self, keys: u64, volume_bytes: u64) -> Result<(), ConfigError> {
        let index_bytes = self.store_config(volume_bytes, 1).index_bytes;
        let digits = keys.saturating_sub(1).to_string().len();
        let mean_key = ((self.key_bytes_min + self.key_bytes_max) as usize / 2).max(digits + 1);
        let entry = tiermux_kv::store::meta::entry_bytes(mean_key);
        let need = keys.saturating_mul(entry);
        if need <= index_bytes {
            return Ok(());
        }
        let need_blocks = need.div_ceil(tiermux_kv::BLOCK_BYTES) * tiermux_kv::BLOCK_BYTES;
        let (field, fix) = if self.index_bytes == 0 {
            let mib = need_blocks.saturating_mul(16).div_ceil(1 << 20);
            (
                "volume_blocks",
                format!(
                    "a sixteenth of the volume; give it at least {mib} MiB, or set kv.index_bytes"
                ),
            )
        } else {
            (
                "kv.index_bytes",
                format!("kv.index_bytes; give it at least {need_blocks}"),
            )
        };
        Err(ConfigError::new(
            field,
            format!(
                "{keys} keys of about {mean_key} bytes need {need} bytes of key index ({entry} a key), and the store's is {index_bytes} bytes ({fix})"
            ),
        ))
    }

    /// Whether the run drives a store.
    pub fn is_store(&self) -> bool {
        self.mode == "store"
    }

    /// The table `value_sizes` names, if any (`None` also when it names no
    /// table: [`KvSpec::validate`] refuses that).
    pub fn value_table(&self) -> Option<&'static ValueSizes> {
        self.value_sizes
            .as_deref()
            .and_then(crate::cachebench::value_sizes)
    }

    /// The smallest and largest value a SET may write, bytes.
    pub fn value_bytes_range(&self) -> (u32, u32) {
        match self.value_table() {
            Some(t) => (t.min_bytes(), t.max_bytes()),
            None => (self.value_bytes_min, self.value_bytes_max),
        }
    }

    /// The mean value size, bytes.
    pub fn mean_value_bytes(&self) -> f64 {
        match self.value_table() {
            Some(t) => t.mean_bytes(),
            None => (self.value_bytes_min as f64 + self.value_bytes_max as f64) / 2.0,
        }
    }

    /// Checks the spec against a volume of `volume_bytes`.
    pub fn validate(&self, volume_bytes: u64) -> Result<(), ConfigError> {
        check(
            "mode",
            matches!(self.mode.as_str(), "cache" | "store"),
            || format!("'{}' is not a mode (\"cache\" or \"store\")", self.mode),
        )?;
        check(
            "region_eviction",
            RegionEviction::from_name(&self.region_eviction).is_some(),
            || {
                format!(
                    "'{}' is not a region eviction (\"lru\" or \"fifo\")",
                    self.region_eviction
                )
            },
        )?;
        self.check_flash_bytes(volume_bytes)?;
        let machine = self.machine_config(volume_bytes, 1);
        let valid = match &machine {
            MachineConfig::Cache(c) => c.validate(),
            MachineConfig::Store(s) => s.validate(),
        };
        valid.map_err(|e| ConfigError::new(format!("kv.{}", e.field), e.problem))?;
        self.check_sizes(Machine::new(machine).expect("validated"))?;
        self.check_mix()?;
        self.check_cpu()
    }

    /// `flash_bytes`: a cache setting, whole 4 KiB blocks, within the
    /// volume.
    fn check_flash_bytes(&self, volume_bytes: u64) -> Result<(), ConfigError> {
        if self.flash_bytes == 0 {
            return Ok(());
        }
        check("flash_bytes", !self.is_store(), || {
            "applies to the cache; a store uses the whole volume".into()
        })?;
        tiermux_kv::cache::check_flash_bytes(self.flash_bytes, volume_bytes)
            .map_err(|problem| ConfigError::new("kv.flash_bytes", problem))
    }

    /// Key and value sizes: within the item format, and the largest
    /// value fits the machine built on the volume.
    fn check_sizes(&self, probe: Machine) -> Result<(), ConfigError> {
        check(
            "key_bytes_min",
            (8..=self.key_bytes_max).contains(&self.key_bytes_min)
                && self.key_bytes_max as usize <= tiermux_kv::item::MAX_KEY_BYTES,
            || {
                format!(
                    "keys of {} to {} bytes: need 8 <= min <= max <= {}",
                    self.key_bytes_min,
                    self.key_bytes_max,
                    tiermux_kv::item::MAX_KEY_BYTES
                )
            },
        )?;
        if let Some(mix) = &self.value_sizes {
            check("value_sizes", self.value_table().is_some(), || {
                crate::cachebench::unknown_mix(mix)
            })?;
        }
        let (min, max) = self.value_bytes_range();
        let (min_field, max_field) = match self.value_sizes {
            Some(_) => ("value_sizes", "value_sizes"),
            None => ("value_bytes_min", "value_bytes_max"),
        };
        check(min_field, (MIN_VALUE_BYTES..=max).contains(&min), || {
            format!("values of {min} to {max} bytes: need {MIN_VALUE_BYTES} <= min <= max")
        })?;
        let room = probe.max_value_bytes(self.key_bytes_max as usize);
        check(max_field, max as usize <= room, || {
            format!(
                "{max}-byte values do not fit the {} (at most {room} with {}-byte keys)",
                self.mode, self.key_bytes_max
            )
        })
    }

    /// The shares of the command mix: each in [0, 1], together at most 1;
    /// scans only in store mode.
    fn check_mix(&self) -> Result<(), ConfigError> {
        check("scan", (0.0..=1.0).contains(&self.scan), || {
            format!("must be in [0, 1], got {}", self.scan)
        })?;
        check("scan", self.scan == 0.0 || self.is_store(), || {
            "SCAN needs mode = \"store\": the cache keeps no key order".into()
        })?;
        check("scan_length", self.scan_length >= 1, || {
            "must be at least 1".into()
        })?;
        for (field, share) in [
            ("lone_get", self.lone_get),
            ("lone_set", self.lone_set),
            ("del", self.del),
        ] {
            check(field, (0.0..=1.0).contains(&share), || {
                format!("must be in [0, 1], got {share}")
            })?;
        }
        check(
            "lone_get",
            self.lone_get + self.lone_set + self.del + self.scan <= 1.0,
            || "lone_get + lone_set + del + scan is more than 1".into(),
        )
    }

    /// The backing store's latency and the commands' CPU time.
    fn check_cpu(&self) -> Result<(), ConfigError> {
        for (field, v) in [
            ("backing_latency_us", self.backing_latency_us),
            ("op_cpu_us", self.op_cpu_us),
        ] {
            check(field, v.is_finite() && v >= 0.0, || {
                format!("must be at least 0, got {v}")
            })?;
        }
        check("cpu_cores", self.cpu_cores != Some(0), || {
            "must be at least 1 (leave it out for a core per client)".into()
        })?;
        check("op_cpu_us", self.op_cpu_us > 0.0, || {
            "must be positive: a command that takes no time would let a client loop forever in DRAM"
                .into()
        })
    }
}
