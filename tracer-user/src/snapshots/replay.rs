//! Replay of a recorded stack copy (`recording`): the rules of the objects whose binary is at
//! hand (the checked-in fixtures) are built again with the tracer's own table builder
//! (`registry::TableLoader`: `.sframe`, else `.eh_frame`, to rows) and must equal the recorded
//! ones; the objects that are not (the host's libc and ld.so, the vDSO: they differ between
//! machines) answer with the recorded rules; then the copy is walked with [`walk_copy`] and
//! the frames and stop reason must equal the recorded ones, with the rules of the recording's
//! architecture (an aarch64 recording replays on an x86-64 host too). Pure: the binaries come from a
//! closure, nothing is read from the host.
//!
//! A difference is a [`ReplayError`] naming the first place it shows: the PC whose rebuilt
//! rule differs, the first frame that differs, or the stop reason.

use std::{borrow::Cow, path::Path};

use crate::registry::TableLoader;
use crate::tables::TableSet;

use super::{
    recording::{Cover, FormatError, RecordedFrame, RecordedMapping, Recording, frames_of},
    walk::{Covering, Walked, walk_copy_on},
};
use tracer_common::walk::Arch;

/// Why a replay does not give what was recorded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplayError {
    #[error("the recording: {0}")]
    Format(#[from] FormatError),
    #[error("recorded on {recorded}: the walk knows the rules of x86_64 and aarch64")]
    Arch { recorded: String },
    #[error("{path}: no table built from the fixture: {why}")]
    NoTable { path: String, why: String },
    #[error("pc {pc:#x} ({path}): recorded {recorded:?}, the fixture's table gives {rebuilt:?}")]
    RuleDiffers {
        pc: u64,
        path: String,
        recorded: Cover,
        rebuilt: Cover,
    },
    #[error("pc {pc:#x}: looked up by the replay, not recorded (its object is not a fixture)")]
    Unrecorded { pc: u64 },
    #[error("frame {index}: recorded {recorded:?}, replayed {replayed:?}")]
    FrameDiffers {
        index: usize,
        recorded: Option<RecordedFrame>,
        replayed: Option<RecordedFrame>,
    },
    #[error("the walk ended as {replayed}, recorded as {recorded}")]
    StopDiffers { recorded: String, replayed: String },
}

/// A mapping of the recording with the table rebuilt from its fixture, if it has one.
struct Mapped<'a> {
    mapping: &'a RecordedMapping,
    table: Option<u32>,
}

/// Replay `recording`: `fixture(mapping)` gives the bytes of the binary a mapping maps when it
/// is at hand. Returns the walk (equal to the recorded one) or where it differs.
pub fn replay<'f>(
    recording: &Recording,
    mut fixture: impl FnMut(&RecordedMapping) -> Option<Cow<'f, [u8]>>,
) -> Result<Walked, ReplayError> {
    let copy = recording.snapshot()?;
    let stop = recording.stop_reason()?;
    // Replayed on any host: the walk takes the recording's architecture.
    let arch = match recording.arch.as_str() {
        "x86_64" => Arch::X86_64,
        "aarch64" => Arch::Aarch64,
        other => {
            return Err(ReplayError::Arch {
                recorded: other.to_owned(),
            });
        }
    };
    let mut loader = TableLoader::new(TableSet::new());
    let mut mapped = Vec::with_capacity(recording.mappings.len());
    for mapping in &recording.mappings {
        let table = match fixture(mapping) {
            Some(bytes) => Some(
                loader
                    .load_image(&bytes, Path::new(&mapping.path))
                    .map_err(|e| ReplayError::NoTable {
                        path: mapping.path.clone(),
                        why: format!("{e:?}"),
                    })?
                    .id,
            ),
            None => None,
        };
        mapped.push(Mapped { mapping, table });
    }
    let tables = &loader.tables;
    let rebuilt = |pc: u64| -> Option<(Covering, &Mapped<'_>)> {
        let m = mapped
            .iter()
            .find(|m| (m.mapping.start.0..m.mapping.end.0).contains(&pc))?;
        let id = m.table?;
        Some((Some(Some(tables.lookup(id, pc.wrapping_sub(m.mapping.bias.0)))), m))
    };
    for rule in &recording.rules {
        if let Some((covering, m)) = rebuilt(rule.pc.0) {
            let rebuilt = Cover::from(covering);
            if rebuilt != rule.covering {
                return Err(ReplayError::RuleDiffers {
                    pc: rule.pc.0,
                    path: m.mapping.path.clone(),
                    recorded: rule.covering,
                    rebuilt,
                });
            }
        }
    }
    let mut unrecorded = None;
    let walked = walk_copy_on(arch, &copy, recording.max_depth, |pc| {
        if let Some((covering, _)) = rebuilt(pc) {
            return covering;
        }
        match recording.rules.iter().find(|r| r.pc.0 == pc) {
            Some(rule) => rule.covering.into(),
            None => {
                unrecorded.get_or_insert(pc);
                None
            }
        }
    });
    let (frames, stop_name) = frames_of(&walked);
    let differs = (0..frames.len().max(recording.frames.len())).find(|&i| frames.get(i) != recording.frames.get(i));
    if let Some(index) = differs {
        return Err(ReplayError::FrameDiffers {
            index,
            recorded: recording.frames.get(index).cloned(),
            replayed: frames.get(index).cloned(),
        });
    }
    if walked.stop != stop {
        return Err(ReplayError::StopDiffers {
            recorded: recording.stop.clone(),
            replayed: stop_name,
        });
    }
    // The same walk, yet it looked up a PC the recording has no rule for (taken as no
    // mapping): the recording is incomplete.
    if let Some(pc) = unrecorded {
        return Err(ReplayError::Unrecorded { pc });
    }
    Ok(walked)
}

#[cfg(test)]
mod tests;
