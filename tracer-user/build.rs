//! Builds the eBPF program (`tracer-ebpf`) with aya-build and leaves it in `OUT_DIR/tracer`
//! for `include_bytes_aligned!`. Only with the `ebpf` feature (the default).
//!
//! The program is built by the toolchain running this build (stable is fine): `RUSTC_BOOTSTRAP=1`
//! lets it use `-Z build-std=core` for the bpf target, so a machine without nightly works too.
//! bpf-linker must be built against the same LLVM major (`cargo xtask setup` does that).

fn main() -> anyhow::Result<()> {
    #[cfg(feature = "ebpf")]
    build_ebpf()?;
    Ok(())
}

#[cfg(feature = "ebpf")]
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
