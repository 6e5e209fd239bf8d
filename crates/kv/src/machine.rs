//! Either key-value machine behind one face, so that every driver (the
//! Redis front on the engine, the simulator's clients, the tests) runs the
//! cache and the store alike.

use crate::cache::{Cache, CacheConfig, ConfigError};
use crate::command::{Command, Reply};
use crate::io::{IoId, IoRequest};
use crate::store::{Store, StoreConfig};

/// How a key-value machine is made.
#[derive(Debug, Clone, PartialEq)]
pub enum MachineConfig {
    /// CacheLib's shape: DRAM, small-object buckets, large-object regions.
    Cache(CacheConfig),
    /// Orthus-KV's shape: a value log and a key index.
    Store(StoreConfig),
}

impl MachineConfig {
    /// Bytes of the volume the machine uses.
    pub fn volume_bytes(&self) -> u64 {
        match self {
            MachineConfig::Cache(c) => c.volume_bytes,
            MachineConfig::Store(s) => s.volume_bytes,
        }
    }
}

/// A key-value machine: commands and completions in, storage requests and
/// replies out.
#[derive(Clone)]
pub enum Machine {
    /// Cache mode.
    Cache(Cache),
    /// Store mode.
    Store(Store),
}

/// The counters every machine keeps, for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// GETs answered.
    pub gets: u64,
    /// GETs answered from DRAM (the cache's DRAM; the store's values not
    /// yet on the volume).
    pub dram_hits: u64,
    /// GETs answered from flash: the cache's flash caches (the volume, or
    /// a region buffer not yet written); the store's volume.
    pub flash_hits: u64,
    /// SETs done.
    pub sets: u64,
    /// Reads of the volume issued to answer commands: the cache's bucket
    /// and region reads, the store's record reads.
    pub volume_reads: u64,
    /// Items the cache's DRAM evicted that no flash cache stored (none in
    /// the store).
    pub dropped: u64,
}

impl Machine {
    /// A machine of this configuration (a store starts opening: reading
    /// its volume, or formatting an empty one).
    pub fn new(cfg: MachineConfig) -> Result<Machine, ConfigError> {
        Ok(match cfg {
            MachineConfig::Cache(c) => Machine::Cache(Cache::new(c)?),
            MachineConfig::Store(s) => Machine::Store(Store::open(s)?),
        })
    }

    /// "cache" or "store".
    pub fn mode(&self) -> &'static str {
        match self {
            Machine::Cache(_) => "cache",
            Machine::Store(_) => "store",
        }
    }

    /// Starts a command (see [`Cache::submit`], [`Store::submit`]).
    pub fn submit(&mut self, tag: u64, cmd: Command, now_ms: u64) {
        match self {
            Machine::Cache(c) => c.submit(tag, cmd, now_ms),
            Machine::Store(s) => s.submit(tag, cmd, now_ms),
        }
    }

    /// The next storage request for the driver.
    pub fn pop_io(&mut self) -> Option<IoRequest> {
        match self {
            Machine::Cache(c) => c.pop_io(),
            Machine::Store(s) => s.pop_io(),
        }
    }

    /// A storage request finished.
    pub fn complete(&mut self, id: IoId, result: Result<&[u8], i32>) {
        match self {
            Machine::Cache(c) => c.complete(id, result),
            Machine::Store(s) => s.complete(id, result),
        }
    }

    /// The next finished command's tag and reply.
    pub fn pop_reply(&mut self) -> Option<(u64, Reply)> {
        match self {
            Machine::Cache(c) => c.pop_reply(),
            Machine::Store(s) => s.pop_reply(),
        }
    }

    /// Storage requests issued and not completed.
    pub fn io_in_flight(&self) -> u64 {
        match self {
            Machine::Cache(c) => c.io_in_flight(),
            Machine::Store(s) => s.io_in_flight(),
        }
    }

    /// Bytes of the volume the machine uses.
    pub fn volume_bytes(&self) -> u64 {
        match self {
            Machine::Cache(c) => c.config().volume_bytes,
            Machine::Store(s) => s.config().volume_bytes,
        }
    }

    /// The largest value a key of `key_len` bytes may have.
    pub fn max_value_bytes(&self, key_len: usize) -> usize {
        match self {
            Machine::Cache(c) => c.max_value_bytes(key_len),
            Machine::Store(s) => s.max_value_bytes(key_len),
        }
    }

    /// The counters every machine keeps.
    pub fn summary(&self) -> Summary {
        match self {
            Machine::Cache(c) => {
                let s = c.stats();
                Summary {
                    gets: s.gets,
                    dram_hits: s.dram_hits,
                    flash_hits: s.flash_hits,
                    sets: s.sets,
                    volume_reads: s.soc.reads + s.loc.reads,
                    dropped: s.loc.dropped,
                }
            }
            Machine::Store(s) => {
                let t = s.stats();
                Summary {
                    gets: t.gets,
                    dram_hits: t.pending_hits,
                    flash_hits: t.get_hits - t.pending_hits,
                    sets: t.puts,
                    volume_reads: t.record_reads,
                    dropped: 0,
                }
            }
        }
    }

    /// Every counter, named, for INFO.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        match self {
            Machine::Cache(c) => {
                let (s, cfg) = (c.stats(), c.config());
                vec![
                    ("dram_budget_bytes", cfg.dram_bytes),
                    ("get_commands", s.gets),
                    ("dram_hits", s.dram_hits),
                    ("flash_hits", s.flash_hits),
                    ("set_commands", s.sets),
                    ("to_small_object_cache", s.to_soc),
                    ("to_large_object_cache", s.to_loc),
                    ("rewritten_clean", s.rewritten_clean),
                    ("overtaken_lookups", s.overtaken_lookups),
                    ("bucket_reads", s.soc.reads),
                    ("bucket_writes", s.soc.writes),
                    ("bloom_rejects", s.soc.bloom_rejects),
                    ("region_reads", s.loc.reads),
                    ("region_writes", s.loc.region_writes),
                    ("region_evictions", s.loc.evictions),
                    ("region_trims", s.loc.trims),
                    ("items_queued", s.loc.queued),
                    ("items_dropped", s.loc.dropped),
                    ("io_errors", s.soc.io_errors + s.loc.io_errors),
                ]
            }
            Machine::Store(st) => {
                let s = st.stats();
                let (head, tail, free) = st.log_positions();
                vec![
                    ("keys", st.keys() as u64),
                    ("get_commands", s.gets),
                    ("get_hits", s.get_hits),
                    ("pending_hits", s.pending_hits),
                    ("puts", s.puts),
                    ("dels", s.dels),
                    ("scans", s.scans),
                    ("log_head", head),
                    ("log_tail", tail),
                    ("log_free_bytes", free),
                    ("log_writes", s.log_writes),
                    ("log_write_failures", s.log_write_failures),
                    ("log_record_bytes", s.log_record_bytes),
                    ("cleaner_moved", s.moved),
                    ("cleaner_freed_bytes", s.cleaned_bytes),
                    ("checkpoints", s.checkpoints),
                    ("recovered_records", s.recovered_records),
                    ("damaged_reads", s.damaged_reads),
                ]
            }
        }
    }
}
