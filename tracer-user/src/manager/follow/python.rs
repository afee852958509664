//! Putting a process in the kernel's map of interpreters, or taking it out, by the policy of
//! `python::pymap`: when the map is full, the process in it least recently sampled gives
//! way (a few tries: one that exited may have left already); else the process is refused,
//! counted by reason.

use crate::manager::seam::{KernelTables, SeamError};
use crate::registry::Catalog;

/// Processes taken out of a full map to make room for one, at most.
const TRIES: usize = 4;

/// Tell the kernel that `pid` runs the interpreter `info`, or none.
pub(super) fn place_python(
    pid: u32,
    info: Option<&tracer_common::python::PyProcInfo>,
    catalog: &mut Catalog,
    kernel: &mut impl KernelTables,
) {
    let pycode = &mut catalog.runtimes.python.code;
    let Some(info) = info else {
        pycode.set_in_map(pid, false);
        if let Err(err) = kernel.set_python(pid, None) {
            log::debug!("process {pid}: {err:#}");
        }
        return;
    };
    for _ in 0..=TRIES {
        let err = match kernel.set_python(pid, Some(info)) {
            Ok(()) => {
                pycode.set_in_map(pid, true);
                pycode.count_map(|m| m.added += 1);
                return;
            }
            Err(err) => err,
        };
        if !matches!(err, SeamError::Full(_)) {
            log::debug!("process {pid}: {err:#}");
            pycode.set_in_map(pid, false);
            pycode.count_map(|m| m.refused_error += 1);
            return;
        }
        let Some(victim) = pycode.map_victim(pid) else {
            break;
        };
        log::debug!("process {pid}: the map of Python processes is full, {victim} (sampled less recently) gives way");
        pycode.set_in_map(victim, false);
        pycode.count_map(|m| m.evicted += 1);
        if let Err(err) = kernel.set_python(victim, None) {
            log::debug!("process {victim}: {err:#}");
        }
    }
    pycode.set_in_map(pid, false);
    pycode.count_map(|m| m.refused_full += 1);
}
