//! Entry code without unwind information. The kernel starts a process at the entry point of
//! its dynamic loader (or of the program, when statically linked) with no return address on
//! the stack, and nothing calls that code: a walk that reaches it has reached the bottom of the
//! thread. glibc's loader has no unwind information there (its `_start`, and `_dl_start_user`
//! after it, which calls the libraries' initializers and jumps to the program's entry), so the
//! walk would end as `no_info`, as if it were cut short. An object's `e_entry` that no function
//! covers is made outermost from it to the next function, if that is at most
//! [`MAX_ENTRY_CODE`] bytes on (a gap bounded by described functions on both sides is one
//! block of entry code; a longer or unbounded one could hold other code without unwind
//! information, which must stay `no_info`). An entry that a function covers is left as its
//! unwind information says (a library's `e_entry` may be an ordinary function).

use tracer_common::unwind::{KIND_OUTERMOST, UnwindRule};

use super::transitions::Flat;

/// The longest uncovered entry code made outermost (glibc's x86-64 loader: 64 bytes).
pub const MAX_ENTRY_CODE: u64 = 256;

const OUTERMOST: UnwindRule = UnwindRule {
    kind: KIND_OUTERMOST,
    ..UnwindRule::NO_INFO
};

/// Make the entry code at `entry` outermost in `flat` (module docs): whether it did.
pub(crate) fn mark(flat: &mut Flat, entry: u64) -> bool {
    let at = flat.covered.partition_point(|&(_, end)| end <= entry);
    let next = match flat.covered.get(at) {
        // Covered by a function: its unwind information holds.
        Some(&(start, _)) if start <= entry => return false,
        Some(&(start, _)) => start,
        // Nothing after it: unbounded.
        None => return false,
    };
    if next - entry > MAX_ENTRY_CODE {
        return false;
    }
    // Between two functions (or before the first): `NO_INFO` is in effect from the entry to
    // the next function.
    let after = flat.transitions.partition_point(|&(addr, _)| addr <= entry);
    let in_effect = after
        .checked_sub(1)
        .map_or(UnwindRule::NO_INFO, |k| flat.transitions[k].1);
    if in_effect != UnwindRule::NO_INFO || flat.transitions.get(after).is_some_and(|&(addr, _)| addr < next) {
        return false;
    }
    // At the next function's start: its own rule, or `NO_INFO` again; an outermost start
    // continues the entry's run (no two equal rules in a row).
    match flat.transitions.get(after).copied() {
        Some((addr, rule)) if addr == next && rule == OUTERMOST => {
            flat.transitions.remove(after);
        }
        Some((addr, _)) if addr == next => {}
        _ => flat.transitions.insert(after, (next, UnwindRule::NO_INFO)),
    }
    // At the entry: the function before ends exactly there (its `NO_INFO` is replaced), or
    // earlier.
    match after.checked_sub(1) {
        // ... and was outermost to its end: one run.
        Some(k) if flat.transitions[k].0 == entry && k > 0 && flat.transitions[k - 1].1 == OUTERMOST => {
            flat.transitions.remove(k);
        }
        Some(k) if flat.transitions[k].0 == entry => flat.transitions[k].1 = OUTERMOST,
        _ => flat.transitions.insert(after, (entry, OUTERMOST)),
    }
    // The next function's run now starts at the entry.
    flat.covered[at].0 = entry;
    if let Some(before) = at.checked_sub(1)
        && flat.covered[before].1 == entry
    {
        flat.covered[before].1 = flat.covered[at].1;
        flat.covered.remove(at);
    }
    true
}

#[cfg(test)]
mod tests;
