//! Whether an ELF object is a V8 (the `node` executable, or a `libnode.so`), and where its
//! objects keep what a frame is named with, from the `v8dbg_*` constants V8 exports for
//! debuggers (frame slots, object fields, instance types) and its major version
//! (`v8::internal::Version::major_`). A V8 of a major version not in [`KNOWN_MAJORS`] is
//! refused by name: the parts of a scope's description read without constants for them
//! (module docs of [`super::read`]) were checked against those only.

use object::{Object as _, ObjectSection as _, ObjectSymbol as _, ReadRef};

use super::V8Error;

/// The major versions of V8 whose frames are named: Node.js 20 (V8 11) and 24 (V8 13).
pub const KNOWN_MAJORS: &[u32] = &[11, 13];

/// Where a V8's frames and objects keep what naming reads (byte offsets; types are instance
/// types).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    pub major: u32,
    /// Below the frame pointer: the context (a frame-type marker in V8's own frames) and the
    /// function.
    pub fp_context: u8,
    pub fp_function: u8,
    pub function_shared: u8,
    pub shared_name_or_scope_info: u64,
    pub shared_script: u64,
    pub script_name: u64,
    pub script_source: u64,
    pub map_instance_type: u64,
    pub string_length: u64,
    pub seq_chars: u64,
    pub cons_first: u64,
    pub cons_second: u64,
    pub thin_actual: u64,
    pub first_nonstring_type: u16,
    pub string_encoding_mask: u16,
    pub one_byte_tag: u16,
    pub string_representation_mask: u16,
    pub seq_tag: u16,
    pub cons_tag: u16,
    pub thin_tag: u16,
    pub shared_type: u16,
    pub scope_info_type: u16,
    pub script_type: u16,
    /// Slots of a scope's description: the count of context locals, and the first name.
    pub scope_context_locals: u64,
    pub scope_first_vars: u64,
    /// Bits a Smi's value is shifted by (31 + 1 without pointer compression).
    pub smi_shift: u32,
}

/// The constants read, in the order of [`Layout::from_values`]; each by any of its names
/// (V8 13 names some fields by their type, `Tagged_...`).
const NAMES: &[&[&str]] = &[
    &["v8dbg_off_fp_context"],
    &["v8dbg_off_fp_function"],
    &["v8dbg_class_JSFunction__shared__SharedFunctionInfo"],
    &[
        "v8dbg_class_SharedFunctionInfo__name_or_scope_info__Object",
        "v8dbg_class_SharedFunctionInfo__name_or_scope_info__Tagged_NameOrScopeInfoT_",
    ],
    &[
        "v8dbg_class_SharedFunctionInfo__script_or_debug_info__HeapObject",
        "v8dbg_class_SharedFunctionInfo__script__Tagged_HeapObject_",
    ],
    &["v8dbg_class_Script__name__Object"],
    &["v8dbg_class_Script__source__Object"],
    &["v8dbg_class_Map__instance_type__uint16_t"],
    &["v8dbg_class_String__length__int32_t"],
    &["v8dbg_class_SeqOneByteString__chars__char"],
    &["v8dbg_class_ConsString__first__String"],
    &["v8dbg_class_ConsString__second__String"],
    &["v8dbg_class_ThinString__actual__String"],
    &["v8dbg_FirstNonstringType"],
    &["v8dbg_StringEncodingMask"],
    &["v8dbg_OneByteStringTag"],
    &["v8dbg_StringRepresentationMask"],
    &["v8dbg_ConsStringTag"],
    &["v8dbg_ThinStringTag"],
    &["v8dbg_type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE"],
    &["v8dbg_type_ScopeInfo__SCOPE_INFO_TYPE"],
    &["v8dbg_type_Script__SCRIPT_TYPE"],
    &["v8dbg_scopeinfo_idx_ncontextlocals"],
    &["v8dbg_scopeinfo_idx_first_vars"],
    &["v8dbg_SmiShiftSize"],
    &["v8dbg_SmiValueShift"],
    &["v8dbg_class_SeqTwoByteString__chars__char"],
];

/// The symbol of V8's major version.
const MAJOR: &str = "_ZN2v88internal7Version6major_E";

/// The V8 in ELF object `data`: `Ok(None)` when it is none (no `v8dbg_off_fp_function`), an
/// error when it is one whose frames are not named.
pub fn detect<'d, R: ReadRef<'d>>(data: R) -> Result<Option<Layout>, V8Error> {
    // What cannot be parsed is no V8 this reads (the registry says what it is).
    let Ok(file) = object::File::parse(data) else {
        return Ok(None);
    };
    let mut addrs: [Option<u64>; NAMES.len()] = [None; NAMES.len()];
    let mut major = None;
    // The constants are exported (`node`, `libnode.so`), so the dynamic symbols hold them,
    // stripped or not; the full symbol table of every object a process maps is not read
    // (a large program's takes seconds to scan).
    for symbol in file.dynamic_symbols() {
        if symbol.is_undefined() || symbol.size() != 4 {
            continue;
        }
        let Ok(name) = symbol.name() else { continue };
        if !name.starts_with("v8dbg_") && name != MAJOR {
            continue;
        }
        if name == MAJOR {
            major = major.or(Some(symbol.address()));
        } else if let Some(i) = NAMES.iter().position(|n| n.contains(&name)) {
            addrs[i] = addrs[i].or(Some(symbol.address()));
        }
    }
    if addrs[1].is_none() {
        return Ok(None);
    }
    let read = |addr: u64| -> Option<i32> {
        let bytes = file
            .sections()
            .find_map(|section| section.data_range(addr, 4).ok().flatten())?;
        let bytes: [u8; 4] = bytes.try_into().ok()?;
        Some(if file.is_little_endian() {
            i32::from_le_bytes(bytes)
        } else {
            i32::from_be_bytes(bytes)
        })
    };
    let major = major.and_then(read).ok_or(V8Error::Missing(MAJOR))?;
    let major = u32::try_from(major).map_err(|_| V8Error::UnknownVersion(0))?;
    if !KNOWN_MAJORS.contains(&major) {
        return Err(V8Error::UnknownVersion(major));
    }
    let mut values = [0i64; NAMES.len()];
    for (i, addr) in addrs.iter().enumerate() {
        values[i] = addr
            .and_then(read)
            .map(i64::from)
            .ok_or(V8Error::Missing(NAMES[i][0]))?;
    }
    Layout::from_values(major, &values).map(Some)
}

/// [`detect`] over an open object file (the registry's descriptor), read where needed.
pub fn detect_file(file: &std::fs::File) -> Result<Option<Layout>, V8Error> {
    let Ok(len) = file.metadata().map(|m| m.len()) else {
        return Ok(None);
    };
    let cache = object::ReadCache::new(crate::sys::objfile::Pread::new(file, len));
    detect(&cache)
}

impl Layout {
    /// The layout of the constants `values` (in the order of `NAMES`), each checked to be of
    /// a plausible size: a constant out of range refuses the V8.
    fn from_values(major: u32, values: &[i64; NAMES.len()]) -> Result<Layout, V8Error> {
        let below = |i: usize| -> Result<u8, V8Error> {
            u8::try_from(-values[i])
                .ok()
                .filter(|v| *v > 0 && v % 8 == 0)
                .ok_or(V8Error::Malformed(NAMES[i][0]))
        };
        let field = |i: usize| -> Result<u64, V8Error> {
            u64::try_from(values[i])
                .ok()
                .filter(|v| *v < 4096)
                .ok_or(V8Error::Malformed(NAMES[i][0]))
        };
        let small = |i: usize| -> Result<u16, V8Error> {
            u16::try_from(values[i] & 0xffff).map_err(|_| V8Error::Malformed(NAMES[i][0]))
        };
        let function_shared = u8::try_from(field(2)?).map_err(|_| V8Error::Malformed(NAMES[2][0]))?;
        // 31 + 1 without pointer compression (a Smi in the upper half); 0 + 1 with it, which
        // is not read.
        let smi_shift = (values[24] + values[25]) as u32;
        if smi_shift != 32 {
            return Err(V8Error::PointerCompression);
        }
        Ok(Layout {
            major,
            fp_context: below(0)?,
            fp_function: below(1)?,
            function_shared,
            shared_name_or_scope_info: field(3)?,
            shared_script: field(4)?,
            script_name: field(5)?,
            script_source: field(6)?,
            map_instance_type: field(7)?,
            string_length: field(8)?,
            seq_chars: field(9)?,
            cons_first: field(10)?,
            cons_second: field(11)?,
            thin_actual: field(12)?,
            first_nonstring_type: small(13)?,
            string_encoding_mask: small(14)?,
            one_byte_tag: small(15)?,
            string_representation_mask: small(16)?,
            seq_tag: 0,
            cons_tag: small(17)?,
            thin_tag: small(18)?,
            shared_type: small(19)?,
            scope_info_type: small(20)?,
            script_type: small(21)?,
            scope_context_locals: field(22)?,
            scope_first_vars: field(23)?,
            smi_shift,
        })
        .and_then(|layout| {
            // One- and two-byte sequential strings keep their characters at one place.
            if field(26)? == layout.seq_chars {
                Ok(layout)
            } else {
                Err(V8Error::Malformed(NAMES[26][0]))
            }
        })
    }

    /// The kernel's word for the mappings of a process running this V8
    /// (`tracer_common::frame_word::config`).
    pub fn config(&self) -> u32 {
        tracer_common::frame_word::v8_config(self.fp_context, self.fp_function, self.function_shared)
    }
}
