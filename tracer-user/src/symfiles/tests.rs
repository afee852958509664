//! The pieces of symbol-file selection that need no files: build-id paths and the
//! configuration of the flags (`--offline` asks no server, a bad URL is refused).

use std::path::PathBuf;

use super::{SymbolConfig, build_id_path, hex, refusal};
use tracer_unwind::compressed::DecompressError;

#[test]
fn build_id_paths_are_as_gdb_lays_them_out() {
    assert_eq!(
        build_id_path(&[0x4d, 0x5e, 0x00, 0xcb]),
        Some(PathBuf::from(".build-id/4d/5e00cb.debug"))
    );
    assert_eq!(build_id_path(&[0x4d]), None);
    assert_eq!(build_id_path(&[]), None);
    assert_eq!(hex(&[0, 0xab, 0x10]), "00ab10");
}

#[test]
fn flags_configure_servers_unless_offline() {
    let urls = ["http://127.0.0.1:8002".to_owned()];
    let online = SymbolConfig::from_flags(false, Vec::new(), &urls, false).expect("valid");
    assert!(
        online
            .debuginfod
            .as_ref()
            .is_some_and(super::debuginfod::Client::has_servers)
    );
    let offline = SymbolConfig::from_flags(true, vec!["/d".into()], &urls, true).expect("valid");
    assert!(offline.no_user_symbols);
    assert!(
        !offline
            .debuginfod
            .as_ref()
            .is_some_and(super::debuginfod::Client::has_servers)
    );
    let bad = SymbolConfig::from_flags(false, Vec::new(), &["https://x".to_owned()], false);
    assert!(bad.is_err_and(|e| e.contains("only http://")));
}

#[test]
fn refusals_have_summary_names() {
    let section = ".debug_info".to_owned();
    assert_eq!(
        refusal(&DecompressError::LongerThanStated {
            section: section.clone(),
            stated: 1
        }),
        "compressed_section_size_lies"
    );
    assert_eq!(
        refusal(&DecompressError::Unbounded { section, cap: 1 }),
        "compressed_section_too_large"
    );
}

/// Regression (an xz bomb in `.gnu_debugdata` was decompressed to 512 MiB before it was refused):
/// a MiniDebugInfo file over its cap has a reason of its own; the cap is lowered, never raised,
/// by `--max-symbol-memory`.
#[test]
fn minidebuginfo_over_its_cap_is_named() {
    assert_eq!(
        refusal(&DecompressError::Unbounded {
            section: ".gnu_debugdata".to_owned(),
            cap: 1
        }),
        "minidebuginfo_too_large"
    );
    assert_eq!(tracer_unwind::compressed::MAX_GNU_DEBUGDATA, 32 << 20);
}

/// A program only root can change, in a directory others can write to (a sticky, world-writable
/// one, as `/tmp`): its debug link would find whatever another user put beside it, so it is
/// read through its sealed copy (links renamed). In a directory only root writes, the program
/// is read as it is.
#[test]
fn a_program_in_a_directory_others_write_is_read_through_its_copy() {
    use std::os::unix::fs::PermissionsExt as _;
    if crate::sys::process::effective_uid() != 0 {
        eprintln!("SKIPPED: a file only root can change needs root");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let program = dir.path().join("linked");
    let source = dir.path().join("linked.c");
    std::fs::write(&source, "int main(void) { return 0; }\n").expect("write");
    let status = std::process::Command::new("cc")
        .args(["-g", "-O0", "-o"])
        .arg(&program)
        .arg(&source)
        .status()
        .expect("cc runs");
    assert!(status.success());
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    assert_eq!(
        super::symbol_file(None, Some(&program)).as_deref(),
        Some(program.as_path()),
        "only root writes here: the program itself"
    );
    // Another copy: the first one's answer is kept for its identity.
    let shared = dir.path().join("shared");
    std::fs::copy(&program, &shared).expect("copy");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let read = super::symbol_file(None, Some(&shared)).expect("a file is read");
    assert_ne!(read, shared, "others write here: the sealed copy");
    assert!(read.starts_with("/proc/self/fd"), "{}", read.display());
}
