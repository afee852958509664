//! Which Debian package owns a file, from dpkg's own file lists (`/var/lib/dpkg/info/*.list`,
//! one path per line, named after the package and, for multi-arch packages, its
//! architecture): so that the advice for an object without symbols names the debug package to
//! install (`PACKAGE-dbgsym`) rather than a command to find it. Read at the end of a session,
//! only for the few objects the advice names, within [`MAX_LISTS`] files and [`MAX_BYTES`]
//! bytes in all; a file list that is not a regular file is skipped.

use std::{io::Read as _, path::Path};

/// The file lists read at most, and their bytes in all (a Debian host with 3,000 packages
/// has about 25 MB of them).
pub const MAX_LISTS: usize = 20_000;
pub const MAX_BYTES: u64 = 128 << 20;

/// For each of `paths` that a package in `info` (dpkg's `info` directory) lists, the path and
/// its package (without `:ARCH`). A path under a merged `/usr` is also looked for under the
/// directory dpkg may list it by (`/usr/lib/x` as `/lib/x`, `/usr/bin/x` as `/bin/x`, and
/// back).
pub fn owners(info: &Path, paths: &[&str]) -> Vec<(String, String)> {
    let wanted: Vec<(&str, Vec<String>)> = paths.iter().map(|&p| (p, spellings(p))).collect();
    let mut found: Vec<(String, String)> = Vec::new();
    let Ok(dir) = std::fs::read_dir(info) else {
        return found;
    };
    let mut budget = MAX_BYTES;
    for entry in dir.flatten().take(MAX_LISTS) {
        if found.len() == wanted.len() || budget == 0 {
            break;
        }
        let name = entry.file_name();
        let Some(package) = name.to_str().and_then(|n| n.strip_suffix(".list")) else {
            continue;
        };
        let Ok(file) = crate::sys::objfile::open_regular(&entry.path()) else {
            continue;
        };
        let mut text = String::new();
        if file.take(budget).read_to_string(&mut text).is_err() {
            continue;
        }
        budget = budget.saturating_sub(text.len() as u64);
        let package = package.split_once(':').map_or(package, |(name, _arch)| name);
        for line in text.lines() {
            for (path, spellings) in &wanted {
                if spellings.iter().any(|s| s == line) && !found.iter().any(|(p, _)| p == path) {
                    found.push(((*path).to_owned(), package.to_owned()));
                }
            }
        }
    }
    found.sort_by_key(|(path, _)| paths.iter().position(|p| p == path));
    found
}

/// `path` and the path it has on the other side of a merged `/usr`.
fn spellings(path: &str) -> Vec<String> {
    let mut out = vec![path.to_owned()];
    for (usr, root) in [
        ("/usr/lib/", "/lib/"),
        ("/usr/lib64/", "/lib64/"),
        ("/usr/bin/", "/bin/"),
        ("/usr/sbin/", "/sbin/"),
    ] {
        if let Some(rest) = path.strip_prefix(usr) {
            out.push(format!("{root}{rest}"));
        } else if let Some(rest) = path.strip_prefix(root) {
            out.push(format!("{usr}{rest}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::owners;

    /// Packages are found by their lists, with the architecture left out of the name, across
    /// a merged `/usr`, in the order asked; paths no package lists are left out.
    #[test]
    fn owners_are_read_from_the_file_lists() {
        let info = tempfile::tempdir().expect("tempdir");
        let write = |name: &str, text: &str| std::fs::write(info.path().join(name), text).expect("write");
        write("libz1:amd64.list", "/.\n/lib\n/lib/x86_64-linux-gnu/libz.so.1.2.13\n");
        write("bash.list", "/.\n/bin/bash\n/usr/share/doc/bash\n");
        write("bash.md5sums", "0123 /usr/bin/sqlite3\n");
        write("sqlite3.list", "/usr/bin/sqlite3\n");
        let got = owners(
            info.path(),
            &[
                "/usr/bin/bash",
                "/nowhere.so",
                "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13",
                "/usr/bin/sqlite3",
            ],
        );
        let want = [
            ("/usr/bin/bash", "bash"),
            ("/usr/lib/x86_64-linux-gnu/libz.so.1.2.13", "libz1"),
            ("/usr/bin/sqlite3", "sqlite3"),
        ];
        let want: Vec<(String, String)> = want.iter().map(|(p, n)| ((*p).to_owned(), (*n).to_owned())).collect();
        assert_eq!(got, want);
        assert!(owners(&info.path().join("missing"), &["/bin/bash"]).is_empty());
    }
}
