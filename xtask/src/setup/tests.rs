//! Unit tests of `setup`; each test says what it proves.

use super::*;

/// The bpf-linker feature is derived from the major of rustc's versioned libLLVM name.
#[test]
fn llvm_feature_from_library_name() {
    assert_eq!(llvm_feature("libLLVM.so.22.1-rust-1.95.0-stable").unwrap(), "llvm-22");
    assert!(llvm_feature("libLLVM.so.x").is_err());
}
