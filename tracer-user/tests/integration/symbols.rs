//! Symbolization of real traced programs: C++ and Rust names demangled, and the debug
//! information of a stripped program found in a separate file, through its `.gnu_debuglink`
//! (the file beside it) or its build-id (`/usr/lib/debug/.build-id/`). The same program
//! stripped without a debug file anywhere is the control: its functions are named by object
//! and offset. Privileged, like every tracing test.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use crate::support::{Running, SFRAME_CFLAGS, json_frames, json_samples, run, tracer_binary};

/// The C++ chain, innermost first, as the debug information or symbol table names it.
const CXX_CHAIN: &[&str] = &["shop::Ledger<unsigned long>::settle(unsigned long)", "run", "main"];

/// A debug file placed under /usr/lib/debug/.build-id for the test, removed after it.
struct BuildIdDebugFile(PathBuf);

impl Drop for BuildIdDebugFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Link `fixtures/symbols/ledger.cpp` as `dir/name` with a build-id of its own (`id`, hex).
fn link_cxx(dir: &Path, name: &str, id: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/symbols/ledger.cpp");
    let out = dir.join(name);
    run(Command::new("g++")
        .args(SFRAME_CFLAGS)
        .arg("-g")
        .arg(format!("-Wl,--build-id=0x{id}"))
        .arg(&src)
        .arg("-o")
        .arg(&out));
    out
}

/// The frames of the json samples of `pid`: (symbol or object+offset name, file).
fn stacks_of(text: &str, pid: u32) -> Vec<Vec<(String, Option<String>)>> {
    json_samples(text, pid)
        .iter()
        .map(|s| {
            json_frames(s)
                .iter()
                .map(|f| {
                    let name = match f["symbol"].as_str() {
                        Some(symbol) => symbol.to_owned(),
                        None => format!(
                            "[{}+{}]",
                            f["object"].as_str().unwrap_or("?").rsplit('/').next().unwrap_or("?"),
                            f["offset"].as_str().unwrap_or("?")
                        ),
                    };
                    (name, f["file"].as_str().map(str::to_owned))
                })
                .collect()
        })
        .collect()
}

/// Some sample of `pid` has `chain` innermost first, its first frame from `file`.
fn assert_chain(stacks: &[Vec<(String, Option<String>)>], what: &str, chain: &[&str], file: &str) {
    assert!(!stacks.is_empty(), "{what}: no samples");
    let found = stacks.iter().any(|s| {
        s.len() >= chain.len()
            && s.iter().zip(chain).all(|((name, _), want)| name == want)
            && s[0].1.as_deref().is_some_and(|f| f.ends_with(file))
    });
    assert!(
        found,
        "{what}: no stack starting {chain:?} in {file}; first: {:?}",
        &stacks[0][..stacks[0].len().min(4)]
    );
}

/// C++ and Rust names are demangled; a stripped program's names and lines come from its debug
/// file, found by `.gnu_debuglink` or by build-id; without one, frames are object and offset.
#[test]
fn demangled_names_and_separate_debug_files() {
    privileged_test!();
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // Build-ids of their own, so that no variant finds another's debug file.
    let unique = format!(
        "{:08x}{:08x}",
        std::process::id(),
        std::time::UNIX_EPOCH.elapsed().unwrap_or_default().subsec_nanos()
    );
    let id = |n: u8| format!("5f{n:02x}{unique}0000000000000000");
    let plain = link_cxx(d, "ledger", &id(1));
    let linked = link_cxx(d, "ledger-link.full", &id(2));
    run(Command::new("objcopy")
        .current_dir(d)
        .args(["--only-keep-debug", "ledger-link.full", "ledger-link.debug"]));
    run(Command::new("objcopy")
        .current_dir(d)
        .args(["--strip-all", "--add-gnu-debuglink=ledger-link.debug"])
        .arg(&linked)
        .arg("ledger-link"));
    let by_id = link_cxx(d, "ledger-bid.full", &id(3));
    let debug_dir = Path::new("/usr/lib/debug/.build-id").join(&id(3)[..2]);
    std::fs::create_dir_all(&debug_dir).expect("create the build-id debug directory");
    let debug_file = BuildIdDebugFile(debug_dir.join(format!("{}.debug", &id(3)[2..])));
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&by_id)
        .arg(&debug_file.0));
    run(Command::new("objcopy")
        .current_dir(d)
        .args(["--strip-all", "ledger-bid.full", "ledger-bid"]));
    let bare = link_cxx(d, "ledger-bare.full", &id(4));
    run(Command::new("objcopy")
        .arg("--strip-all")
        .arg(&bare)
        .arg(d.join("ledger-bare")));
    let rust = d.join("ledger-rs");
    run(Command::new("rustc")
        .args(["-O", "-g", "--crate-name", "ledger", "-o"])
        .arg(&rust)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/symbols/ledger.rs")));

    let programs = [
        plain,
        d.join("ledger-link"),
        d.join("ledger-bid"),
        d.join("ledger-bare"),
        rust,
    ];
    let mut running: Vec<Running> = programs
        .iter()
        .map(|p| {
            Running(
                Command::new(p)
                    .arg("8")
                    .stdout(Stdio::null())
                    .spawn()
                    .unwrap_or_else(|e| panic!("start {}: {e}", p.display())),
            )
        })
        .collect();
    for (r, p) in running.iter_mut().zip(&programs) {
        r.wait_working(p);
    }
    let pids: Vec<String> = running.iter().map(|r| r.pid().to_string()).collect();
    let json = d.join("samples.json");
    let out = Command::new(tracer_binary())
        .args(["-F", "499", "-d", "2", "--no-kernel", "-f", "json", "-o"])
        .arg(&json)
        .args(["--pid", &pids.join(",")])
        .output()
        .expect("run sframe-trace");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "sframe-trace failed: {stderr}");
    let text = std::fs::read_to_string(&json).expect("read the json output");
    let stacks = |i: usize| stacks_of(&text, running[i].pid());

    assert_chain(&stacks(0), "ledger (symbols)", CXX_CHAIN, "ledger.cpp");
    assert_chain(&stacks(1), "ledger-link (.gnu_debuglink)", CXX_CHAIN, "ledger.cpp");
    assert_chain(&stacks(2), "ledger-bid (build-id)", CXX_CHAIN, "ledger.cpp");
    let bare = stacks(3);
    assert!(!bare.is_empty(), "ledger-bare: no samples");
    assert!(
        bare.iter().flatten().all(|(name, _)| name != "run"),
        "ledger-bare has no symbol for run, yet a frame is named so"
    );
    assert!(
        bare.iter().any(|s| s[0].0.starts_with("[ledger-bare+0x")),
        "ledger-bare: frames not named by object and offset: {:?}",
        bare[0]
    );
    assert_chain(&stacks(4), "ledger-rs (Rust)", &["ledger::engine::crunch"], "ledger.rs");
}
