//! The crates of the workspace have no import circles, and the check finds one where there is
//! one (and not in comments, strings, tests or a module's declaration of its children).

use std::path::Path;

use super::circles;

fn crate_of(files: &[(&str, &str)]) -> Vec<(String, String)> {
    files.iter().map(|(p, t)| ((*p).to_owned(), (*t).to_owned())).collect()
}

/// Two sibling files that use each other, one through a use tree and one in code, are a
/// circle; a third file that only one of them uses is not in it.
#[test]
fn siblings_using_each_other_are_a_circle() {
    let found = circles(&crate_of(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("a.rs", "use crate::{b::{self, Thing}, c::Other};\n"),
        ("b.rs", "pub fn f() -> u64 { crate::a::g() }\n"),
        ("c.rs", "pub struct Other;\n"),
    ]));
    assert_eq!(found, [vec!["a.rs".to_owned(), "b.rs".to_owned()]]);
}

/// A parent that declares and re-exports its children, whose children use one another in one
/// direction only, has no circle; a path named in a comment or a string, or only by a test
/// file, makes no arrow.
#[test]
fn declarations_comments_strings_and_tests_make_no_arrow() {
    let found = circles(&crate_of(&[
        ("lib.rs", "pub mod reg;\n"),
        (
            "reg/mod.rs",
            "mod map;\nmod codes;\npub use map::Stats;\n#[cfg(test)]\nmod tests;\n",
        ),
        (
            "reg/map.rs",
            "pub struct Stats;\n/// Used by [`super::codes::Codes`].\nconst S: &str = \"super::codes\";\n",
        ),
        (
            "reg/codes.rs",
            "use super::map::Stats;\nconst R: &str = r#\"crate::reg::codes \"x\"\"#;\n",
        ),
        ("reg/tests.rs", "use super::codes::*;\n"),
    ]));
    assert!(found.is_empty(), "{found:?}");
}

/// A module that uses its own child, which uses the module's items, is no circle (a child
/// may use what encloses it); a circle through another module is, with `super::super::` and
/// child-relative paths resolved.
#[test]
fn a_module_may_use_its_children_but_not_through_a_sibling() {
    // `top` runs `top::inner::go`, whose body is `inner`; `other::f` is `other`.
    let tree = |inner: &str, other: &str| {
        circles(&crate_of(&[
            ("main.rs", "mod top;\nmod other;\nfn main() { top::run(); }\n"),
            (
                "top/mod.rs",
                "mod inner;\npub fn run() { inner::go(); }\npub fn helper() {}\n",
            ),
            ("top/inner.rs", &format!("pub fn go() {{ {inner} }}\n")),
            ("other.rs", &format!("pub fn f() {{ {other} }}\n")),
        ]))
    };
    let found = tree("super::super::top::helper();", "");
    assert!(found.is_empty(), "{found:?}");
    let found = tree("crate::other::f();", "crate::top::helper();");
    assert_eq!(
        found,
        [vec![
            "other.rs".to_owned(),
            "top/inner.rs".to_owned(),
            "top/mod.rs".to_owned()
        ]]
    );
}

/// Every crate of the checkout, read from its `src`.
#[test]
fn the_workspace_has_no_import_circles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root");
    let mut all = Vec::new();
    for krate in ["tracer-common", "tracer-ebpf", "tracer-unwind", "tracer-user", "xtask"] {
        let src = root.join(krate).join("src");
        let mut files = Vec::new();
        read_tree(&src, &src, &mut files);
        assert!(files.len() > 3, "{} holds the crate's sources", src.display());
        for circle in circles(&files) {
            all.push(format!("{krate}: {}", circle.join(" <-> ")));
        }
    }
    assert!(all.is_empty(), "import circles:\n{}", all.join("\n"));
}

pub(crate) fn read_tree(src: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).expect("read a source directory").flatten() {
        let path = entry.path();
        if path.is_dir() {
            read_tree(src, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path
                .strip_prefix(src)
                .expect("under src")
                .to_string_lossy()
                .into_owned();
            out.push((relative, std::fs::read_to_string(&path).expect("a source file")));
        }
    }
}
