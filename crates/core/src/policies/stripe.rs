//! Striping: each block lives on exactly one device, fixed by a static
//! pattern over stripes of `stripe_blocks` consecutive blocks. A fraction
//! `fast_share` of the stripes goes to the first device, spread evenly
//! along the address space (stripe `s` is on the first device when
//! `floor((s + 1) x share)` exceeds `floor(s x share)`), the rest to the
//! last. Nothing ever moves. The MOST paper compares against it: "if data
//! is striped evenly across devices, throughput is bottlenecked by the
//! slowest device" (§2), so the default share is one half.
//!
//! Like `split`, a block keeps its own address on the device that holds it
//! ([`super::fixed`]), so each device must be as large as the volume: the
//! layout models where the load goes, not how striping packs capacity.

use super::fixed::{Fixed, Layout};
use super::{param_err, Registered};
use crate::params::Params;
use crate::policy::{Policy, PolicyError, VolumeSpec};

/// Registry entry.
pub const REGISTERED: Registered = Registered {
    name: "stripe",
    summary: "static striping: stripes of stripe_blocks blocks, a fraction fast_share of them on the fast device in an even pattern",
    build,
};

/// Default stripe: 512 blocks, MOST's 2 MiB segment of 4 KiB blocks.
pub const DEFAULT_STRIPE_BLOCKS: u64 = 512;

fn build(p: &Params, vol: &VolumeSpec, _seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    let e = param_err("stripe");
    let share = p.f64_in("fast_share", 0.5, 0.0, 1.0).map_err(&e)?;
    let stripe_blocks = p
        .u64_in("stripe_blocks", DEFAULT_STRIPE_BLOCKS, 1, 1 << 30)
        .map_err(&e)?;
    Fixed::build(
        "stripe",
        vol,
        StripeLayout {
            share,
            stripe_blocks,
        },
    )
}

/// Stripe `s` is on the fast device when `floor((s + 1) x share)` exceeds
/// `floor(s x share)`: exactly a `share` of every run of stripes, to
/// within one.
struct StripeLayout {
    share: f64,
    stripe_blocks: u64,
}

impl Layout for StripeLayout {
    #[inline]
    fn on_fast(&self, block: u64) -> bool {
        let s = (block / self.stripe_blocks) as f64;
        ((s + 1.0) * self.share).floor() > (s * self.share).floor()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::ParamValue;
    use crate::policy::{DeviceRole, DeviceSpec};

    /// The device of each block under a layout of `share` and `stripe_blocks`.
    fn stripe(share: f64, stripe_blocks: u64) -> impl Fn(u64) -> u8 {
        let layout = StripeLayout {
            share,
            stripe_blocks,
        };
        move |b| if layout.on_fast(b) { 0 } else { 1 }
    }

    #[test]
    fn the_policy_builds_from_its_parameters() {
        let vol = VolumeSpec {
            num_blocks: 1 << 20,
            block_size: 4096,
            devices: (0..2)
                .map(|i| DeviceSpec {
                    name: format!("d{i}"),
                    capacity_blocks: 1 << 20,
                    role: if i == 0 {
                        DeviceRole::Tier
                    } else {
                        DeviceRole::Home
                    },
                })
                .collect(),
        };
        let mut p = Params::new();
        p.set("fast_share", ParamValue::Float(0.25));
        p.set("stripe_blocks", ParamValue::Int(8));
        let s = build(&p, &vol, 0).unwrap();
        assert_eq!(s.name(), "stripe");
        assert_eq!((s.address_space(0), s.address_space(1)), (1 << 20, 1 << 20));
    }

    #[test]
    fn an_even_share_alternates_whole_stripes() {
        let s = stripe(0.5, 4);
        let devices: Vec<u8> = (0..16).map(&s).collect();
        assert_eq!(devices, [1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0]);
    }

    /// Any share puts exactly that fraction of every run of stripes on the
    /// fast device, to within one stripe.
    #[test]
    fn the_share_holds_over_every_prefix() {
        for share in [0.0, 0.1, 0.25, 1.0 / 3.0, 0.62, 0.9, 1.0] {
            let s = stripe(share, 1);
            let mut fast = 0u64;
            for n in 1..=10_000u64 {
                fast += (s(n - 1) == 0) as u64;
                let want = n as f64 * share;
                assert!(
                    (fast as f64 - want).abs() <= 1.0,
                    "share {share}: {fast} of {n}"
                );
            }
        }
    }

    #[test]
    fn bad_parameters_name_themselves() {
        let vol = VolumeSpec {
            num_blocks: 16,
            block_size: 4096,
            devices: vec![DeviceSpec {
                name: "only".into(),
                capacity_blocks: 16,
                role: DeviceRole::Home,
            }],
        };
        let mut p = Params::new();
        p.set("fast_share", ParamValue::Float(1.5));
        let e = build(&p, &vol, 0).err().unwrap().to_string();
        assert!(e.contains("fast_share"), "{e}");
        let e = build(&Params::new(), &vol, 0).err().unwrap().to_string();
        assert!(e.contains("needs 2 devices"), "{e}");
    }
}
