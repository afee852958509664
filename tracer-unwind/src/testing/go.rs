//! Go programs built for the tests: `fixtures/src/go/spin.go` with a Go toolchain, normally
//! and stripped (`-ldflags=-s -w`), and what Go's own tools say of the result (`go tool nm`,
//! `go tool objdump`), to judge the tracer's names and stacks against. Builds use a cache and
//! `GOPATH` under the workspace's `target/`, `GOTOOLCHAIN=local` and no network.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// The source of the test program.
pub const SPIN_SOURCE: &str = include_str!("../../../fixtures/src/go/spin.go");
/// A program that prints the frames of a chain of inlined calls as Go's runtime names them.
pub const INLINE_SOURCE: &str = include_str!("../../../fixtures/src/go/inline.go");

/// The variable `cargo xtask test` names sid's newer Go toolchains in (`go` executables,
/// `:`-separated; `cargo xtask setup` unpacks them).
pub const TOOLCHAINS_VAR: &str = "SFRAME_TRACE_GO_TOOLCHAINS";

/// The Go toolchains to test with: `go` on the `PATH` (Debian's), then those
/// [`TOOLCHAINS_VAR`] names, or else those `cargo xtask setup` unpacked into
/// `${XDG_CACHE_HOME:-~/.cache}/sframe-trace/rootfs/sid-golang-*/usr/lib/go-*/bin/go`.
pub fn toolchains() -> Vec<PathBuf> {
    let mut found = vec![PathBuf::from("go")];
    match std::env::var_os(TOOLCHAINS_VAR) {
        Some(list) => found.extend(std::env::split_paths(&list).filter(|p| !p.as_os_str().is_empty())),
        None => {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")));
            let rootfs = cache.map(|c| c.join("sframe-trace/rootfs"));
            let mut more: Vec<PathBuf> = rootfs
                .and_then(|dir| std::fs::read_dir(dir).ok())
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .filter_map(|d| {
                    let name = d.file_name().to_str()?.to_owned();
                    let release = name.strip_prefix("sid-golang-")?;
                    Some(d.path().join(format!("usr/lib/go-{release}/bin/go")))
                })
                .filter(|go| go.is_file())
                .collect();
            more.sort();
            found.extend(more);
        }
    }
    found
}

/// The workspace's `target/` directory.
fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target")
}

/// `go` with the environment every build and tool run uses.
fn command(go: &Path) -> Command {
    let base = target_dir().join("go-build");
    let mut cmd = Command::new(go);
    cmd.env("GOCACHE", base.join("cache"))
        .env("GOPATH", base.join("path"))
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "")
        .env("GOPROXY", "off")
        .env("CGO_ENABLED", "0");
    cmd
}

/// The version `go version` prints (`go1.19.8`), `Err` when `go` cannot be run.
pub fn version(go: &Path) -> Result<String, String> {
    let out = command(go)
        .arg("version")
        .output()
        .map_err(|e| format!("{}: {e}", go.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .nth(2)
        .map(str::to_owned)
        .ok_or_else(|| format!("{}: no version in {text:?}", go.display()))
}

/// Build [`SPIN_SOURCE`] with `go` into `dir`: `(normal, stripped)` (`spin`, `spin-stripped`).
/// `Err` when `go` cannot be run (a failed build panics).
pub fn build_spin(go: &Path, dir: &Path) -> Result<(PathBuf, PathBuf), String> {
    build(go, dir, "spin", SPIN_SOURCE)
}

/// Build the program `source` with `go` into `dir`: `(normal, stripped)`, named `name` and
/// `name-stripped`. `Err` when `go` cannot be run (a failed build panics).
pub fn build(go: &Path, dir: &Path, name: &str, source: &str) -> Result<(PathBuf, PathBuf), String> {
    version(go)?;
    let src = dir.join(format!("{name}.go"));
    std::fs::write(&src, source).expect("write the source");
    let one = |out: &str, flags: &[&str]| -> PathBuf {
        let out = dir.join(out);
        let done = command(go)
            .current_dir(dir)
            .arg("build")
            .args(flags)
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .output()
            .expect("run go build");
        assert!(
            done.status.success(),
            "go build {flags:?}: {}",
            String::from_utf8_lossy(&done.stderr)
        );
        out
    };
    Ok((one(name, &[]), one(&format!("{name}-stripped"), &["-ldflags=-s -w"])))
}

/// The text symbols `go tool nm` lists in `binary`, as `(address, name)`.
pub fn nm(go: &Path, binary: &Path) -> Vec<(u64, String)> {
    let out = command(go)
        .args(["tool", "nm"])
        .arg(binary)
        .output()
        .expect("go tool nm");
    assert!(
        out.status.success(),
        "go tool nm: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let addr = u64::from_str_radix(words.next()?, 16).ok()?;
            let kind = words.next()?;
            (kind == "T" || kind == "t").then(|| (addr, words.collect::<Vec<_>>().join(" ")))
        })
        .collect()
}

/// One instruction `go tool objdump` lists: its address, function, file and line, and
/// whether it is a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instruction {
    pub addr: u64,
    pub len: u64,
    pub function: String,
    pub file: String,
    pub line: u32,
    pub call: Option<String>,
}

/// Every instruction of the functions whose names match `pattern` (`-s`), as
/// `go tool objdump` lists them in `binary`.
pub fn objdump(go: &Path, binary: &Path, pattern: &str) -> Vec<Instruction> {
    let out = command(go)
        .args(["tool", "objdump", "-s", pattern])
        .arg(binary)
        .output()
        .expect("go tool objdump");
    assert!(
        out.status.success(),
        "go tool objdump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut function = String::new();
    let mut found = Vec::new();
    // "TEXT main.leaf(SB) /path/spin.go", then "  spin.go:22\t0x4553a0\t\t493b6610\t\tCMPQ ..."
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(rest) = line.strip_prefix("TEXT ") {
            function = rest.split("(SB)").next().unwrap_or_default().to_owned();
            continue;
        }
        let fields: Vec<&str> = line.trim().split('\t').filter(|f| !f.is_empty()).collect();
        let [place, addr, code, text, ..] = fields[..] else {
            continue;
        };
        let (Some((file, line)), Some(addr)) = (place.rsplit_once(':'), addr.strip_prefix("0x")) else {
            continue;
        };
        let (Ok(line), Ok(addr)) = (line.parse(), u64::from_str_radix(addr, 16)) else {
            continue;
        };
        found.push(Instruction {
            addr,
            len: code.len() as u64 / 2,
            function: function.clone(),
            file: file.to_owned(),
            line,
            call: text.strip_prefix("CALL ").map(|t| t.trim().to_owned()),
        });
    }
    found
}
