//! tracer-unwind keeps its rules, and the checks see a rule broken.

use std::path::Path;

use super::*;
use crate::imports::tests::read_tree;

/// The checkout's tracer-unwind: no features, no forbidden dependency, unsafe code forbidden,
/// nothing compiled under a feature.
#[test]
fn tracer_unwind_is_pure() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root");
    let krate = root.join("tracer-unwind");
    let manifest = std::fs::read_to_string(krate.join("Cargo.toml")).expect("the manifest");
    assert!(manifest.contains("[dependencies]"), "the manifest is read");
    assert_eq!(manifest_problems(&manifest), Vec::<String>::new());
    let src = krate.join("src");
    let mut files = Vec::new();
    read_tree(&src, &src, &mut files);
    assert!(files.len() > 20, "the crate's sources are read: {}", files.len());
    assert_eq!(source_problems(&files), Vec::<String>::new());
}

/// A features table and each way of naming a forbidden dependency are found; comments,
/// other tables' keys and allowed crates are not.
#[test]
fn manifest_problems_are_found() {
    let text = "[package]\nname = \"libc-free\"\n# libc = \"0.2\"\n\n[features]\ndefault = []\n\n\
                [dependencies]\nobject.workspace = true\naya = { workspace = true }\n\n\
                [dev-dependencies]\n\"tokio\" = \"1\"\n\n[target.'cfg(unix)'.dependencies]\nlibc.workspace = true\n\n\
                [dependencies.blazesym]\nversion = \"0.2\"\n";
    assert_eq!(
        manifest_problems(text),
        [
            "a [features] table",
            "depends on aya",
            "depends on tokio",
            "depends on libc",
            "depends on blazesym"
        ]
    );
    assert!(manifest_problems("[package]\nname = \"aya\"\n[dependencies]\ngimli = \"0.34\"\n").is_empty());
}

/// A lib.rs that does not forbid unsafe code, and a feature-gated file, are found.
#[test]
fn source_problems_are_found() {
    let files = [
        (
            "lib.rs".to_owned(),
            "//! x\n// #![forbid(unsafe_code)]\npub mod a;\n".to_owned(),
        ),
        ("a.rs".to_owned(), "#[cfg(feature = \"x\")]\npub fn f() {}\n".to_owned()),
    ];
    assert_eq!(
        source_problems(&files),
        ["lib.rs does not forbid unsafe code", "a.rs: compiled under a feature"]
    );
}
