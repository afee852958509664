//! Rebuild the program when bpf-linker changes (it is the linker of this crate) and say clearly
//! when it is missing, instead of the obscure linker error the BPF target gives. Declare the
//! `bpf_target_arch` cfg (the architecture whose registers the program reads, `src/regs/`):
//! aya-build passes it when `tracer-user` builds the program; a direct build (clippy) gets the
//! host's, or `AYA_BPF_TARGET_ARCH`'s.
use which::which;

fn main() {
    match which("bpf-linker") {
        Ok(path) => println!("cargo:rerun-if-changed={}", path.display()),
        Err(_) => panic!("bpf-linker not found in PATH: run `cargo xtask setup`"),
    }
    if let Err(err) = aya_build::emit_bpf_target_arch_cfg() {
        panic!("bpf_target_arch: {err}");
    }
}
