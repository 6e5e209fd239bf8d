//! `tiermux policies`: every registered policy, what it does, the
//! parameters it takes and those a running volume can change.

use tiermux_core::policy::DeviceSpec;
use tiermux_core::{DeviceRole, Params, VolumeSpec, REGISTRY};

/// A volume of `n` devices (every one but the last caching the next) for
/// building a policy to ask it what it takes.
fn probe_volume(n: usize) -> VolumeSpec {
    let blocks = 1 << 20;
    VolumeSpec {
        num_blocks: blocks,
        block_size: 4096,
        devices: DeviceRole::defaults(n)
            .into_iter()
            .enumerate()
            .map(|(i, role)| DeviceSpec {
                name: format!("d{i}"),
                capacity_blocks: if role == DeviceRole::Home {
                    blocks
                } else {
                    blocks / 16
                },
                role,
            })
            .collect(),
    }
}

/// The parameters `name` reads and those it can change live, from a
/// build on the smallest volume it accepts (2, 3 or 4 devices).
fn parameters(name: &str) -> Option<(usize, Vec<String>, Vec<&'static str>)> {
    (2..=4).find_map(|n| {
        let params = Params::new();
        let p = tiermux_core::build_policy(name, &params, &probe_volume(n), 1).ok()?;
        Some((n, params.read_names(), p.live_params()))
    })
}

/// The listing, one policy after another.
pub fn listing() -> String {
    let mut out = String::new();
    for r in REGISTRY {
        out += &format!("{:10} {}\n", r.name, r.summary);
        match parameters(r.name) {
            Some((devices, names, live)) => {
                let list = |v: &[String]| {
                    if v.is_empty() {
                        "none".into()
                    } else {
                        v.join(", ")
                    }
                };
                out += &format!("           devices: {devices} or more\n");
                out += &format!("           parameters: {}\n", list(&names));
                let live: Vec<String> = live.iter().map(|s| s.to_string()).collect();
                out += &format!("           live (tiermux ctl set): {}\n", list(&live));
            }
            None => out += "           (builds on no probe volume of 2-4 devices)\n",
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every registered policy builds on a probe volume, and what it lists
    /// agrees with what its config accepts: NHC takes write_mode and can
    /// change it live, TICA needs four devices and changes nothing live.
    #[test]
    fn every_policy_lists_its_parameters() {
        for r in REGISTRY {
            assert!(
                parameters(r.name).is_some(),
                "{} builds on no probe volume",
                r.name
            );
        }
        let (n, names, live) = parameters("nhc").unwrap();
        assert_eq!(n, 2);
        assert!(names.iter().any(|p| p == "write_mode"), "{names:?}");
        assert!(live.contains(&"write_mode") && !live.contains(&"cache_blocks"));
        let (n, names, live) = parameters("tica-a").unwrap();
        assert_eq!(n, 4);
        assert!(names.iter().any(|p| p == "t_min"), "{names:?}");
        assert!(live.is_empty());
        let text = listing();
        assert!(text.contains("live (tiermux ctl set): none"));
    }
}
