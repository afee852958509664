//! The README and docs/ as a reader meets them: the README stays short (at most
//! [`README_MAX_LINES`] lines), every relative link in README.md and docs/**/*.md leads to a
//! file of the repository, and the commands of the README's "Quick start" and "Recipes" run as
//! written (`recipes`, privileged).

mod recipes;

use std::path::{Path, PathBuf};

/// The README's length limit: install, a quick start, recipes, status and links; the rest is in
/// docs/.
const README_MAX_LINES: usize = 200;

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The README's text.
fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).expect("read README.md")
}

/// The lines of `text` outside fenced code blocks, with inline code spans removed: what
/// Markdown renders as prose, where links are.
fn prose(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let unquoted: String = line.split('`').step_by(2).collect::<Vec<_>>().join("");
        lines.push(unquoted);
    }
    lines
}

/// The targets of the Markdown links `[text](target)` in `text` (outside code).
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in prose(text) {
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push(after[..end].trim().to_owned());
            rest = &after[end..];
        }
    }
    targets
}

/// Every Markdown file of docs/, recursively.
fn docs_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            docs_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "md") {
            found.push(path);
        }
    }
}

/// The relative links of `text` (a file in `dir`) that lead to no file: `target (resolved)`.
fn broken_links(text: &str, dir: &Path) -> Vec<String> {
    link_targets(text)
        .into_iter()
        .filter(|t| !t.contains("://") && !t.starts_with('#') && !t.starts_with("mailto:"))
        .filter_map(|target| {
            let file = target.split('#').next().unwrap_or_default();
            let resolved = dir.join(file);
            (file.is_empty() || !resolved.exists()).then(|| format!("{target} ({})", resolved.display()))
        })
        .collect()
}

/// The README fits in [`README_MAX_LINES`] lines.
#[test]
fn readme_is_short() {
    let lines = readme().lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move the detail to docs/"
    );
}

/// Every relative link in README.md and docs/**/*.md points at an existing file (the docs were
/// split into several files; a moved section must not leave a dead link behind).
#[test]
fn relative_links_lead_to_files() {
    let root = root();
    let mut files = vec![root.join("README.md")];
    docs_files(&root.join("docs"), &mut files);
    assert!(files.len() > 5, "found the docs: {files:?}");
    let mut broken = Vec::new();
    let mut links = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        links += link_targets(&text).len();
        let dir = file.parent().expect("a file in a directory");
        broken.extend(
            broken_links(&text, dir)
                .into_iter()
                .map(|b| format!("{}: {b}", file.display())),
        );
    }
    assert!(links > 20, "the docs link to each other ({links} links found)");
    assert!(broken.is_empty(), "links to no file:\n{}", broken.join("\n"));
}

/// The link checker finds what it must: a dead relative link is reported, a live one, an
/// anchor, a web address and a link inside code are not.
#[test]
fn link_checker_tells_dead_links() {
    let root = root();
    let text = "see [a](docs/guide.md#events), [b](#status), [c](https://example.org/x.md)\n\
                [dead](docs/missing.md) and `[code](nowhere.md)`\n```\n[fenced](nowhere.md)\n```\n";
    let broken = broken_links(text, &root);
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert!(broken[0].starts_with("docs/missing.md"), "{broken:?}");
}
