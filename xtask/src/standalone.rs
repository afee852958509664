//! The repository stands alone: no tracked text file may point outside it, neither up out of
//! the checkout into a sibling `shared` directory nor at a directory of the machine it was
//! written on (an absolute path under the `work`, `root` or `home` directories at the top of
//! the file system). System paths (`/proc/PID/root/...`, `/usr/...`) and paths relative to
//! something else (`<suite>/root/`) are fine. Checked by a unit test over `git ls-files`;
//! [`findings`] is the pure part. (The patterns are spelled in pieces so that this file does not
//! match them itself.)

/// Directories of a build machine that no tracked file may name.
const MACHINE_DIRS: &[&str] = &[concat!("/", "work/"), concat!("/", "root/"), concat!("/", "home/")];

/// The sibling directory the repository once leaned on.
const OUTSIDE: &str = concat!("..", "/shared");

/// `path:line: text` for every line of `text` that points outside the repository.
pub fn findings(path: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if points_outside(line) {
            out.push(format!("{path}:{}: {}", number + 1, line.trim()));
        }
    }
    out
}

fn points_outside(line: &str) -> bool {
    if line.contains(OUTSIDE) {
        return true;
    }
    MACHINE_DIRS.iter().any(|dir| {
        line.match_indices(dir).any(|(at, _)| {
            // An absolute path starts the word: nothing path-like just before its slash.
            let before = line[..at].chars().next_back();
            !before.is_some_and(|c| c.is_ascii_alphanumeric() || "_-.~/>}$".contains(c))
        })
    })
}

#[cfg(test)]
mod tests;
