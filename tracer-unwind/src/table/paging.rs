//! The paged form `tracer_common::unwind` describes, from the flat transitions: 64 KiB pages of
//! 4-byte rows (`addr_lo`, local rule index) and the object's de-duplicated rules. It neither
//! reads SFrame nor knows other objects (the global rule table is `global`).
//!
//! 1. A page is needed when some rule other than `NO_INFO` is in effect somewhere in it: for
//!    each such transition, every page from its own to the one before the next transition's
//!    address. Pages that are entirely `NO_INFO` are left out (a missing page reads as
//!    `NO_INFO` in the kernel too).
//! 2. Each page starts with a row at `addr_lo == 0` carrying the rule in effect at the page
//!    start: the transition at exactly that address, or the last one before it (synthetic), or
//!    `NO_INFO` when nothing precedes. A page strictly inside a long function is that one row.
//! 3. The page's other rows are the transitions inside it. The flat list has no repeats, so
//!    no row repeats the rule of the row before it.
//! 4. Rules are interned in first-use order; index 0 is always `NO_INFO`, which is also what
//!    the rows of each rule beyond the 65536th get (a reason, counted once per rule). Only
//!    then can two rows repeat an index, or a page hold nothing but `NO_INFO`: such rows
//!    and pages are dropped as in steps 1 and 3.
//! 5. At most `MAX_PAGES` pages; the rest of the object is left out (a reason).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher, RandomState};

use tracer_common::unwind::{PAGE_SHIFT, UnwindRow, UnwindRule};

use super::rules::Unsupported;
use super::transitions::{Reasons, count};

/// Step 5's limit: 2^20 pages, 64 GiB of code in one object.
pub(crate) const MAX_PAGES: usize = 1 << 20;

/// Pages and rules of one object.
#[derive(Debug, Default)]
pub(crate) struct Paged {
    pub pages: Vec<(u32, Vec<UnwindRow>)>,
    pub rules: Vec<UnwindRule>,
}

/// Page `transitions` (strictly ascending, no repeats, every address below 2^48).
pub(crate) fn page(transitions: &[(u64, UnwindRule)], reasons: &mut Reasons) -> Paged {
    let mut rules = Rules::default();
    let mut pages: Vec<(u32, Vec<UnwindRow>)> = Vec::new();
    // `next` is the first transition not yet consumed by a page.
    let mut next = 0usize;
    for page in needed_pages(transitions) {
        if pages.len() == MAX_PAGES {
            count(reasons, Unsupported::TooManyPages, 1);
            break;
        }
        let base = u64::from(page) << PAGE_SHIFT;
        let limit = base + (1 << PAGE_SHIFT);
        while transitions.get(next).is_some_and(|&(at, _)| at <= base) {
            next += 1;
        }
        let first = next
            .checked_sub(1)
            .and_then(|i| transitions.get(i))
            .map_or(UnwindRule::NO_INFO, |&(_, rule)| rule);
        let mut rows = vec![UnwindRow {
            addr_lo: 0,
            rule: rules.index(first, reasons),
        }];
        while let Some(&(at, rule)) = transitions.get(next).filter(|&&(at, _)| at < limit) {
            next += 1;
            let rule = rules.index(rule, reasons);
            if rows.last().is_some_and(|last| last.rule == rule) {
                continue;
            }
            rows.push(UnwindRow {
                // `at` is inside this page, so the difference fits.
                addr_lo: (at - base) as u16,
                rule,
            });
        }
        if rows.iter().any(|row| row.rule != 0) {
            pages.push((page, rows));
        }
    }
    Paged {
        pages,
        rules: rules.list,
    }
}

/// Step 1: the pages to build, strictly ascending.
fn needed_pages(transitions: &[(u64, UnwindRule)]) -> impl Iterator<Item = u32> + '_ {
    let mut done: Option<u64> = None;
    transitions
        .iter()
        .enumerate()
        .filter(|&(_, &(_, rule))| rule != UnwindRule::NO_INFO)
        .flat_map(move |(i, &(at, _))| {
            let end = transitions.get(i + 1).map_or(at, |&(next, _)| next - 1);
            let first = done.map_or(at >> PAGE_SHIFT, |d| (at >> PAGE_SHIFT).max(d + 1));
            let last = end >> PAGE_SHIFT;
            if first <= last {
                done = Some(last);
            }
            first..=last
        })
        // Addresses are below 2^48, so every page fits.
        .filter_map(|page| u32::try_from(page).ok())
}

/// Step 4: the object's rules, `NO_INFO` first, indexed by their packed bits (hashing the
/// 12-byte struct field by field with SipHash was a sixth of the build time).
struct Rules {
    list: Vec<UnwindRule>,
    index: HashMap<u128, u16, PackedState>,
}

impl Default for Rules {
    fn default() -> Self {
        let mut index = HashMap::default();
        index.insert(pack(&UnwindRule::NO_INFO), 0);
        Rules {
            list: vec![UnwindRule::NO_INFO],
            index,
        }
    }
}

impl Rules {
    fn index(&mut self, rule: UnwindRule, reasons: &mut Reasons) -> u16 {
        let key = pack(&rule);
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let Ok(i) = u16::try_from(self.list.len()) else {
            count(reasons, Unsupported::TooManyRules, 1);
            self.index.insert(key, 0);
            return 0;
        };
        self.list.push(rule);
        self.index.insert(key, i);
        i
    }
}

/// Every field of `rule` in one integer: equal rules, equal keys, and only those.
fn pack(rule: &UnwindRule) -> u128 {
    u128::from(rule.kind)
        | u128::from(rule.cfa_reg) << 8
        | u128::from(rule.flags) << 16
        | u128::from(rule._pad) << 24
        | u128::from(rule.cfa_offset as u32) << 32
        | u128::from(rule.fp_offset as u32) << 64
        | u128::from(rule.ra_offset as u32) << 96
}

/// Hashes [`pack`]ed rules: a multiply-xor mix keyed per table from the process's random
/// hash keys, so a hostile section cannot choose rules that collide without knowing the key
/// (and the table holds at most 65536 rules anyway).
#[derive(Clone)]
struct PackedState(u64);

impl Default for PackedState {
    fn default() -> Self {
        PackedState(RandomState::new().hash_one(0x5eed_u32))
    }
}

impl BuildHasher for PackedState {
    type Hasher = PackedHasher;

    fn build_hasher(&self) -> PackedHasher {
        PackedHasher(self.0)
    }
}

/// See [`PackedState`].
struct PackedHasher(u64);

impl Hasher for PackedHasher {
    fn finish(&self) -> u64 {
        // murmur3's 64-bit finalizer: every input bit reaches every output bit.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }

    fn write_u128(&mut self, n: u128) {
        self.write_u64(n as u64);
        self.write_u64((n >> 64) as u64);
    }
}
