//! The process map (`PROCS`): one traced process's executable mappings in the form the walker
//! searches (sorted by start, non-overlapping, at most `MAX_MAPPINGS`). It does not read
//! `/proc` or decide which processes to trace.

use anyhow::Context as _;
use aya::maps::{Map, hash_map::HashMap};
use tracer_common::trace::{ExecMapping, MAP_PROCS, MAX_MAPPINGS, ProcInfo};

/// Insert or replace `tgid`'s mappings; returns how many were left out (see [`prepare`]).
pub(super) fn set(map: &mut Map, tgid: u32, mappings: &[ExecMapping]) -> anyhow::Result<usize> {
    let (info, dropped) = prepare(mappings);
    let mut procs: HashMap<_, u32, ProcInfo> = HashMap::try_from(map)?;
    procs
        .insert(tgid, info.as_ref(), 0)
        .with_context(|| format!("adding process {tgid} to {MAP_PROCS} (is it full?)"))?;
    if dropped > 0 {
        log::debug!("process {tgid}: {dropped} executable mappings left out of {MAP_PROCS}");
    }
    Ok(dropped)
}

/// Remove `tgid`; a process that is not there is not an error.
pub(super) fn remove(map: &mut Map, tgid: u32) -> anyhow::Result<()> {
    let mut procs: HashMap<_, u32, ProcInfo> = HashMap::try_from(map)?;
    match procs.remove(&tgid) {
        Err(err) if !super::is_missing(&err) => {
            Err(err).with_context(|| format!("removing process {tgid} from {MAP_PROCS}"))
        }
        _ => Ok(()),
    }
}

/// The map value for `mappings`: sorted by start, then every empty mapping, every mapping
/// overlapping the one kept before it and every one past `MAX_MAPPINGS` left out (counted).
fn prepare(mappings: &[ExecMapping]) -> (Box<ProcInfo>, usize) {
    let mut sorted = mappings.to_vec();
    sorted.sort_by_key(|m| (m.start, m.end));
    let empty = ExecMapping {
        start: 0,
        end: 0,
        bias: 0,
        object: 0,
        frame_word: 0,
    };
    let mut info = Box::new(ProcInfo {
        num_mappings: 0,
        _pad: 0,
        mappings: [empty; MAX_MAPPINGS],
    });
    let mut kept = 0usize;
    let mut last_end = 0u64;
    for m in sorted {
        if m.start >= m.end || (kept > 0 && m.start < last_end) {
            continue;
        }
        let Some(slot) = info.mappings.get_mut(kept) else {
            break;
        };
        *slot = m;
        kept += 1;
        last_end = m.end;
    }
    // `kept <= MAX_MAPPINGS`, which fits.
    info.num_mappings = kept as u32;
    (info, mappings.len() - kept)
}

#[cfg(test)]
mod tests;
