//! The shape of `dump --json`'s three objects (`docs/schemas/dump.json`), drawn from examples
//! of the types that serialize them (see [`crate::schema`]): every optional field both present
//! and absent, so that the page says which may be null.

use serde_json::{Value, json};

use super::{DumpCfa, DumpFunction, DumpPc, DumpRow, DumpRule, DumpSection, TableCfa, TableDump, TableRow};
use crate::schema::{page, shape};

/// The page: the shapes of `dump --json`, `dump --pc ADDR --json` and
/// `dump --source eh_frame --json`.
pub fn schema() -> String {
    let sections = [section(true), section(false)].map(|s| serde_json::to_value(&s).unwrap_or_default());
    let pc = serde_json::to_value(DumpPc {
        pc: 0x401136,
        function: function(true),
    })
    .unwrap_or_default();
    let tables = [true, false].map(|full| {
        serde_json::to_value(TableDump {
            source: "eh_frame",
            rows: vec![TableRow {
                start: 0x1000,
                kind: "cfa",
                cfa: full.then(|| TableCfa {
                    base: "sp".to_owned(),
                    offset: 8,
                }),
                fp_offset: full.then_some(-16),
                ra_offset: full.then_some(-8),
                topmost_only: false,
                mangled_ra: false,
                signal: false,
            }],
        })
        .unwrap_or_default()
    });
    let refs = |values: &[Value]| -> Value {
        let values: Vec<&Value> = values.iter().collect();
        shape(&values)
    };
    page(&json!({
        "dump --json": refs(&sections),
        "dump --pc ADDR --json": refs(&[pc]),
        "dump --source eh_frame --json": refs(&tables),
    }))
}

fn section(full: bool) -> DumpSection {
    DumpSection {
        version: 2,
        flags: 1,
        abi: 3,
        fixed_fp_offset: 0,
        fixed_ra_offset: -8,
        functions: vec![function(full)],
    }
}

fn function(full: bool) -> DumpFunction {
    let rule = || DumpRule {
        base: "cfa".to_owned(),
        offset: -16,
        deref: true,
    };
    DumpFunction {
        start: 0x401000,
        size: 64,
        pc_type: "inc",
        rep_size: 0,
        fde_type: "default",
        signal: false,
        pauth_key: "a",
        rows: vec![DumpRow {
            start: 0x401000,
            cfa: DumpCfa {
                base: "sp".to_owned(),
                offset: 8,
                deref: false,
            },
            fp_offset: full.then_some(-16),
            ra_offset: full.then_some(-8),
            fp_rule: full.then(rule),
            ra_rule: full.then(rule),
            ra_undefined: false,
            mangled_ra: false,
        }],
    }
}
