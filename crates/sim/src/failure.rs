//! A device that fails during a run (`[failure]` in a run's table): what
//! the user asks for, and the checks that name a bad request.
//!
//! From the moment of failure the device's contents are gone and every
//! operation on it fails, as when a drive drops off its bus. The
//! simulator then does what the engine does when a device keeps failing:
//! the policy takes the device out of service where it can do without it,
//! a client read that fails is tried once more, and the version checker
//! goes on checking every read. A run reports the blocks whose only
//! current copy was on the device (acknowledged writes the failure lost)
//! and the client operations that failed.

use serde::{Deserialize, Serialize};

use crate::config::{ConfigError, SimConfig};

/// Which device fails, and when.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailureSpec {
    /// The device that fails: its index in `devices`, fastest first.
    pub device: usize,
    /// Simulated time of the failure, s from the start of the run.
    pub at_s: f64,
}

/// What a failure did to a run.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FailureResult {
    /// The device that failed.
    pub device: usize,
    /// Whether the policy took the device out of service (false: it cannot
    /// do without the device, and keeps sending it operations that fail).
    pub out_of_service: bool,
    /// Blocks whose acknowledged data was held only by the failed device
    /// when it failed: writes the failure lost.
    pub lost_blocks: u64,
    /// Client block reads that failed, after one retry each.
    pub failed_reads: u64,
    /// Client block writes that failed (not acknowledged).
    pub failed_writes: u64,
    /// Client block reads tried again after a failure.
    pub read_retries: u64,
}

impl FailureSpec {
    /// Checks the failure against the run it is part of.
    pub fn check(&self, cfg: &SimConfig) -> Result<(), ConfigError> {
        let n = cfg.devices.len();
        if self.device >= n {
            return Err(ConfigError::new(
                "failure.device",
                format!(
                    "is {}, but the run has {n} devices (0 to {})",
                    self.device,
                    n.saturating_sub(1)
                ),
            ));
        }
        if !(self.at_s.is_finite() && self.at_s >= 0.0 && self.at_s < cfg.duration_s) {
            return Err(ConfigError::new(
                "failure.at_s",
                format!(
                    "must be a time within the run (0 to {} s), got {}",
                    cfg.duration_s, self.at_s
                ),
            ));
        }
        if cfg.kv.is_some() {
            return Err(ConfigError::new(
                "failure",
                "device failures are simulated under block clients; a key-value run cannot have one",
            ));
        }
        Ok(())
    }
}
