//! `RuleTable`: interning up to 65536 rules, and remapping objects into it all or nothing.

use tracer_common::unwind::UnwindRule;

use super::{function, header, sp};
use crate::sframe::{Abi, Function, Row};
use crate::table::{ObjectTable, RuleTable, RulesFull, build};

fn numbered(i: u32) -> UnwindRule {
    UnwindRule {
        cfa_offset: i as i32,
        ..UnwindRule::NO_INFO
    }
}

fn object(functions: &[(Function, Vec<Row>)]) -> ObjectTable {
    let list: Vec<Function> = functions.iter().map(|(f, _)| *f).collect();
    build(&header(Abi::Amd64Le, 3), &list, None, |f| {
        Ok(functions
            .iter()
            .find(|(g, _)| g == f)
            .map(|(_, r)| r.clone())
            .unwrap_or_default())
    })
    .expect("builds")
}

/// Equal rules share an index; the 65537th distinct rule is refused.
#[test]
fn intern_deduplicates_up_to_65536() {
    let mut t = RuleTable::new();
    for i in 0..65_536u32 {
        assert_eq!(t.intern(numbered(i)), Some(i as u16));
    }
    assert_eq!(t.intern(numbered(7)), Some(7));
    assert_eq!(t.intern(numbered(65_536)), None);
    assert_eq!(t.rules().len(), 65_536);
}

/// Two objects sharing rules: remapped rows name global rules equal to their local ones.
#[test]
fn remap_shares_rules_between_objects() {
    let a = object(&[(function(0x1000, 0x10), vec![sp(0, 8), sp(1, 16)])]);
    let b = object(&[(function(0x2_0000, 0x10), vec![sp(0, 16), sp(4, 24)])]);
    let mut global = RuleTable::new();
    for table in [&a, &b] {
        let pages = global.remap(table).expect("room");
        assert_eq!(pages.len(), table.pages().len());
        for ((page, rows), (local_page, local_rows)) in pages.iter().zip(table.pages()) {
            assert_eq!(page, local_page);
            for (row, local) in rows.iter().zip(local_rows) {
                assert_eq!(row.addr_lo, local.addr_lo);
                assert_eq!(global.rules()[usize::from(row.rule)], table.rule(local.rule));
            }
        }
    }
    assert_eq!(global.rules().len(), 4, "NO_INFO, SP+8, SP+16, SP+24");
}

/// A remap that does not fit leaves the global table exactly as it was.
#[test]
fn failed_remap_changes_nothing() {
    let mut global = RuleTable::new();
    for i in 0..65_534u32 {
        global.intern(numbered(i + 1000));
    }
    let before = global.clone();
    let t = object(&[(function(0, 0x10), vec![sp(0, 8), sp(1, 16), sp(2, 24)])]);
    assert_eq!(global.remap(&t), Err(RulesFull));
    assert_eq!(global.rules(), before.rules());
    assert_eq!(global.intern(numbered(1000)), Some(0));
    assert_eq!(global.intern(numbered(5)), Some(65_534), "the removed rules are gone");
}
