use super::*;
use crate::export::model::{FrameSource, ObjectInfo, ResolvedFrame, ResolvedStack};

/// A profile of `app` (object 0) whose stacks are given as names, innermost first.
fn profile(stacks: &[(&[&str], u64)]) -> Resolved {
    Resolved {
        objects: vec![ObjectInfo {
            path: "/bin/app".to_owned(),
            name: "app".to_owned(),
            build_id: None,
        }],
        stacks: stacks
            .iter()
            .enumerate()
            .map(|(tid, (names, count))| ResolvedStack {
                pid: 7,
                tid: tid as u32,
                comm: "app".to_owned(),
                event: crate::event::CPU_CLOCK.to_owned(),
                frames: names
                    .iter()
                    .enumerate()
                    .map(|(i, name)| ResolvedFrame {
                        addr: 0x1000 + i as u64,
                        object: Some(0),
                        offset: 0x1000 + i as u64,
                        symbol: Some((*name).to_owned()),
                        file: None,
                        line: None,
                        inlined: false,
                        source: FrameSource::Sframe,
                    })
                    .collect(),
                count: *count,
                weight_ns: 0,
                truncated: None,
                cpu: None,
            })
            .collect(),
        ..Resolved::default()
    }
}

fn counts(table: &Table) -> Vec<(&str, u64, u64)> {
    table
        .functions
        .iter()
        .map(|f| (f.name.as_str(), f.self_count, f.total_count))
        .collect()
}

/// Self counts the innermost frame only; total counts every function on the stack, once per
/// stack even when recursion repeats it; rows come sorted by self, ties by total then name.
#[test]
fn self_and_total_count_recursion_once() {
    let table = Table::new(
        &profile(&[
            (&["leaf", "recurse", "recurse", "recurse", "main"], 6),
            (&["recurse", "recurse", "main"], 3),
            (&["main"], 1),
        ]),
        SortKey::SelfCount,
    );
    assert_eq!(table.samples, 10);
    assert_eq!(
        counts(&table),
        [("leaf", 6, 6), ("recurse", 3, 9), ("main", 1, 10)],
        "{table:#?}"
    );
    assert_eq!(table.functions[0].object.as_deref(), Some("app"));
}

/// Total, name and self orders, for functions and stacks; ties broken by name.
#[test]
fn sorting_by_each_key() {
    let mut table = Table::new(
        &profile(&[(&["b", "main"], 5), (&["a", "main"], 5), (&["c", "b", "main"], 2)]),
        SortKey::Total,
    );
    assert_eq!(counts(&table), [("main", 0, 12), ("b", 5, 7), ("a", 5, 5), ("c", 2, 2)]);
    table.sort(SortKey::SelfCount);
    assert_eq!(counts(&table), [("b", 5, 7), ("a", 5, 5), ("c", 2, 2), ("main", 0, 12)]);
    let stacks: Vec<_> = table.stacks.iter().map(|s| (s.text.as_str(), s.count)).collect();
    assert_eq!(stacks, [("app;main;a", 5), ("app;main;b", 5), ("app;main;b;c", 2)]);
    table.sort(SortKey::Name);
    assert_eq!(counts(&table), [("a", 5, 5), ("b", 5, 7), ("c", 2, 2), ("main", 0, 12)]);
    assert_eq!(table.stacks[2].text, "app;main;b;c");
}

/// Stacks of different threads with the same names are one row; percentages are of all
/// samples, and 0 (not NaN) in an empty profile.
#[test]
fn stacks_merge_and_percentages() {
    let table = Table::new(
        &profile(&[(&["spin", "main"], 3), (&["spin", "main"], 1)]),
        SortKey::SelfCount,
    );
    assert_eq!(
        table.stacks,
        [StackRow {
            text: "app;main;spin".to_owned(),
            count: 4
        }]
    );
    assert_eq!(table.percent(1), 25.0);
    assert_eq!(Table::new(&Resolved::default(), SortKey::Name).percent(0), 0.0);
}

/// The same name in two objects is two functions; frames without symbol are named by object
/// and offset.
#[test]
fn functions_are_per_object() {
    let mut resolved = profile(&[(&["helper", "main"], 2)]);
    resolved.objects.push(ObjectInfo {
        path: "/lib/libx.so".to_owned(),
        name: "libx.so".to_owned(),
        build_id: None,
    });
    let mut other = resolved.stacks[0].clone();
    other.frames[0].object = Some(1);
    other.frames[1].symbol = None;
    resolved.stacks.push(other);
    let table = Table::new(&resolved, SortKey::Name);
    let rows: Vec<_> = table
        .functions
        .iter()
        .map(|f| (f.name.as_str(), f.object.as_deref(), f.total_count))
        .collect();
    assert_eq!(
        rows,
        [
            ("[app+0x1001]", Some("app"), 2),
            ("helper", Some("app"), 2),
            ("helper", Some("libx.so"), 2),
            ("main", Some("app"), 2),
        ]
    );
}
