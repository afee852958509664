//! `--short-names`: C++ and Rust function names as a flame graph wants them, without
//! parameter lists, template or generic arguments and Rust's hash suffix:
//! `std::vector<int, std::allocator<int> >::push_back(int const&)` is `std::vector::push_back`,
//! `<alloc::vec::Vec<T> as core::ops::Drop>::drop` is `<alloc::vec::Vec as core::ops::Drop>::drop`.
//! Only for the folded and SVG outputs; pprof and json keep the full names. Linear in the name,
//! never fails: text it cannot read is kept.

/// `name` shortened (see the module doc).
pub fn short(name: &str) -> String {
    let name = strip_hash(name);
    let name = strip_parameters(name);
    strip_generics(name)
}

/// Without Rust's legacy `::h0123456789abcdef` suffix.
fn strip_hash(name: &str) -> &str {
    match name.rsplit_once("::h") {
        Some((head, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => head,
        _ => name,
    }
}

/// Without the trailing parameter list (and the qualifiers after it: `const`, `&`, `&&`,
/// `volatile`, `noexcept`): the last `(...)` group, when the name ends with it.
fn strip_parameters(name: &str) -> &str {
    let mut end = name.trim_end();
    loop {
        let before = end;
        for qualifier in [" const", " volatile", " noexcept", "&&", "&"] {
            end = end.strip_suffix(qualifier).unwrap_or(end).trim_end();
        }
        if end == before {
            break;
        }
    }
    if !end.ends_with(')') {
        return name;
    }
    let mut depth = 0usize;
    for (i, c) in end.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    // `operator()` keeps its own parentheses.
                    let head = &end[..i];
                    return if head.is_empty() { name } else { head };
                }
            }
            _ => {}
        }
    }
    name
}

/// Without `<...>` groups that follow a name (template and generic arguments); a `<` that
/// opens a qualified path (`<T as Trait>::f`, at the start or after `::`) is kept, its
/// contents shortened; the `<` of an operator (`operator<<`, `operator->`) is kept.
fn strip_generics(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    // For each open `<`: whether it is kept (a qualified path) or dropped (arguments).
    let mut open: Vec<bool> = Vec::new();
    let dropping = |open: &[bool]| open.iter().any(|kept| !kept);
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            // An operator's name (`operator<<`, `operator->`, `operator<=`) is text.
            '<' | '>' | '-' | '=' | '!' if out.ends_with("operator") => {
                if !dropping(&open) {
                    out.push(c);
                }
                while let Some(&next) = chars.peek().filter(|n| matches!(n, '<' | '>' | '=')) {
                    chars.next();
                    if !dropping(&open) {
                        out.push(next);
                    }
                }
            }
            '<' => {
                let head = out.trim_end();
                let qualified = head.is_empty() || head.ends_with("::") || head.ends_with('<') || head.ends_with(',');
                let kept = qualified && !dropping(&open);
                open.push(kept);
                if kept {
                    out.push(c);
                }
            }
            '>' => match open.pop() {
                Some(true) | None => out.push(c),
                Some(false) => {}
            },
            _ if dropping(&open) => {}
            _ => out.push(c),
        }
    }
    if !open.is_empty() {
        // Unbalanced: the name is not one this reads.
        return name.to_owned();
    }
    out
}

#[cfg(test)]
mod tests;
