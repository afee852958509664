//! The pure crate stays pure: tracer-unwind (the readers of unwind information) has no cargo
//! features, depends on none of the crates that load programs, run tasks, symbolize or make
//! system calls ([`FORBIDDEN`]), forbids `unsafe` code, and no file of it is compiled only
//! under a feature. Read from the checkout's text (no TOML parser: the manifest's dependency
//! tables are read line by line); a unit test runs it on the real crate.

/// Crates tracer-unwind may not depend on, in any dependency table.
pub const FORBIDDEN: [&str; 4] = ["aya", "tokio", "blazesym", "libc"];

/// What is wrong with the manifest `text`: a `[features]` table, or a dependency in
/// [`FORBIDDEN`] (`name = ...`, `name.workspace = ...` or a `[dependencies.name]` table, in
/// `[dependencies]`, `[dev-dependencies]`, `[build-dependencies]` or a target's).
pub fn manifest_problems(text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut in_dependencies = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let header = header.trim();
            if header == "features" {
                problems.push("a [features] table".to_owned());
            }
            in_dependencies = header.ends_with("dependencies");
            if let Some((table, name)) = header.rsplit_once('.')
                && table.ends_with("dependencies")
                && FORBIDDEN.contains(&name.trim().trim_matches('"'))
            {
                problems.push(format!("depends on {}", name.trim()));
            }
            continue;
        }
        if in_dependencies {
            let name = line
                .split(['=', '.'])
                .next()
                .unwrap_or_default()
                .trim()
                .trim_matches('"');
            if FORBIDDEN.contains(&name) {
                problems.push(format!("depends on {name}"));
            }
        }
    }
    problems
}

/// What is wrong with the crate's sources `files` (paths relative to `src`, with their text):
/// `lib.rs` without `#![forbid(unsafe_code)]`, or a file with `cfg(feature`.
pub fn source_problems(files: &[(String, String)]) -> Vec<String> {
    let mut problems = Vec::new();
    match files.iter().find(|(path, _)| path == "lib.rs") {
        Some((_, text)) if text.lines().any(|l| l.trim() == "#![forbid(unsafe_code)]") => {}
        _ => problems.push("lib.rs does not forbid unsafe code".to_owned()),
    }
    for (path, text) in files {
        if text.contains("cfg(feature") {
            problems.push(format!("{path}: compiled under a feature"));
        }
    }
    problems
}

#[cfg(test)]
mod tests;
