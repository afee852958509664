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

/// The eBPF program, built once per machine architecture it is built for and shared by every
/// build of this package (debug or release, this target or a static one, a check): its build
/// does not depend on theirs (aya-build builds it `--release` for the bpf target, with the
/// architecture as its only setting), so each of them building it anew in its own `OUT_DIR`
/// would take a minute for nothing. aya-build runs with `OUT_DIR` set to
/// `target/ebpf/ARCH`, where its cargo keeps the program's target directory (its lock makes
/// concurrent builds wait; its fingerprints rebuild on change), and the program it built is
/// copied from there into this build's `OUT_DIR`, under another name first, then renamed.
fn build_ebpf() -> anyhow::Result<()> {
    use anyhow::Context as _;

    let metadata = cargo_metadata::MetadataCommand::new()
        .no_deps()
        .exec()
        .context("cargo metadata")?;
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").context("CARGO_CFG_TARGET_ARCH not set")?;
    let endian = std::env::var("CARGO_CFG_TARGET_ENDIAN").context("CARGO_CFG_TARGET_ENDIAN not set")?;
    let bpf_target = if endian == "big" {
        "bpfeb-unknown-none"
    } else {
        "bpfel-unknown-none"
    };
    let shared = metadata.target_directory.as_std_path().join("ebpf").join(&arch);
    std::fs::create_dir_all(&shared).with_context(|| format!("creating {}", shared.display()))?;
    let out_dir = std::env::var_os("OUT_DIR").context("OUT_DIR not set")?;
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
    // SAFETY: build scripts are single-threaded here; the variables are read by aya-build and
    // inherited by the cargo it spawns (OUT_DIR is put back before anything else reads it).
    // clippy's driver, when this build is linted (`cargo clippy`, or `cargo xtask test`'s
    // linting builds), is not the eBPF build's: it is linted for its own target, and its
    // build stays the one every build of this package shares.
    unsafe {
        std::env::set_var("RUSTC_BOOTSTRAP", "1");
        std::env::set_var("OUT_DIR", &shared);
        std::env::remove_var("RUSTC_WORKSPACE_WRAPPER");
        std::env::remove_var("CLIPPY_ARGS");
    }
    let built = aya_build::build_ebpf(
        [aya_build::Package {
            name: "tracer-ebpf",
            root_dir: &root_dir,
            ..Default::default()
        }],
        aya_build::Toolchain::Custom(&toolchain),
    );
    // SAFETY: as above.
    unsafe { std::env::set_var("OUT_DIR", &out_dir) };
    built?;
    // The program as its cargo wrote it (not aya-build's copy beside it, which a concurrent
    // build may be rewriting).
    let program = shared
        .join("aya-build/target/tracer-ebpf")
        .join(bpf_target)
        .join("release/tracer");
    let out_dir = std::path::PathBuf::from(out_dir);
    let partial = out_dir.join("tracer.partial");
    std::fs::copy(&program, &partial).with_context(|| format!("copying {}", program.display()))?;
    std::fs::rename(&partial, out_dir.join("tracer")).context("renaming the eBPF program into place")?;
    Ok(())
}
