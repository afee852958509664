//! [`RuleTable`]: the rule array shared by every loaded object (the kernel's third map), and
//! the remapping of one object's local rule indices into it. It never shrinks (rules are 12
//! bytes and few) and does not talk to the kernel.
//!
//! 1. `intern` returns the index of an equal rule, or appends it; 65536 rules at most.
//! 2. `remap` interns the rule of every row of an object; if the table fills up half-way, the
//!    rules it added are removed again, so a failed object leaves the table as it was.

use std::collections::HashMap;

use tracer_common::unwind::{UnwindRow, UnwindRule};

use super::ObjectTable;

/// The global rule table was full: more than 65536 distinct rules across the loaded objects.
#[derive(Debug, thiserror::Error, Clone, Copy, PartialEq, Eq)]
#[error("more than 65536 distinct unwind rules across the loaded objects")]
pub struct RulesFull;

/// De-duplicated rules of all objects; a row's `rule` indexes [`RuleTable::rules`].
#[derive(Clone, Debug, Default)]
pub struct RuleTable {
    rules: Vec<UnwindRule>,
    index: HashMap<UnwindRule, u16>,
}

impl RuleTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// All rules, in index order.
    pub fn rules(&self) -> &[UnwindRule] {
        &self.rules
    }

    /// The index of `rule`, added if new; `None` when 65536 rules are already taken.
    pub fn intern(&mut self, rule: UnwindRule) -> Option<u16> {
        if let Some(&i) = self.index.get(&rule) {
            return Some(i);
        }
        let i = u16::try_from(self.rules.len()).ok()?;
        self.rules.push(rule);
        self.index.insert(rule, i);
        Some(i)
    }

    /// `table`'s pages with every row's rule index turned into an index of this table.
    pub fn remap(&mut self, table: &ObjectTable) -> Result<Vec<(u32, Vec<UnwindRow>)>, RulesFull> {
        let before = self.rules.len();
        let mut global = vec![None; table.rules().len()];
        let mut pages = Vec::with_capacity(table.pages().len());
        for (page, rows) in table.pages() {
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                let cached = global.get(usize::from(row.rule)).copied().flatten();
                let rule = match cached {
                    Some(rule) => rule,
                    None => {
                        let Some(rule) = self.intern(table.rule(row.rule)) else {
                            self.forget_from(before);
                            return Err(RulesFull);
                        };
                        if let Some(slot) = global.get_mut(usize::from(row.rule)) {
                            *slot = Some(rule);
                        }
                        rule
                    }
                };
                out.push(UnwindRow {
                    addr_lo: row.addr_lo,
                    rule,
                });
            }
            pages.push((*page, out));
        }
        Ok(pages)
    }

    /// Step 2: drop the rules added since the table had `len` of them.
    fn forget_from(&mut self, len: usize) {
        for rule in self.rules.drain(len..) {
            self.index.remove(&rule);
        }
    }
}
