//! The repository's tracked files point nowhere outside it, and the check itself tells a build
//! machine's path from a system path.

use std::process::Command;

use super::findings;

/// No tracked text file refers to a sibling `shared` directory or to an absolute path of a
/// build machine.
#[test]
fn no_tracked_file_points_outside_the_repository() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let listed = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
        .expect("git ls-files runs (the test needs a git checkout)");
    assert!(listed.status.success(), "git ls-files failed");
    let mut found = Vec::new();
    let mut checked = 0;
    for path in String::from_utf8_lossy(&listed.stdout)
        .split('\0')
        .filter(|p| !p.is_empty())
    {
        let Ok(bytes) = std::fs::read(root.join(path)) else {
            continue;
        };
        if bytes.contains(&0) {
            continue; // binary: fixtures, compiled objects
        }
        checked += 1;
        found.extend(findings(path, &String::from_utf8_lossy(&bytes)));
    }
    assert!(checked > 100, "only {checked} text files were checked");
    assert!(
        found.is_empty(),
        "tracked files point outside the repository:\n{}",
        found.join("\n")
    );
}

/// A build machine's directories and the sibling `shared` are found; system and relative paths
/// are not. (The bad examples are spelled in pieces, as in the module.)
#[test]
fn machine_paths_are_told_from_system_paths() {
    for bad in [
        concat!("see /", "work/shared/notes.md"),
        concat!("(format: `/", "work/shared/x`)"),
        concat!("run ..", "/shared/vmtest/run.sh"),
        concat!("cache in /", "root/.cache"),
        concat!("\"/", "home/user/src\""),
        concat!("/", "home/x at the start"),
    ] {
        assert_eq!(findings("f", bad).len(), 1, "{bad}");
    }
    for fine in [
        "`/proc/PID/root/<path>` so paths resolve",
        "#   <suite>/root/  the unpacked files",
        "$dir/root/lib/modules",
        "${XDG_CACHE_HOME:-~/.cache}/sframe-trace/vmtest",
        "/usr/lib/debug/.build-id",
    ] {
        assert!(findings("f", fine).is_empty(), "{fine}");
    }
    assert_eq!(
        findings("a.rs", concat!("x\n/", "work/y\n")),
        [concat!("a.rs:2: /", "work/y")]
    );
}
