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
    /// Below the frame pointer: an interpreted frame's bytecode offset (a Smi, from the
    /// bytecode array's tagged address).
    pub fp_bytecode_offset: u8,
    /// Where a bytecode array's bytecodes start, and where an instruction stream's
    /// instructions do.
    pub bytecode_data: u64,
    pub istream_header: u64,
    pub bytecode_array_type: u16,
    pub code_type: u16,
    pub istream_type: u16,
    /// Slots of a compiled function's deoptimization data: the functions inlined into it,
    /// its own (V8 13: wrapped), and where the inlined ones were called.
    pub deopt_literals: u64,
    pub deopt_shared: u64,
    pub deopt_inlining: u64,
    /// External strings: where they keep their resource (the characters' address right
    /// after), and the type of those of one-byte characters whose address V8 keeps.
    pub external_resource: u64,
    pub external_one_byte_type: u16,
    /// The type of the byte arrays holding position tables (V8 13: trusted ones).
    pub byte_array_type: u16,
    /// The kind of code (`Code::flags & kind_mask`) of baseline (Sparkplug) code.
    pub kind_baseline: u16,
    pub kind_mask: u32,
    /// The fields V8 does not export for debuggers, by major version ([`CodeLayout::of`]).
    pub code: CodeLayout,
    /// The size of each bytecode at operand scales 1, 2 and 4 (three rows), the V8's own or
    /// the one known for its major version: baseline code's instructions are mapped to
    /// bytecodes with them.
    pub bytecode_sizes: Option<Vec<u8>>,
}

/// Where a V8 of a major version keeps what a frame's running line is read from, read from
/// V8's sources of that version (`code.h`/`code.tq`, `bytecode-array.tq`,
/// `shared-function-info.tq`) and checked against a running Node.js of each: the fields
/// V8 exports a constant for are checked against it too ([`detect`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodeLayout {
    /// `SharedFunctionInfo`: its bytecode, or baseline code, or other data (V8 13: the
    /// trusted part).
    pub shared_function_data: u64,
    /// `BytecodeArray`: its source position table.
    pub bytecode_positions: u64,
    /// `Code`: its deoptimization data (baseline code: its bytecode array), its source
    /// position table (baseline code: the bytecode offsets of its instructions), where its
    /// instructions start, its flags (32 bits), its instructions' size (32 bits).
    pub code_data: u64,
    pub code_positions: u64,
    pub code_start: u64,
    pub code_flags: u64,
    pub code_size: u64,
    /// `InstructionStream`: its `Code`.
    pub istream_code: u64,
    /// Whether the deoptimization data keeps the function's shared info in a wrapper
    /// (`SharedFunctionInfoWrapper`, its shared info at 8), and the tables are trusted byte
    /// arrays (V8 13's sandbox layout, whether or not the sandbox is on).
    pub shared_wrapped: bool,
    pub trusted_tables: bool,
}

impl CodeLayout {
    /// The layout of V8 `major` ([`KNOWN_MAJORS`] only).
    pub const fn of(major: u32) -> Option<CodeLayout> {
        match major {
            11 => Some(CodeLayout {
                shared_function_data: 8,
                bytecode_positions: 32,
                code_data: 16,
                code_positions: 24,
                code_start: 40,
                code_flags: 48,
                code_size: 56,
                istream_code: 8,
                shared_wrapped: false,
                trusted_tables: false,
            }),
            13 => Some(CodeLayout {
                shared_function_data: 8,
                bytecode_positions: 24,
                code_data: 8,
                code_positions: 16,
                code_start: 40,
                code_flags: 52,
                code_size: 56,
                istream_code: 8,
                shared_wrapped: true,
                trusted_tables: true,
            }),
            _ => None,
        }
    }
}

/// A field of [`CodeLayout`].
type Field = fn(&CodeLayout) -> u64;

/// Constants some V8s export for fields of [`CodeLayout`]: when one is, it must agree.
const CHECKED: &[(&str, Field)] = &[
    ("v8dbg_class_SharedFunctionInfo__function_data__Object", |c| {
        c.shared_function_data
    }),
    ("v8dbg_class_Code__deoptimization_data__FixedArray", |c| c.code_data),
    ("v8dbg_class_Code__source_position_table__ByteArray", |c| {
        c.code_positions
    }),
    ("v8dbg_class_Code__instruction_start__Address", |c| c.code_start),
    ("v8dbg_class_Code__flags__uint32_t", |c| c.code_flags),
    ("v8dbg_class_Code__instruction_size__int", |c| c.code_size),
];

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
    &["v8dbg_off_fp_bytecode_offset"],
    &["v8dbg_class_BytecodeArray__data__uintptr_t"],
    &["v8dbg_class_InstructionStream__instruction_start__uintptr_t"],
    &["v8dbg_type_BytecodeArray__BYTECODE_ARRAY_TYPE"],
    &["v8dbg_type_Code__CODE_TYPE"],
    &["v8dbg_type_InstructionStream__INSTRUCTION_STREAM_TYPE"],
    &["v8dbg_DeoptimizationDataLiteralArrayIndex"],
    &[
        "v8dbg_DeoptimizationDataSharedFunctionInfoIndex",
        "v8dbg_DeoptimizationDataWrappedSharedFunctionInfoIndex",
    ],
    &["v8dbg_DeoptimizationDataInliningPositionsIndex"],
    &["v8dbg_CodeKindBaseline"],
    &["v8dbg_CodeKindFieldMask"],
    &["v8dbg_type_ByteArray__BYTE_ARRAY_TYPE"],
    &["v8dbg_class_ExternalString__resource__Object"],
    &["v8dbg_type_ExternalOneByteString__EXTERNAL_ONE_BYTE_STRING_TYPE"],
];

/// The size of each bytecode at each operand scale (`uint8_t[3][kBytecodeCount]`), which
/// Node.js 20's `node` exports and Node.js 24's `libnode` does not (`bytecodes.rs`).
const BYTECODE_SIZES: &str = "_ZN2v88internal11interpreter9Bytecodes14kBytecodeSizesE";

/// The type of trusted byte arrays, which only V8s that have them export.
const TRUSTED_BYTE_ARRAY: &str = "v8dbg_type_TrustedByteArray__TRUSTED_BYTE_ARRAY_TYPE";

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
    let mut checked: [Option<u64>; CHECKED.len()] = [None; CHECKED.len()];
    let mut trusted = None;
    let mut major = None;
    // The constants are exported (`node`, `libnode.so`), so the dynamic symbols hold them,
    // stripped or not; the full symbol table of every object a process maps is not read
    // (a large program's takes seconds to scan).
    let mut sizes = None;
    for symbol in file.dynamic_symbols() {
        if symbol.is_undefined() {
            continue;
        }
        let Ok(name) = symbol.name() else { continue };
        if name == BYTECODE_SIZES {
            sizes = Some((symbol.address(), symbol.size()));
            continue;
        }
        if symbol.size() != 4 {
            continue;
        }
        if !name.starts_with("v8dbg_") && name != MAJOR {
            continue;
        }
        if name == MAJOR {
            major = major.or(Some(symbol.address()));
        } else if let Some(i) = NAMES.iter().position(|n| n.contains(&name)) {
            addrs[i] = addrs[i].or(Some(symbol.address()));
        } else if let Some(i) = CHECKED.iter().position(|(n, _)| *n == name) {
            checked[i] = checked[i].or(Some(symbol.address()));
        } else if name == TRUSTED_BYTE_ARRAY {
            trusted = trusted.or(Some(symbol.address()));
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
    let mut layout = Layout::from_values(major, &values)?;
    // Three rows (operand scales 1, 2, 4) of a byte per bytecode: the V8's own, or the one
    // known for its major version (`bytecodes.rs`).
    layout.bytecode_sizes = sizes
        .filter(|&(_, size)| size % 3 == 0 && (3..=3 * 256).contains(&size))
        .and_then(|(addr, size)| {
            file.sections()
                .find_map(|section| section.data_range(addr, size).ok().flatten())
        })
        .map(<[u8]>::to_vec)
        .or_else(|| (major == 13).then(|| super::bytecodes::V8_13_SIZES.to_vec()));
    if layout.code.trusted_tables {
        let value = trusted.and_then(read).ok_or(V8Error::Missing(TRUSTED_BYTE_ARRAY))?;
        layout.byte_array_type = u16::try_from(value).map_err(|_| V8Error::Malformed(TRUSTED_BYTE_ARRAY))?;
    }
    for (&(name, field), addr) in CHECKED.iter().zip(checked) {
        let Some(addr) = addr else { continue };
        if read(addr).map(i64::from) != Some(field(&layout.code) as i64) {
            return Err(V8Error::Malformed(name));
        }
    }
    Ok(Some(layout))
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
        let index = |i: usize| -> Result<u64, V8Error> {
            u64::try_from(values[i])
                .ok()
                .filter(|v| *v < 64)
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
            fp_bytecode_offset: below(27)?,
            bytecode_data: field(28)?,
            istream_header: field(29)?,
            bytecode_array_type: small(30)?,
            code_type: small(31)?,
            istream_type: small(32)?,
            deopt_literals: index(33)?,
            deopt_shared: index(34)?,
            deopt_inlining: index(35)?,
            kind_baseline: small(36)?,
            kind_mask: u32::try_from(values[37])
                .ok()
                .filter(|m| (1..=0xffff).contains(m))
                .ok_or(V8Error::Malformed(NAMES[37][0]))?,
            code: CodeLayout::of(major).ok_or(V8Error::UnknownVersion(major))?,
            byte_array_type: small(38)?,
            external_resource: field(39)?,
            external_one_byte_type: small(40)?,
            bytecode_sizes: None,
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
        tracer_common::frame_word::v8_config(
            self.fp_context,
            self.fp_function,
            self.function_shared,
            u16::from(self.fp_bytecode_offset),
        )
    }
}
