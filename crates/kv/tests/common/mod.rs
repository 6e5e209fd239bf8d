//! What the model tests share.

/// A number added to the model tests' seeds, read from `TIERMUX_TEST_SEED`
/// (0 when unset), so that a long run can try cases the default seeds never
/// reach. It must be a multiple of 6: the tests vary settings by a seed's
/// remainder by 2 and 3, and a multiple of 6 keeps each seed's variant.
pub fn seed_base() -> u64 {
    let base: u64 = std::env::var("TIERMUX_TEST_SEED").map_or(0, |s| {
        s.parse().expect("TIERMUX_TEST_SEED is a whole number")
    });
    assert!(
        base.is_multiple_of(6),
        "TIERMUX_TEST_SEED {base} is not a multiple of 6"
    );
    base
}
