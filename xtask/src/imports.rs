//! No import circles: inside each crate of the workspace, the files form a graph with an arrow
//! from a file to the file of every module of the crate it names (in `use` items and in code,
//! through `crate::`, `super::`, `self::` or a child module's name), and that graph has no
//! cycle. A module's use of its own enclosing modules is no arrow: they declare it and compose
//! it, and it may use what they hold (`super::`) as their own code does. Comments are not read, and neither are tests (`tests.rs`, `tests_*.rs`, files under a
//! `tests` directory): a test module reaches into what it tests. [`circles`] is the pure part; a
//! unit test runs it over every crate of the checkout.

use std::collections::{BTreeMap, BTreeSet};

/// The circles among `files` (paths relative to the crate's `src`, `/`-separated, with their
/// text): each circle the files of one strongly connected part of more than one file, sorted;
/// the circles sorted.
pub fn circles(files: &[(String, String)]) -> Vec<Vec<String>> {
    let modules: BTreeMap<Vec<String>, &str> = files
        .iter()
        .filter(|(path, _)| !is_test(path))
        .map(|(path, _)| (module_of(path), path.as_str()))
        .collect();
    let mut arrows: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (path, text) in files.iter().filter(|(path, _)| !is_test(path)) {
        let here = module_of(path);
        let to = arrows.entry(path.as_str()).or_default();
        for named in named_paths(&code_of(text)) {
            let Some(absolute) = absolute(&here, &named, &modules) else {
                continue;
            };
            if let Some((module, file)) = file_of(&absolute, &modules)
                && !here.starts_with(module)
            {
                to.insert(file);
            }
        }
    }
    strongly_connected(&arrows)
}

/// Whether `path` holds tests only.
fn is_test(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name == "tests.rs" || name.starts_with("tests_") || path.split('/').any(|part| part == "tests")
}

/// The module a file is: `lib.rs`/`main.rs` the root, `a/mod.rs` and `a.rs` module `a`.
fn module_of(path: &str) -> Vec<String> {
    let path = path.strip_suffix(".rs").unwrap_or(path);
    let mut parts: Vec<String> = path.split('/').map(str::to_owned).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// `text` without its comments (line and block) and without the insides of its string
/// literals, so that a path in a comment or a string names nothing.
pub(crate) fn code_of(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1)) {
            (b'/', Some(b'/')) => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            (b'/', Some(b'*')) => {
                i += 2;
                while i < bytes.len() && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                i += 2;
            }
            (b'"', _) => {
                out.push('"');
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                out.push('"');
                i += 1;
            }
            (b'r', Some(b'#' | b'"'))
                if !text.get(..i).and_then(|t| t.chars().next_back()).is_some_and(is_ident)
                    && bytes.get(i + 1 + text[i + 1..].chars().take_while(|&c| c == '#').count()) == Some(&b'"') =>
            {
                // A raw string: r"...", r#"..."#, each as many hashes at both ends (not a raw
                // identifier, r#type).
                let hashes = text[i + 1..].chars().take_while(|&c| c == '#').count();
                let close = format!("\"{}", "#".repeat(hashes));
                let body = i + 2 + hashes;
                let end = text
                    .get(body..)
                    .and_then(|t| t.find(&close))
                    .map_or(bytes.len(), |at| body + at + close.len());
                out.push_str("\"\"");
                i = end;
            }
            (b'\'', _) if bytes.get(i + 2) == Some(&b'\'') => {
                out.push_str("' '");
                i += 3;
            }
            (b'\'', Some(b'\\')) => {
                // An escaped character literal: '\'', '\n', '\u{7f}'.
                let end = text
                    .get(i + 3..)
                    .and_then(|t| t.find('\''))
                    .map_or(bytes.len(), |at| i + 4 + at);
                out.push_str("' '");
                i = end;
            }
            _ => match text.get(i..).and_then(|t| t.chars().next()) {
                Some(c) => {
                    out.push(c);
                    i += c.len_utf8();
                }
                // Inside a character (an escape skipped into one): nothing to name there.
                None => i += 1,
            },
        }
    }
    out
}

/// Every path `code` names: `use` trees expanded (`a::{b, c::{d, self}}` gives `a::b`,
/// `a::c::d` and `a::c`), and paths of two segments or more in the rest of the code.
fn named_paths(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let mut rest = code;
    let mut outside_use = String::new();
    while let Some(at) = find_use(rest) {
        outside_use.push_str(&rest[..at]);
        let after = &rest[at + 4..];
        let end = after.find(';').unwrap_or(after.len());
        expand(&[], &after[..end], &mut paths);
        rest = &after[(end + 1).min(after.len())..];
    }
    outside_use.push_str(rest);
    let tokens: Vec<char> = outside_use.chars().collect();
    let mut i = 0;
    while i < tokens.len() {
        if is_ident_start(tokens[i]) && (i == 0 || !is_ident(tokens[i - 1]) && tokens[i - 1] != ':') {
            let (path, next) = path_at(&tokens, i);
            if path.len() >= 2 {
                paths.push(path);
            }
            i = next;
        } else {
            i += 1;
        }
    }
    paths
}

/// Where the next `use` item starts in `code` (the keyword, as a word).
fn find_use(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = code[from..].find("use ") {
        let at = from + at;
        let before = code[..at].chars().next_back();
        if !before.is_some_and(|c| is_ident(c) || c == ':') {
            return Some(at);
        }
        from = at + 4;
    }
    None
}

/// The `::`-separated identifiers starting at `tokens[i]`, and the index after them.
fn path_at(tokens: &[char], mut i: usize) -> (Vec<String>, usize) {
    let mut path = Vec::new();
    loop {
        let start = i;
        while i < tokens.len() && is_ident(tokens[i]) {
            i += 1;
        }
        path.push(tokens[start..i].iter().collect());
        if tokens.get(i) == Some(&':')
            && tokens.get(i + 1) == Some(&':')
            && tokens.get(i + 2).is_some_and(|&c| is_ident_start(c))
        {
            i += 2;
        } else {
            return (path, i);
        }
    }
}

/// The paths of the use tree `tree`, each after `prefix`.
fn expand(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    let tree = tree.split(" as ").next().unwrap_or(tree).trim();
    if let Some(open) = tree.find('{') {
        let mut base = prefix.to_vec();
        base.extend(segments(tree[..open].trim_end_matches("::")));
        let inner = tree[open + 1..]
            .trim_end()
            .strip_suffix('}')
            .unwrap_or(&tree[open + 1..]);
        let mut depth = 0;
        let mut start = 0;
        for (at, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&base, &inner[start..at], out);
                    start = at + 1;
                }
                _ => {}
            }
        }
        expand(&base, &inner[start..], out);
        return;
    }
    let mut path = prefix.to_vec();
    for segment in segments(tree) {
        if segment != "self" || path.is_empty() {
            path.push(segment);
        }
    }
    if !path.is_empty() && path.last().is_some_and(|s| s != "*") {
        out.push(path);
    } else if path.len() > 1 {
        path.pop();
        out.push(path);
    }
}

fn segments(path: &str) -> impl Iterator<Item = String> + '_ {
    path.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// `named` as a path from the crate's root, from module `here`; `None` for a path of another
/// crate or of no module.
fn absolute(here: &[String], named: &[String], modules: &BTreeMap<Vec<String>, &str>) -> Option<Vec<String>> {
    let first = named.first()?;
    let (mut base, rest): (Vec<String>, &[String]) = match first.as_str() {
        "crate" => (Vec::new(), &named[1..]),
        "self" => (here.to_vec(), &named[1..]),
        "super" => {
            let mut base = here.to_vec();
            let mut rest = named;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
            (base, rest)
        }
        _ => {
            let mut child = here.to_vec();
            child.push(first.clone());
            if !modules.contains_key(&child) {
                return None;
            }
            (here.to_vec(), named)
        }
    };
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The longest prefix of `path` that is a module with a file of its own, and that file.
fn file_of<'p, 'a>(path: &'p [String], modules: &BTreeMap<Vec<String>, &'a str>) -> Option<(&'p [String], &'a str)> {
    (0..=path.len())
        .rev()
        .find_map(|n| modules.get(&path[..n]).map(|file| (&path[..n], *file)))
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The strongly connected parts of more than one node (Tarjan's algorithm), each sorted.
fn strongly_connected<'a>(arrows: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<String>> {
    struct State<'a, 'b> {
        arrows: &'b BTreeMap<&'a str, BTreeSet<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        parts: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a, '_>, node: &'a str) {
        let n = s.index.len();
        s.index.insert(node, n);
        s.low.insert(node, n);
        s.stack.push(node);
        s.on_stack.insert(node);
        for &next in s.arrows.get(node).into_iter().flatten() {
            if !s.index.contains_key(next) {
                visit(s, next);
                let low = s.low[node].min(s.low[next]);
                s.low.insert(node, low);
            } else if s.on_stack.contains(next) {
                let low = s.low[node].min(s.index[next]);
                s.low.insert(node, low);
            }
        }
        if s.low[node] == s.index[node] {
            let mut part = Vec::new();
            while let Some(top) = s.stack.pop() {
                s.on_stack.remove(top);
                part.push(top.to_owned());
                if top == node {
                    break;
                }
            }
            if part.len() > 1 {
                part.sort();
                s.parts.push(part);
            }
        }
    }
    let mut state = State {
        arrows,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        parts: Vec::new(),
    };
    for &node in arrows.keys() {
        if !state.index.contains_key(node) {
            visit(&mut state, node);
        }
    }
    state.parts.sort();
    state.parts
}

#[cfg(test)]
pub(crate) mod tests;
