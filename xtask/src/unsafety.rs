//! `unsafe` only in the system-call layer: in tracer-user, every `unsafe` block, function or
//! impl is under `src/sys/` (safe wrappers, each with a `// SAFETY:` comment: [`ALLOWED`]);
//! `lib.rs` and `main.rs` deny `unsafe_code` elsewhere,
//! and this check says so to anyone running `cargo test -p xtask`. Comments and the insides of
//! string literals are not read (`imports::code_of`). [`outside`] is the pure part; a unit test
//! runs it over tracer-user.

/// The files of tracer-user's `src` that may hold `unsafe`: the `sys` layer alone.
pub const ALLOWED: [&str; 1] = ["sys/"];

/// Each file of `files` (paths relative to the crate's `src`, `/`-separated, with their text)
/// outside `allowed` (path prefixes) that uses the keyword `unsafe` in code, with how often.
pub fn outside(files: &[(String, String)], allowed: &[&str]) -> Vec<(String, usize)> {
    let mut found: Vec<(String, usize)> = files
        .iter()
        .filter(|(path, _)| !allowed.iter().any(|prefix| path.starts_with(prefix)))
        .filter_map(|(path, text)| {
            let uses = keyword_uses(&super::imports::code_of(text), "unsafe");
            (uses > 0).then(|| (path.clone(), uses))
        })
        .collect();
    found.sort();
    found
}

/// How often `word` stands alone in `code` (not inside a longer identifier: `unsafe_code` is
/// not `unsafe`).
fn keyword_uses(code: &str, word: &str) -> usize {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices(word)
        .filter(|&(at, _)| {
            let before = code[..at].chars().next_back();
            let after = code[at + word.len()..].chars().next();
            !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
        })
        .count()
}

#[cfg(test)]
mod tests;
