//! `cargo xtask setup`: install what building and testing need, idempotently, saying what it
//! does. Apt packages (gcc, binutils), the rust-src, clippy and rustfmt components of the
//! toolchain in use, bpf-linker built against this rustc's own libLLVM (the linker must use
//! the LLVM major of the rustc that compiles the eBPF crate), for fuzzing, the nightly
//! toolchain and cargo-fuzz, and the private trixie root of `python3.13` the Python tests run
//! (`python_root`).

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

use crate::cmd::{output, sh};

pub mod go_roots;
pub mod java_roots;
pub mod node_root;
pub mod python_root;

/// The bpf-linker release known to build with this rustc and to link aya-ebpf 0.2 programs.
const BPF_LINKER_VERSION: &str = "0.13.0";

/// Debian packages the build, the demo and the tests use (golang-go: `go tool pprof` reads the
/// pprof output in the format tests, and the Go tests build their program with it and judge
/// it with `go tool nm` and `go tool objdump`; python3-venv: the OTLP tests' receiver runs in a venv with
/// the official opentelemetry-proto and grpcio packages; g++: cargo-fuzz builds libFuzzer;
/// strace: a test counts the tracer's opens of a traced file; nodejs and openjdk-17-jdk-headless:
/// the JIT tests read their perf maps).
const APT_PACKAGES: &[&str] = &[
    "gcc",
    "g++",
    "libc6-dev",
    "binutils",
    "make",
    "golang-go",
    "python3-venv",
    "strace",
    "nodejs",
    "openjdk-17-jdk-headless",
    // The debuginfod server of the symbol tests; xz makes their MiniDebugInfo.
    "debuginfod",
    "xz-utils",
    // ld.so's function symbols (its own file names none), for the disassembly judge of stacks
    // through the dynamic loader.
    "libc6-dbg",
    // The aarch64 cross build: its linker (and C compiler, for the aarch64 test objects).
    "gcc-aarch64-linux-gnu",
    "libc6-dev-arm64-cross",
    // The keyring the private apt (`crate::debian`) checks trixie's packages with.
    "debian-archive-keyring",
];

pub fn setup() -> anyhow::Result<()> {
    apt_packages()?;
    rust_components()?;
    rust_targets()?;
    bpf_linker()?;
    fuzz_tools()?;
    python_root::python_root()?;
    python_root::sid_python_root()?;
    go_roots::go_roots()?;
    java_roots::java_root()?;
    node_root::node_root()?;
    eprintln!("setup: done");
    Ok(())
}

fn apt_packages() -> anyhow::Result<()> {
    apt(APT_PACKAGES)
}

/// Whether the Debian package `package` is installed.
pub fn installed(package: &str) -> bool {
    output(Command::new("dpkg-query").args(["-W", "-f=${Status}", package]))
        .is_some_and(|status| status.contains("install ok installed"))
}

/// Install the Debian packages of `packages` that are missing (one `apt-get update` first).
pub fn apt(packages: &[&str]) -> anyhow::Result<()> {
    let missing: Vec<&str> = packages.iter().copied().filter(|pkg| !installed(pkg)).collect();
    if missing.is_empty() {
        eprintln!("setup: apt packages present ({})", packages.join(", "));
        return Ok(());
    }
    sh(Command::new("apt-get").arg("update").arg("-q"))?;
    sh(Command::new("apt-get")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .args([
            "-o",
            "DPkg::Lock::Timeout=300",
            "install",
            "-y",
            "-q",
            "--no-install-recommends",
        ])
        .args(&missing))
}

/// rust-src (the eBPF crate builds `core` for the bpf target), clippy and rustfmt (the test run
/// lints and checks formatting), for the toolchain in use.
fn rust_components() -> anyhow::Result<()> {
    let installed = output(Command::new("rustup").args(["component", "list", "--installed"]))
        .context("rustup is needed to add toolchain components")?;
    let missing: Vec<&str> = ["rust-src", "clippy", "rustfmt"]
        .into_iter()
        .filter(|c| !installed.lines().any(|l| l.starts_with(c)))
        .collect();
    if missing.is_empty() {
        eprintln!("setup: rust-src, clippy and rustfmt present");
        return Ok(());
    }
    sh(Command::new("rustup").args(["component", "add"]).args(&missing))
}

/// The standard library of the targets the tracer cross-builds for (`aarch64-unknown-linux-gnu`,
/// linked by Debian's `aarch64-linux-gnu-gcc`, see `.cargo/config.toml`).
fn rust_targets() -> anyhow::Result<()> {
    const TARGETS: &[&str] = &["aarch64-unknown-linux-gnu"];
    let installed = output(Command::new("rustup").args(["target", "list", "--installed"]))
        .context("rustup is needed to add targets")?;
    let missing: Vec<&str> = TARGETS
        .iter()
        .copied()
        .filter(|t| !installed.lines().any(|l| l.trim() == *t))
        .collect();
    if missing.is_empty() {
        eprintln!("setup: rust targets present ({})", TARGETS.join(", "));
        return Ok(());
    }
    sh(Command::new("rustup").args(["target", "add"]).args(&missing))
}

/// The nightly toolchain (minimal profile) and cargo-fuzz, which the test run fuzzes with: only
/// `fuzz/` builds with nightly, the rest keeps to the toolchain in use.
fn fuzz_tools() -> anyhow::Result<()> {
    if output(Command::new("rustup").args(["run", "nightly", "rustc", "--version"])).is_some() {
        eprintln!("setup: nightly toolchain present");
    } else {
        sh(Command::new("rustup").args(["toolchain", "install", "nightly", "--profile", "minimal"]))?;
    }
    if output(Command::new("cargo").args(["fuzz", "--version"])).is_some() {
        eprintln!("setup: cargo-fuzz present");
        return Ok(());
    }
    sh(Command::new("cargo").args(["install", "cargo-fuzz", "--locked"]))
}

/// The versioned libLLVM shipped in this rustc's sysroot, e.g. `libLLVM.so.22.1-rust-1.95.0-stable`.
fn rustc_libllvm() -> anyhow::Result<(PathBuf, String)> {
    let sysroot = output(Command::new("rustc").args(["--print", "sysroot"])).context("rustc --print sysroot")?;
    let lib = Path::new(sysroot.trim()).join("lib");
    let name = std::fs::read_dir(&lib)
        .with_context(|| format!("reading {}", lib.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .find(|n| n.starts_with("libLLVM.so."))
        .with_context(|| format!("no libLLVM.so.* in {}", lib.display()))?;
    Ok((lib, name))
}

/// The feature of bpf-linker that selects the LLVM major, e.g. `llvm-22` for `libLLVM.so.22.1-...`.
fn llvm_feature(libllvm: &str) -> anyhow::Result<String> {
    let major = libllvm
        .strip_prefix("libLLVM.so.")
        .and_then(|v| v.split('.').next())
        .filter(|m| m.chars().all(|c| c.is_ascii_digit()))
        .with_context(|| format!("cannot read the LLVM major from {libllvm}"))?;
    Ok(format!("llvm-{major}"))
}

/// Does an installed bpf-linker run, linked against exactly this rustc's libLLVM?
fn bpf_linker_matches(libllvm: &str) -> bool {
    let Some(path) = output(Command::new("sh").args(["-c", "command -v bpf-linker"])) else {
        return false;
    };
    let runs = output(Command::new("bpf-linker").arg("--version")).is_some();
    let linked = output(Command::new("ldd").arg(path.trim())).is_some_and(|l| l.contains(libllvm));
    runs && linked
}

fn bpf_linker() -> anyhow::Result<()> {
    let (lib, libllvm) = rustc_libllvm()?;
    if bpf_linker_matches(&libllvm) {
        eprintln!("setup: bpf-linker present, linked against {libllvm}");
        return Ok(());
    }
    // bpf-linker finds LLVM under $LLVM_PREFIX/lib; point a private prefix at rustc's own
    // libLLVM. The binary keeps this directory as its runpath, so it must persist.
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .context("neither CARGO_HOME nor HOME is set")?;
    let prefix = cargo_home.join("sframe-trace-llvm").join(&libllvm);
    let prefix_lib = prefix.join("lib");
    std::fs::create_dir_all(&prefix_lib).with_context(|| format!("creating {}", prefix_lib.display()))?;
    for link in ["libLLVM.so", libllvm.as_str()] {
        let dst = prefix_lib.join(link);
        let _ = std::fs::remove_file(&dst);
        std::os::unix::fs::symlink(lib.join(&libllvm), &dst).with_context(|| format!("linking {}", dst.display()))?;
    }
    eprintln!("setup: building bpf-linker against {libllvm} (about a minute)");
    sh(Command::new("cargo")
        .env("LLVM_PREFIX", &prefix)
        .args([
            "install",
            "--force",
            "--locked",
            "bpf-linker",
            "--version",
            BPF_LINKER_VERSION,
        ])
        .args(["--no-default-features", "--features"])
        .arg(llvm_feature(&libllvm)?))?;
    if !bpf_linker_matches(&libllvm) {
        bail!("bpf-linker was installed but does not run against {libllvm}; is ~/.cargo/bin on PATH?");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
