//! Changing a running volume's policy parameters (`tiermux ctl ... set`):
//! the whole new table passes the checks a config file's does (a policy is
//! built from it and the volume's safety checks run on that policy), only
//! parameters the running policy can change may differ, and then the
//! running policy takes the table over with its state (cache contents,
//! dirty blocks, controller values) kept.

use tiermux_core::{build_policy, Params, PolicyError};

use super::open::{check_volatile, volume_spec};
use super::{OpenError, Volume};
use crate::reactor::Reactor;

/// Why a live change was refused; the volume runs on unchanged.
#[derive(Debug, thiserror::Error)]
pub enum ReconfigureError {
    /// A value a config file would be refused for (unknown name, wrong
    /// type, out of range, inconsistent with another).
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The parameter needs a restart.
    #[error("policy '{policy}': parameter '{name}' cannot change while the volume runs (set it in the config file and restart); these can: {live}")]
    NotLive {
        /// The policy's name.
        policy: String,
        /// The parameter asked for.
        name: String,
        /// The parameters the policy can change, comma-separated.
        live: String,
    },
    /// The new setting would keep the only copy of writes in memory.
    #[error("{0}")]
    Unsafe(String),
}

impl Volume {
    /// The policy's parameters as the volume runs them (the config file's,
    /// with the live changes since it opened).
    pub fn params(&self) -> &Params {
        &self.cfg.params
    }

    /// The name of the volume's policy.
    pub fn policy_name(&self) -> &str {
        &self.cfg.policy
    }

    /// Applies `changes` to the running policy's parameters; returns the
    /// names whose values changed. A refused change changes nothing. Work
    /// the change needs (flushing dirty blocks when write-back ends) starts
    /// at once. The change lasts until the volume stops: the config file
    /// decides the next start.
    pub fn reconfigure(
        &mut self,
        changes: &Params,
        r: &mut dyn Reactor,
    ) -> Result<Vec<String>, ReconfigureError> {
        // A fresh table: a clone would carry the names the running one has
        // marked as read, and an unknown name asked for twice would pass
        // the unused-name check the second time.
        let mut next = Params::new();
        for (name, value) in self.cfg.params.iter() {
            next.set(name, value.clone());
        }
        let mut changed = Vec::new();
        for (name, value) in changes.iter() {
            let running = self.cfg.params.iter().find(|(n, _)| *n == name);
            if running.map(|(_, v)| v) != Some(value) {
                changed.push(name.clone());
            }
            next.set(name, value.clone());
        }
        if changed.is_empty() {
            return Ok(changed);
        }
        let spec = volume_spec(&self.cfg);
        let fresh = build_policy(&self.cfg.policy, &next, &spec, self.cfg.seed)?;
        let live = self.dispatcher.policy().live_params();
        if let Some(name) = changed.iter().find(|n| !live.contains(&n.as_str())) {
            return Err(ReconfigureError::NotLive {
                policy: self.cfg.policy.clone(),
                name: name.clone(),
                live: if live.is_empty() {
                    "none".into()
                } else {
                    live.join(", ")
                },
            });
        }
        check_volatile(&self.cfg, &self.devices, self.home, fresh.as_ref()).map_err(
            |e| match e {
                OpenError::Volatile { message } => ReconfigureError::Unsafe(message),
                other => ReconfigureError::Unsafe(other.to_string()),
            },
        )?;
        self.dispatcher.reconfigure(&next)?;
        for (d, &space) in self.address_spaces.iter().enumerate() {
            assert_eq!(
                self.dispatcher.policy().address_space(d),
                space,
                "a live change moved device {d}'s address space"
            );
        }
        self.cfg.params = next;
        self.refresh_tick_interval(r.now_ns());
        self.drain(r);
        Ok(changed)
    }

    /// Takes up the policy's tick interval again (a live change or the
    /// policy's own state may change it), keeping a due tick due.
    pub(super) fn refresh_tick_interval(&mut self, now_ns: u64) {
        let interval = self.dispatcher.policy().tick_interval_ns();
        if interval != self.tick_interval_ns {
            self.tick_interval_ns = interval;
            self.next_tick_ns = match (self.next_tick_ns, interval) {
                (Some(due), Some(i)) => Some(due.min(now_ns + i)),
                (None, Some(i)) => Some(now_ns + i),
                (_, None) => None,
            };
        }
    }
}
