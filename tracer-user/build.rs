//! Builds the eBPF program (`tracer-ebpf`) with aya-build and leaves it in `OUT_DIR/tracer`
//! for `include_bytes_aligned!`.
//!
//! The program is built by the toolchain running this build (stable is fine): `RUSTC_BOOTSTRAP=1`
//! lets it use `-Z build-std=core` for the bpf target, so a machine without nightly works too.
//! bpf-linker must be built against the same LLVM major (`cargo xtask setup` does that).

fn main() -> anyhow::Result<()> {
    commit();
    build_ebpf()?;
    Ok(())
}

/// `SFRAME_TRACE_COMMIT` for `--version`: the commit this is built from (`+dirty` when the
/// tree has changes), or `SFRAME_TRACE_COMMIT` from the environment (a source tarball has no
/// git), else `unknown`. Rebuilt when HEAD moves.
fn commit() {
    println!("cargo:rerun-if-env-changed=SFRAME_TRACE_COMMIT");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let commit = std::env::var("SFRAME_TRACE_COMMIT").ok().or_else(|| {
        let head = git(&["rev-parse", "--short=12", "HEAD"])?;
        if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
            println!("cargo:rerun-if-changed={dir}/HEAD");
            // A worktree keeps its branches in the common directory.
            let common = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]).unwrap_or(dir);
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                println!("cargo:rerun-if-changed={common}/{branch}");
            }
        }
        let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
        Some(if dirty { format!("{head}+dirty") } else { head })
    });
    println!(
        "cargo:rustc-env=SFRAME_TRACE_COMMIT={}",
        commit.unwrap_or_else(|| "unknown".to_owned())
    );
}

fn build_ebpf() -> anyhow::Result<()> {
    use anyhow::Context as _;

    let metadata = cargo_metadata::MetadataCommand::new()
        .no_deps()
        .exec()
        .context("cargo metadata")?;
    let ebpf = metadata
        .packages
        .into_iter()
        .find(|p| p.name.as_str() == "tracer-ebpf")
        .context("tracer-ebpf is not in the workspace")?;
    let root_dir = ebpf
        .manifest_path
        .parent()
        .context("tracer-ebpf manifest has no parent directory")?
        .to_string();

    println!("cargo:rerun-if-env-changed=RUSTUP_TOOLCHAIN");
    let toolchain = std::env::var("RUSTUP_TOOLCHAIN").unwrap_or_else(|_| "stable".to_owned());
    // SAFETY: build scripts are single-threaded here; the variable is read by aya-build and
    // inherited by the cargo it spawns.
    unsafe { std::env::set_var("RUSTC_BOOTSTRAP", "1") };
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "tracer-ebpf",
            root_dir: &root_dir,
            ..Default::default()
        }],
        aya_build::Toolchain::Custom(&toolchain),
    )
}
