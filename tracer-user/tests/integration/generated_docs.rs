//! The generated pages of `docs/` (the CLI reference and the JSON schemas) are what
//! `sframe-trace __docs` prints from the code: a flag, section or field changed without
//! regenerating them fails here, with the command that regenerates them.

use std::{path::Path, process::Command};

/// Issue 31 (the reference was hand-written and drifted): each page in `docs/` is
/// byte-for-byte what `sframe-trace __docs PAGE` prints now.
#[test]
fn generated_docs_match_the_code() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    for (page, file) in [
        ("cli", "cli.md"),
        ("summary-schema", "schemas/summary.json"),
        ("dump-schema", "schemas/dump.json"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_sframe-trace"))
            .args(["__docs", page])
            .output()
            .expect("run sframe-trace __docs");
        assert!(out.status.success(), "{page}: {}", String::from_utf8_lossy(&out.stderr));
        let generated = String::from_utf8(out.stdout).expect("utf-8");
        assert!(generated.len() > 100, "{page}: too short to be the page: {generated}");
        let path = docs.join(file);
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            generated == checked_in,
            "docs/{file} is not what the code generates: run `cargo run -p tracer-user -- __docs {page} > docs/{file}`"
        );
    }
}

/// The CLI reference groups the tracing flags under the `--help` sections, in order, and
/// lists each subcommand; the hidden `__docs` is not in it.
#[test]
fn cli_reference_has_the_sections() {
    let out = Command::new(env!("CARGO_BIN_EXE_sframe-trace"))
        .args(["__docs", "cli"])
        .output()
        .expect("run sframe-trace __docs");
    let text = String::from_utf8_lossy(&out.stdout);
    let at = |needle: &str| text.find(needle).unwrap_or_else(|| panic!("no `{needle}` in:\n{text}"));
    let order = ["### Targets", "### Sampling", "### Output", "### Symbols", "### Export"].map(at);
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "sections out of order: {order:?}"
    );
    for needle in [
        "- `-p, --pid <PID>`",
        "- `-d, --duration <DURATION>`",
        "## `sframe-trace dump`",
        "--short-names",
    ] {
        at(needle);
    }
    assert!(
        !text.contains("## `sframe-trace __docs"),
        "the hidden command is listed"
    );
}
