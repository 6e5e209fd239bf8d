//! Every crate's integration tests are one binary, `tests/main.rs`, whose
//! modules are the files in `tests/` (`autotests = false` in the crate's
//! manifest). A file that `main.rs` does not name would never be built or
//! run, so this checks that each one is named.

use std::path::Path;

#[test]
fn every_test_file_of_every_crate_is_a_module_of_its_test_binary() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut suites = 0;
    for krate in std::fs::read_dir(&crates).unwrap() {
        let tests = krate.unwrap().path().join("tests");
        let Ok(main) = std::fs::read_to_string(tests.join("main.rs")) else {
            let rust_files = std::fs::read_dir(&tests).into_iter().flatten();
            let rust_files: Vec<_> = rust_files
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "rs"))
                .collect();
            assert!(
                rust_files.is_empty(),
                "{rust_files:?} without a tests/main.rs"
            );
            continue;
        };
        suites += 1;
        let manifest = std::fs::read_to_string(tests.join("../Cargo.toml")).unwrap();
        assert!(
            manifest.contains("autotests = false") && manifest.contains("path = \"tests/main.rs\""),
            "{}: the manifest does not build tests/main.rs as the one test binary",
            tests.display()
        );
        for entry in std::fs::read_dir(&tests).unwrap() {
            let path = entry.unwrap().path();
            let (Some(stem), Some("rs")) = (
                path.file_stem().and_then(|s| s.to_str()),
                path.extension().and_then(|s| s.to_str()),
            ) else {
                continue;
            };
            assert!(
                stem == "main" || main.lines().any(|l| l == format!("mod {stem};")),
                "{} is not a module of {}",
                path.display(),
                tests.join("main.rs").display()
            );
        }
    }
    assert_eq!(suites, 6, "the crates with integration tests");
}
