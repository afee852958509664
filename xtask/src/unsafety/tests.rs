//! The check finds `unsafe` code outside the allowed files (and nothing in comments, strings or
//! longer identifiers), and tracer-user has none.

use std::path::Path;

use super::{ALLOWED, outside};

fn crate_of(files: &[(&str, &str)]) -> Vec<(String, String)> {
    files.iter().map(|(p, t)| ((*p).to_owned(), (*t).to_owned())).collect()
}

/// An unsafe block, impl or function outside `sys/` is found, with its count; the same in
/// `sys/` is not, nor the word in a comment, a string, a raw string or the lint's name; a
/// module named like an old exception (`objfile/`) is no longer one.
#[test]
fn unsafe_outside_sys_is_found_and_nothing_else() {
    let found = outside(
        &crate_of(&[
            ("lib.rs", "#![deny(unsafe_code)]\n#[allow(unsafe_code)]\npub mod sys;\n"),
            (
                "trace/launch.rs",
                "fn f() { unsafe { libc::kill(1, 9) }; }\nunsafe impl Send for X {}\n",
            ),
            ("heap.rs", "pub unsafe fn g() {}\n"),
            ("sys/process.rs", "pub fn kill() { unsafe { libc::kill(1, 9) }; }\n"),
            ("objfile/sealed.rs", "fn h() { unsafe { libc::getpid() }; }\n"),
            (
                "outfile.rs",
                "// unsafe in a comment\n/* unsafe { */\nconst S: &str = \"unsafe {\";\nconst R: &str = r#\"unsafe\"#;\n",
            ),
        ]),
        &ALLOWED,
    );
    assert_eq!(
        found,
        [
            ("heap.rs".to_owned(), 1),
            ("objfile/sealed.rs".to_owned(), 1),
            ("trace/launch.rs".to_owned(), 2)
        ]
    );
}

/// tracer-user's sources, read from its `src`: `unsafe` only in `sys/`.
#[test]
fn the_tracer_keeps_unsafe_in_sys() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root");
    let src = root.join("tracer-user").join("src");
    let mut files = Vec::new();
    crate::imports::tests::read_tree(&src, &src, &mut files);
    assert!(
        files.iter().any(|(path, _)| path == "sys/mod.rs"),
        "tracer-user has a sys layer"
    );
    let found = outside(&files, &ALLOWED);
    assert!(
        found.is_empty(),
        "unsafe outside tracer-user/src/sys (move it behind a safe wrapper there):\n{found:?}"
    );
}
