//! The Python maps: `PYTHON` (the processes whose CPython frames the kernel walks, with where
//! their interpreter is) and the `PY_STOPS` counters (walks, frames, early stops by reason).

use anyhow::Context as _;
use aya::maps::hash_map::HashMap;
use tracer_common::python::{MAP_PY_STOPS, MAP_PYTHON, PY_COUNT_FRAMES, PY_COUNT_WALKS, PyProcInfo, PyStop};

use super::{Kernel, map_mut, per_cpu_u64, sum};

/// Totals of `PY_STOPS` over all CPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PythonCounts {
    /// Samples whose Python chain was walked.
    pub walks: u64,
    /// Python frames recorded.
    pub frames: u64,
    /// Walks cut short, by reason, in [`PyStop::ALL`] order.
    pub stops: Vec<(PyStop, u64)>,
}

impl Kernel {
    /// Walk the Python frames of `tgid` with `info` (replacing what it had). Before 3.11
    /// (`PY_THREAD_PTHREAD`) the kernel must find threads by their TLS base:
    /// [`Kernel::finds_pthreads`].
    pub fn set_python(&mut self, tgid: u32, info: &PyProcInfo) -> anyhow::Result<()> {
        let mut map: HashMap<_, u32, PyProcInfo> = HashMap::try_from(map_mut(&mut self.ebpf, MAP_PYTHON)?)?;
        map.insert(tgid, info, 0)
            .with_context(|| format!("adding process {tgid} to {MAP_PYTHON}"))
    }

    /// Whether the walk finds a thread by its TLS base (`pthread_self()`, as CPython before
    /// 3.11 keeps it): the kernel's BTF gives the offset of `task_struct.thread.fsbase`
    /// (x86-64 only).
    pub fn finds_pthreads(&self) -> bool {
        self.fsbase_offset != 0
    }

    /// Stop walking the Python frames of `tgid` (nothing happens if they were not walked).
    pub fn remove_python(&mut self, tgid: u32) -> anyhow::Result<()> {
        let mut map: HashMap<_, u32, PyProcInfo> = HashMap::try_from(map_mut(&mut self.ebpf, MAP_PYTHON)?)?;
        match map.remove(&tgid) {
            Err(err) if !super::is_missing(&err) => {
                Err(err).with_context(|| format!("removing process {tgid} from {MAP_PYTHON}"))
            }
            _ => Ok(()),
        }
    }

    /// The Python walk counters.
    pub fn python_counts(&self) -> anyhow::Result<PythonCounts> {
        let array = per_cpu_u64(&self.ebpf, MAP_PY_STOPS)?;
        Ok(PythonCounts {
            walks: sum(&array, PY_COUNT_WALKS)?,
            frames: sum(&array, PY_COUNT_FRAMES)?,
            stops: PyStop::ALL
                .iter()
                .map(|&s| Ok((s, sum(&array, s as u32)?)))
                .collect::<anyhow::Result<_>>()?,
        })
    }
}
