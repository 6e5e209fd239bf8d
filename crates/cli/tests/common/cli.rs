//! Running the `tiermux` command from a test, in a scratch directory.
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh directory for one test, removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    /// A new empty directory named for `tag` and this process.
    pub fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!(
            "tiermux-test-{tag}-{}-{}",
            std::process::id(),
            super::next_dir_number()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `tiermux ARGS`.
pub fn tiermux(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tiermux"))
        .args(args)
        .output()
        .expect("tiermux runs")
}

/// Runs `tiermux ARGS`, which must succeed, and returns what it printed.
pub fn ok(args: &[&str]) -> String {
    let out = tiermux(args);
    assert!(
        out.status.success(),
        "tiermux {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}
