//! Whether an ELF object is a CPython interpreter (the executable of a statically linked
//! `python3.X`, or `libpython3.X.so`), found by its symbols: `_PyRuntime` (the runtime state)
//! and `_PyEval_EvalFrameDefault` (the evaluation loop) in `.dynsym` or `.symtab`, the version
//! from the `Py_Version` constant (3.11+), and the evaluation loop's `.cold` part where
//! `.symtab` names it, or else where its FDE and the loop's jumps put it (3.11+, [`super::cold`]). All addresses are the object's own (add the mapping's bias).

use object::{Object as _, ObjectSection as _, ObjectSymbol as _, ReadRef};

use tracer_common::python::PyProcInfo;

use super::{PythonError, layout::Layout};

/// An interpreter found in an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PythonImage {
    pub major: u8,
    pub minor: u8,
    /// From `Py_Version` (3.11+); `None` when the version was inferred from the API the
    /// interpreter exports (3.6-3.10), which says nothing of the micro release.
    pub micro: Option<u8>,
    /// Address of `_PyRuntime`.
    pub runtime: u64,
    /// `[start, end)` of `_PyEval_EvalFrameDefault`.
    pub eval: (u64, u64),
    /// `[start, end)` of `_PyEval_EvalFrameDefault.cold`, when the symbol table names it or
    /// (3.11+) it is found without ([`super::cold`]).
    pub cold: Option<(u64, u64)>,
    pub layout: Layout,
}

/// Bytes of `_PyRuntime` read (its debug offsets, the start of it).
const RUNTIME_READ: u64 = super::debug_offsets::DEBUG_OFFSETS_SIZE as u64;

/// The interpreter in the ELF object `data`: `Ok(None)` when it is none (no `_PyRuntime` or
/// no evaluation loop), an error when it is one the tracer cannot walk.
pub fn detect<'d, R: ReadRef<'d>>(data: R) -> Result<Option<PythonImage>, PythonError> {
    let file = object::File::parse(data).map_err(|e| PythonError::Elf(e.to_string()))?;
    let mut runtime = None;
    let mut eval = None;
    let mut cold = None;
    let mut version = None;
    let (mut interp_head, mut eval_ex, mut newest_api) = (None, false, 6u8);
    for symbol in file.dynamic_symbols().chain(file.symbols()) {
        let Ok(name) = symbol.name_bytes() else { continue };
        if symbol.is_undefined() {
            continue;
        }
        let range = (symbol.address(), symbol.address().saturating_add(symbol.size()));
        match name {
            b"_PyRuntime" => runtime = runtime.or(Some(range.0)),
            b"_PyEval_EvalFrameDefault" if symbol.size() > 0 => eval = eval.or(Some(range)),
            b"_PyEval_EvalFrameDefault.cold" if symbol.size() > 0 => cold = cold.or(Some(range)),
            b"Py_Version" => version = version.or(Some(range.0)),
            b"interp_head" => interp_head = interp_head.or(Some(range.0)),
            b"PyEval_EvalFrameEx" => eval_ex = true,
            b"Py_IsNone" => newest_api = newest_api.max(10),
            b"PyFrame_GetCode" => newest_api = newest_api.max(9),
            b"PyThread_get_thread_native_id" => newest_api = newest_api.max(8),
            _ => {}
        }
    }
    if runtime.is_some() {
        newest_api = newest_api.max(7);
    }
    let Some(runtime) = runtime.or(interp_head) else {
        // An evaluation loop of 3.6+ without `_PyRuntime`: 3.6 stripped of its `.symtab`.
        return if eval.is_some() {
            Err(PythonError::NoSymbolTable)
        } else {
            Ok(None)
        };
    };
    let Some(eval) = eval else {
        return if eval_ex { Err(PythonError::TooOld) } else { Ok(None) };
    };
    let Some(version) = version else {
        let layout = super::for_version(3, newest_api, None)?;
        if file.architecture() != object::Architecture::X86_64 {
            return Err(PythonError::ThreadsByTlsBase {
                major: 3,
                minor: newest_api,
                arch: format!("{:?}", file.architecture()).to_lowercase(),
            });
        }
        return Ok(Some(PythonImage {
            major: 3,
            minor: newest_api,
            micro: None,
            runtime,
            eval,
            cold,
            layout,
        }));
    };
    let hex = read_at(&file, version, 4).ok_or(PythonError::Unreadable("Py_Version"))?;
    let hex: [u8; 4] = hex.try_into().expect("4 bytes");
    let hex = if file.is_little_endian() {
        u32::from_le_bytes(hex)
    } else {
        u32::from_be_bytes(hex)
    };
    let (major, minor, micro) = ((hex >> 24) as u8, (hex >> 16) as u8, (hex >> 8) as u8);
    // Stripped of `.symtab` (Debian's 3.14 and 3.15 keep the loop in the unnamed cold part).
    let cold = cold.or_else(|| super::cold::cold_part(&file, eval));
    let layout = super::for_version(major, minor, read_at(&file, runtime, RUNTIME_READ))?;
    Ok(Some(PythonImage {
        major,
        minor,
        micro: Some(micro),
        runtime,
        eval,
        cold,
        layout,
    }))
}

/// `len` bytes of initialized data at address `addr`, if one section holds them all.
fn read_at<'d, R: ReadRef<'d>>(file: &object::File<'d, R>, addr: u64, len: u64) -> Option<&'d [u8]> {
    file.sections()
        .find_map(|section| section.data_range(addr, len).ok().flatten())
}

impl PythonImage {
    /// The kernel's record of a process that has this interpreter mapped with `bias` (its
    /// addresses in the process minus the object's own).
    pub fn proc_info(&self, bias: u64) -> PyProcInfo {
        let (cold_start, cold_end) = self
            .cold
            .map_or((0, 0), |(s, e)| (s.wrapping_add(bias), e.wrapping_add(bias)));
        PyProcInfo {
            runtime: self.runtime.wrapping_add(bias),
            eval_start: self.eval.0.wrapping_add(bias),
            eval_end: self.eval.1.wrapping_add(bias),
            cold_start,
            cold_end,
            offsets: self.layout.kernel,
            ident: self.layout.code.ident_offsets(),
            _pad: 0,
        }
    }
}

/// [`detect`] over an open object file (the registry's descriptor), read where needed.
pub fn detect_file(file: &std::fs::File) -> Result<Option<PythonImage>, PythonError> {
    let len = file.metadata().map_err(|e| PythonError::Elf(e.to_string()))?.len();
    let cache = object::ReadCache::new(crate::sys::objfile::Pread::new(file, len));
    detect(&cache)
}
