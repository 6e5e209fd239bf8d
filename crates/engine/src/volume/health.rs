//! Device health: failures counted per device, and when a device that
//! keeps failing is taken out of service.
//!
//! A device is given up after [`OUT_OF_SERVICE_AFTER_ERRORS`] failed
//! operations in a row (a failed sync counts as that many: after a failed
//! sync the kernel may already have dropped the writes it could not make
//! durable). The policy then stops using it where it can (a cache device:
//! clean copies are read from home, nothing new is admitted); a device the
//! policy cannot do without keeps serving, and its failures reach the
//! clients.

/// Failed operations in a row after which a device is taken out of service.
pub const OUT_OF_SERVICE_AFTER_ERRORS: u32 = 8;

/// Errors per device logged one by one before only every thousandth is.
const LOGGED_ERRORS: u64 = 10;

#[derive(Clone, Copy, Debug, Default)]
struct DeviceHealth {
    /// Failures since the last success.
    in_a_row: u32,
    /// Failures in all.
    errors: u64,
    /// The device reached the limit once (out of service, or refused).
    given_up: bool,
    /// The policy took it out of service.
    out_of_service: bool,
}

/// The health of a volume's devices.
#[derive(Debug, Default)]
pub(super) struct Health {
    devices: Vec<DeviceHealth>,
}

impl Health {
    /// Health of `n` devices, none failed.
    pub(super) fn new(n: usize) -> Health {
        Health {
            devices: vec![DeviceHealth::default(); n],
        }
    }

    pub(super) fn succeeded(&mut self, d: u8) {
        self.devices[d as usize].in_a_row = 0;
    }

    /// Whether the next failure of `d` is worth a line of its own.
    pub(super) fn should_log(&self, d: u8) -> bool {
        let e = self.devices[d as usize].errors;
        e < LOGGED_ERRORS || e.is_multiple_of(1000)
    }

    /// Counts a failure of `d` (as `weight` failures in a row); true the
    /// first time `d` reaches the limit.
    pub(super) fn failed(&mut self, d: u8, weight: u32) -> bool {
        let h = &mut self.devices[d as usize];
        h.errors += 1;
        h.in_a_row = h.in_a_row.saturating_add(weight);
        if h.given_up || h.in_a_row < OUT_OF_SERVICE_AFTER_ERRORS {
            return false;
        }
        h.given_up = true;
        true
    }

    pub(super) fn errors(&self, d: u8) -> u64 {
        self.devices[d as usize].errors
    }

    pub(super) fn out_of_service(&mut self, d: u8) {
        self.devices[d as usize].out_of_service = true;
    }

    /// Devices taken out of service (bit per device).
    pub(super) fn out_of_service_mask(&self) -> u8 {
        self.devices
            .iter()
            .enumerate()
            .filter(|(_, h)| h.out_of_service)
            .fold(0, |m, (d, _)| m | 1 << d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_is_given_up_once_after_failing_in_a_row() {
        let mut h = Health::new(2);
        for _ in 0..OUT_OF_SERVICE_AFTER_ERRORS - 1 {
            assert!(!h.failed(0, 1));
        }
        h.succeeded(0);
        for _ in 0..OUT_OF_SERVICE_AFTER_ERRORS - 1 {
            assert!(!h.failed(0, 1));
        }
        assert!(h.failed(0, 1), "the limit in a row");
        assert!(!h.failed(0, 1), "only once");
        assert!(h.failed(1, OUT_OF_SERVICE_AFTER_ERRORS), "a failed sync");
        assert_eq!(h.errors(0), 2 * OUT_OF_SERVICE_AFTER_ERRORS as u64);
    }
}
