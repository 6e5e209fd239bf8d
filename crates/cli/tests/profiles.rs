//! `tiermux profiles`: the device profiles with their calibration points,
//! and the other devices a configuration can name (fixed-rate devices and
//! disk arrays, each array name one the configurations accept).

use std::process::Command;

fn profiles(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tiermux"))
        .arg("profiles")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_listing_names_profiles_and_arrays() {
    let text = profiles(&[]);
    for name in ["optane-905p", "flash-970pro", "fixed:R"] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    let arrays = text
        .lines()
        .find(|l| l.starts_with("Disk arrays"))
        .expect("a line on disk arrays");
    for name in tiermux_device::array::ARRAYS {
        assert!(arrays.contains(name), "{arrays}");
        assert!(tiermux_device::array::parse_array(name).is_ok());
    }
    // The shape's example is a name the configurations accept.
    let example = arrays
        .split_whitespace()
        .find(|w| w.starts_with("raid5-4x"))
        .expect("an example shape")
        .trim_end_matches([';', ',']);
    assert!(
        tiermux_device::array::parse_array(example).is_ok(),
        "{example}"
    );
    assert!(profiles(&["--sources"]).contains("optane-905p"));
}
