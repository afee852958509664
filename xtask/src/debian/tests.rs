//! Unit tests of the private apt and the unpacked roots: the pure parts (sources, names, the
//! dependency closure, the merged-/usr links); each test says what it proves.

use super::{KEYRING, root, sources_list, suite_key};

/// Stable suites get their updates and security archives; sid and backports only themselves.
#[test]
fn sources_of_stable_and_rolling_suites() {
    let stable = sources_list("bookworm", "amd64", "http://m/debian", "http://m/debian-security");
    assert_eq!(stable.lines().count(), 3);
    assert!(stable.contains("http://m/debian-security bookworm-security main"));
    assert!(stable.contains(&format!("signed-by={KEYRING}")));
    for rolling in ["sid", "bookworm-backports"] {
        let list = sources_list(rolling, "amd64", "http://m/debian", "http://m/debian-security");
        assert_eq!(
            list,
            format!("deb [arch=amd64 signed-by={KEYRING}] http://m/debian {rolling} main\n")
        );
    }
}

/// A suite's state is named by the suite alone for amd64, with the architecture for others.
#[test]
fn suite_keys() {
    assert_eq!(suite_key("bookworm", "arm64"), "bookworm-arm64");
    assert_eq!(suite_key("bookworm", "amd64"), "bookworm");
}

/// `apt-cache depends --recurse` output: the unindented names, without virtual packages,
/// each once.
#[test]
fn package_closure_of_apt_depends() {
    let depends = "libc6\n  Depends: libgcc-s1\n  Breaks: <foo>\nlibgcc-s1\n  Depends: gcc-12-base\n  \
                   Depends: libc6\ngcc-12-base\n<awk>\nlibc6\n";
    assert_eq!(root::package_closure(depends), ["libc6", "libgcc-s1", "gcc-12-base"]);
}

/// A merged-/usr root (only `usr/lib64`, `usr/bin`...) gets `X -> usr/X` links; a root whose
/// packages ship `/bin` themselves (bookworm) keeps it, and nothing is linked to a missing
/// `usr/X`.
#[test]
fn merged_usr_links_only_where_usr_alone_has_the_directory() {
    let trixie = ["usr/bin", "usr/lib", "usr/lib64", "usr/sbin"];
    let links = root::merged_usr_links(|p| trixie.contains(&p));
    assert_eq!(
        links,
        [
            ("bin", "usr/bin".to_owned()),
            ("sbin", "usr/sbin".to_owned()),
            ("lib", "usr/lib".to_owned()),
            ("lib64", "usr/lib64".to_owned()),
        ]
    );
    let bookworm = ["bin", "lib", "usr/bin", "usr/lib"];
    assert!(root::merged_usr_links(|p| bookworm.contains(&p)).is_empty());
}
