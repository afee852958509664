//! Rebuild the program when bpf-linker changes (it is the linker of this crate) and say clearly
//! when it is missing, instead of the obscure linker error the BPF target gives.
use which::which;

fn main() {
    match which("bpf-linker") {
        Ok(path) => println!("cargo:rerun-if-changed={}", path.display()),
        Err(_) => panic!("bpf-linker not found in PATH: run `cargo xtask setup`"),
    }
}
