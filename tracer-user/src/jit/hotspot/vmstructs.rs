//! HotSpot's own description of its data structures (`vmStructs.cpp`), as the JVM exports it
//! for debuggers: `gHotSpotVMStructs` points to an array of entries (type name, field name,
//! type string, static or not, offset, address), `gHotSpotVMTypes` to one of types (name and
//! size), and the strides and the places of the entries' parts are exported variables too.
//! [`Layout::read`] reads from them the offsets the code-heap walk needs ([`super::heap`]), so
//! that no build of the JVM is assumed; a field it needs and does not find refuses the process.
//!
//! Everything is read from the process through [`Memory`]: bounded reads of hostile bytes.
//! The arrays end at an entry without a type name, or after [`MAX_ENTRIES`].

use std::collections::HashMap;

use super::HotSpotError;

/// The most entries read from either array.
pub const MAX_ENTRIES: usize = 8192;
/// The longest name read (type, field or blob name).
pub const MAX_NAME: usize = 256;

/// Reads a process's memory (tests: a fake one).
pub trait Memory {
    /// Fill `buf` from `addr`: false when any of it cannot be read.
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool;

    fn u64(&mut self, addr: u64) -> Option<u64> {
        let mut b = [0; 8];
        self.read(addr, &mut b).then(|| u64::from_le_bytes(b))
    }

    fn i32(&mut self, addr: u64) -> Option<i32> {
        let mut b = [0; 4];
        self.read(addr, &mut b).then(|| i32::from_le_bytes(b))
    }

    fn u16(&mut self, addr: u64) -> Option<u16> {
        let mut b = [0; 2];
        self.read(addr, &mut b).then(|| u16::from_le_bytes(b))
    }

    /// The NUL-terminated string at `addr`, of at most [`MAX_NAME`] bytes (read in small
    /// pieces: a string may end just before unreadable memory).
    fn c_string(&mut self, addr: u64) -> Option<String> {
        if addr == 0 {
            return None;
        }
        let mut out = Vec::new();
        let mut chunk = [0u8; 32];
        while out.len() < MAX_NAME {
            let at = addr.checked_add(out.len() as u64)?;
            // Up to the end of the page, so that a read never crosses into one not mapped.
            let room = (4096 - (at % 4096)).min(chunk.len() as u64) as usize;
            if !self.read(at, &mut chunk[..room]) {
                return None;
            }
            match chunk[..room].iter().position(|&b| b == 0) {
                Some(end) => {
                    out.extend_from_slice(&chunk[..end]);
                    return String::from_utf8(out).ok();
                }
                None => out.extend_from_slice(&chunk[..room]),
            }
        }
        None
    }
}

/// Where the exported variables that describe the tables are, in the process (the library's
/// symbols plus its bias).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exports {
    pub structs: u64,
    pub struct_stride: u64,
    pub struct_type_name: u64,
    pub struct_field_name: u64,
    pub struct_type_string: u64,
    pub struct_is_static: u64,
    pub struct_offset: u64,
    pub struct_address: u64,
    pub types: u64,
    pub type_stride: u64,
    pub type_name: u64,
    pub type_size: u64,
}

/// The exported symbols [`Exports`] is made of, in its order.
pub const EXPORTS: [&str; 12] = [
    "gHotSpotVMStructs",
    "gHotSpotVMStructEntryArrayStride",
    "gHotSpotVMStructEntryTypeNameOffset",
    "gHotSpotVMStructEntryFieldNameOffset",
    "gHotSpotVMStructEntryTypeStringOffset",
    "gHotSpotVMStructEntryIsStaticOffset",
    "gHotSpotVMStructEntryOffsetOffset",
    "gHotSpotVMStructEntryAddressOffset",
    "gHotSpotVMTypes",
    "gHotSpotVMTypeEntryArrayStride",
    "gHotSpotVMTypeEntryTypeNameOffset",
    "gHotSpotVMTypeEntrySizeOffset",
];

impl Exports {
    /// From the values of [`EXPORTS`], in its order (biased: addresses in the process).
    pub fn from_values(v: [u64; 12]) -> Exports {
        Exports {
            structs: v[0],
            struct_stride: v[1],
            struct_type_name: v[2],
            struct_field_name: v[3],
            struct_type_string: v[4],
            struct_is_static: v[5],
            struct_offset: v[6],
            struct_address: v[7],
            types: v[8],
            type_stride: v[9],
            type_name: v[10],
            type_size: v[11],
        }
    }
}

/// The offsets and addresses the code-heap walk reads with (module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// The JVM's release string (`17.0.15+6-...`) and its major version.
    pub release: String,
    pub major: u32,
    /// Static: the address of `CodeCache::_heaps` (a `GrowableArray<CodeHeap*>*`).
    pub code_heaps: u64,
    pub array_len: u64,
    pub array_data: u64,
    pub heap_memory: u64,
    pub heap_log2_segment: u64,
    pub space_low: u64,
    pub space_high: u64,
    pub block_size: u64,
    /// A block's length in segments: its offset and width (8: `size_t` to JDK 21, 4:
    /// `uint32_t` since).
    pub block_length: u64,
    pub block_length_width: u8,
    pub block_used: u64,
    pub blob_name: u64,
    pub blob_size: u64,
    /// Where the frame is complete, bytes from the code's start: its offset and width (4:
    /// `int` to JDK 21, 2: `int16_t` since).
    pub blob_frame_complete: u64,
    pub blob_frame_complete_width: u8,
    pub blob_frame_size: u64,
    /// Where a blob's code is: the two fields' offsets, read as [`CodeRange`] says.
    pub blob_code: CodeRange,
    pub blob_code_begin: u64,
    pub blob_code_end: u64,
    /// `CompiledMethod::_method` (to JDK 21), `nmethod::_method` since.
    pub compiled_method: u64,
    pub nmethod_stub_offset: u64,
    pub method_const: u64,
    pub const_constants: u64,
    pub const_name_index: u64,
    pub pool_holder: u64,
    pub pool_size: u64,
    pub klass_name: u64,
    pub symbol_length: u64,
    pub symbol_body: u64,
    /// Where compiled methods keep the Java scopes of their PCs and methods their line tables
    /// (`scopes`); `None` for a version without the fields.
    pub scopes: Option<ScopeLayout>,
}

/// Where a compiled method's `PcDesc`s, scope descriptions and metadata are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScopesAt {
    /// In its blob (to JDK 21): `nmethod` `int`s from the blob's start where its `PcDesc`s
    /// begin and end (its dependencies follow them) and its metadata begins; the
    /// `CompiledMethod` address where its scope descriptions begin (they end where the
    /// `PcDesc`s begin).
    InBlob {
        pcs_offset: u64,
        pcs_end_offset: u64,
        metadata_offset: u64,
        scopes_begin: u64,
    },
    /// Apart from the code heap (since JDK 23): the `PcDesc`s and then the scope descriptions
    /// in the method's immutable data (`nmethod::_immutable_data`, its size, and the `int`
    /// offsets of both in it); the metadata in its mutable data
    /// (`CodeBlob::_mutable_data` and its size), after its relocations.
    Apart {
        immutable: u64,
        immutable_size: u64,
        pcs_offset: u64,
        scopes_offset: u64,
        mutable: u64,
        mutable_size: u64,
        relocation_size: u64,
    },
}

impl Default for ScopesAt {
    fn default() -> ScopesAt {
        ScopesAt::InBlob {
            pcs_offset: 0,
            pcs_end_offset: 0,
            metadata_offset: 0,
            scopes_begin: 0,
        }
    }
}

/// What [`Layout::scopes`] reads with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScopeLayout {
    pub at: ScopesAt,
    /// A `PcDesc`'s size, and where its PC's and its scope's offsets are in it.
    pub pc_desc_size: u64,
    pub pc_desc_pc: u64,
    pub pc_desc_scope: u64,
    /// `ConstMethod`: its flags (offset, width: 2 to JDK 20, 4 since; bit 0: it has a line
    /// table, in 17, 21 and 25), its bytecodes' length, and its size (the bytecodes follow
    /// it, the line table follows them).
    pub const_flags: u64,
    pub const_flags_width: u8,
    pub const_code_size: u64,
    pub const_size: u64,
    pub coding: super::scopes::Coding,
}

/// Where a blob's code is, as the version keeps it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CodeRange {
    /// `_code_begin` and `_code_end`: addresses (to JDK 21).
    #[default]
    Pointers,
    /// `_code_offset` and `_data_offset`: `int`s from the blob's start (since).
    Offsets,
}

/// The JVM major versions whose code heaps the walk knows (their frames' layout, checked on
/// them): others are refused by name.
pub const KNOWN_MAJORS: [u32; 3] = [17, 21, 25];

/// The types whose fields are read (others are skipped without reading their field names).
const TYPES: [&str; 16] = [
    "CodeCache",
    "GrowableArrayBase",
    "GrowableArray<int>",
    "CodeHeap",
    "VirtualSpace",
    "HeapBlock",
    "HeapBlock::Header",
    "CodeBlob",
    "CompiledMethod",
    "nmethod",
    "Method",
    "ConstMethod",
    "ConstantPool",
    "Klass",
    "Symbol",
    "PcDesc",
];

impl Layout {
    /// Read the tables `exports` describes (module docs); the version is checked against
    /// [`KNOWN_MAJORS`].
    pub fn read(mem: &mut dyn Memory, exports: &Exports) -> Result<Layout, HotSpotError> {
        let (fields, statics, types) = read_fields(mem, exports)?;
        let sizes = read_sizes(mem, exports)?;
        let field = |t: &str, f: &str| {
            fields
                .get(&(t.to_owned(), f.to_owned()))
                .copied()
                .ok_or_else(|| HotSpotError::Missing(format!("{t}::{f}")))
        };
        let static_ = |t: &str, f: &str| {
            statics
                .get(&(t.to_owned(), f.to_owned()))
                .copied()
                .ok_or_else(|| HotSpotError::Missing(format!("{t}::{f}")))
        };
        let size = |t: &str| sizes.get(t).copied().ok_or_else(|| HotSpotError::Missing(t.to_owned()));
        let release = mem
            .u64(static_("Abstract_VM_Version", "_s_vm_release")?)
            .and_then(|p| mem.c_string(p))
            .ok_or(HotSpotError::Unreadable("the release string"))?;
        let major = major_version(&release).ok_or_else(|| HotSpotError::Version(release.clone()))?;
        if !KNOWN_MAJORS.contains(&major) {
            return Err(HotSpotError::Version(release));
        }
        let header = field("HeapBlock", "_header")?;
        let width = |t: &str, f: &str, wide: (&str, u8), narrow: (&str, u8)| match types
            .get(&(t.to_owned(), f.to_owned()))
            .map(String::as_str)
        {
            Some(w) if w == wide.0 => Ok(wide.1),
            Some(n) if n == narrow.0 => Ok(narrow.1),
            _ => Err(HotSpotError::Missing(format!(
                "{t}::{f} of type {} or {}",
                wide.0, narrow.0
            ))),
        };
        let (blob_code, blob_code_begin, blob_code_end) = match field("CodeBlob", "_code_begin") {
            Ok(begin) => (CodeRange::Pointers, begin, field("CodeBlob", "_code_end")?),
            Err(_) => (
                CodeRange::Offsets,
                field("CodeBlob", "_code_offset")?,
                field("CodeBlob", "_data_offset")?,
            ),
        };
        let compiled_method = field("CompiledMethod", "_method").or_else(|_| field("nmethod", "_method"))?;
        let scopes = (|| -> Result<ScopeLayout, HotSpotError> {
            let (const_flags, const_flags_width) = match field("ConstMethod", "_flags") {
                Ok(at) => (at, width("ConstMethod", "_flags", ("u2", 2), ("u2", 2))?),
                Err(_) => (
                    field("ConstMethod", "_flags._flags")?,
                    width("ConstMethod", "_flags._flags", ("u4", 4), ("u4", 4))?,
                ),
            };
            let at = match field("nmethod", "_immutable_data") {
                Err(_) => ScopesAt::InBlob {
                    pcs_offset: field("nmethod", "_scopes_pcs_offset")?,
                    pcs_end_offset: field("nmethod", "_dependencies_offset")?,
                    metadata_offset: field("nmethod", "_metadata_offset")?,
                    scopes_begin: field("CompiledMethod", "_scopes_data_begin")?,
                },
                Ok(immutable) => ScopesAt::Apart {
                    immutable,
                    immutable_size: field("nmethod", "_immutable_data_size")?,
                    pcs_offset: field("nmethod", "_scopes_pcs_offset")?,
                    scopes_offset: field("nmethod", "_scopes_data_offset")?,
                    mutable: field("CodeBlob", "_mutable_data")?,
                    mutable_size: field("CodeBlob", "_mutable_data_size")?,
                    relocation_size: field("CodeBlob", "_relocation_size")?,
                },
            };
            Ok(ScopeLayout {
                at,
                pc_desc_size: size("PcDesc")?,
                pc_desc_pc: field("PcDesc", "_pc_offset")?,
                pc_desc_scope: field("PcDesc", "_scope_decode_offset")?,
                const_flags,
                const_flags_width,
                const_code_size: field("ConstMethod", "_code_size")?,
                const_size: size("ConstMethod")?,
                coding: super::scopes::Coding::of_major(major),
            })
        })()
        .ok();
        Ok(Layout {
            major,
            code_heaps: static_("CodeCache", "_heaps")?,
            array_len: field("GrowableArrayBase", "_len")?,
            array_data: field("GrowableArray<int>", "_data")?,
            heap_memory: field("CodeHeap", "_memory")?,
            heap_log2_segment: field("CodeHeap", "_log2_segment_size")?,
            space_low: field("VirtualSpace", "_low")?,
            space_high: field("VirtualSpace", "_high")?,
            block_size: size("HeapBlock")?,
            block_length: header.wrapping_add(field("HeapBlock::Header", "_length")?),
            block_length_width: width("HeapBlock::Header", "_length", ("size_t", 8), ("uint32_t", 4))?,
            block_used: header.wrapping_add(field("HeapBlock::Header", "_used")?),
            blob_name: field("CodeBlob", "_name")?,
            blob_size: field("CodeBlob", "_size")?,
            blob_frame_complete: field("CodeBlob", "_frame_complete_offset")?,
            blob_frame_complete_width: width("CodeBlob", "_frame_complete_offset", ("int", 4), ("int16_t", 2))?,
            blob_frame_size: field("CodeBlob", "_frame_size")?,
            blob_code,
            blob_code_begin,
            blob_code_end,
            compiled_method,
            nmethod_stub_offset: field("nmethod", "_stub_offset")?,
            method_const: field("Method", "_constMethod")?,
            const_constants: field("ConstMethod", "_constants")?,
            const_name_index: field("ConstMethod", "_name_index")?,
            pool_holder: field("ConstantPool", "_pool_holder")?,
            pool_size: size("ConstantPool")?,
            klass_name: field("Klass", "_name")?,
            symbol_length: field("Symbol", "_length")?,
            symbol_body: field("Symbol", "_body")?,
            scopes,
            release,
        })
    }
}

/// `17` of `17.0.15+6-Debian-1deb12u1` (and `1` of an old `1.8.0_392-b08`, refused).
pub fn major_version(release: &str) -> Option<u32> {
    let digits: String = release.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

type Fields = HashMap<(String, String), u64>;
type FieldTypes = HashMap<(String, String), String>;

/// The fields whose type string is read (their width changed between versions).
const TYPED: [(&str, &str); 4] = [
    ("HeapBlock::Header", "_length"),
    ("CodeBlob", "_frame_complete_offset"),
    ("ConstMethod", "_flags"),
    ("ConstMethod", "_flags._flags"),
];

/// The fields of [`TYPES`] and the statics of `Abstract_VM_Version` and `CodeCache`: offsets,
/// and addresses of statics; and the type strings of [`TYPED`].
fn read_fields(mem: &mut dyn Memory, e: &Exports) -> Result<(Fields, Fields, FieldTypes), HotSpotError> {
    let values = [
        e.structs,
        e.struct_stride,
        e.struct_type_name,
        e.struct_field_name,
        e.struct_type_string,
        e.struct_is_static,
        e.struct_offset,
        e.struct_address,
    ]
    .map(|a| mem.u64(a));
    let [
        Some(array),
        Some(stride),
        Some(type_at),
        Some(field_at),
        Some(string_at),
        Some(static_at),
        Some(offset_at),
        Some(address_at),
    ] = values
    else {
        return Err(HotSpotError::Unreadable("the vmStructs exports"));
    };
    let parts = [type_at, field_at, string_at, static_at, offset_at, address_at];
    // The exports are set as the JVM starts (`vmStructs_init`): still zero, it is not ready.
    if array == 0 || stride == 0 {
        return Err(HotSpotError::NotReady);
    }
    if !(8..=256).contains(&stride) || parts.iter().any(|&p| p.saturating_add(8) > stride) {
        return Err(HotSpotError::Malformed("vmStructs entry layout"));
    }
    let (mut fields, mut statics, mut types) = (Fields::new(), Fields::new(), FieldTypes::new());
    let mut names: HashMap<u64, Option<String>> = HashMap::new();
    for i in 0..MAX_ENTRIES as u64 {
        let entry = array
            .checked_add(i * stride)
            .ok_or(HotSpotError::Malformed("vmStructs"))?;
        let mut bytes = vec![0u8; stride as usize];
        if !mem.read(entry, &mut bytes) {
            return Err(HotSpotError::Unreadable("vmStructs"));
        }
        let word = |at: u64| u64::from_le_bytes(bytes[at as usize..at as usize + 8].try_into().unwrap_or_default());
        let type_ptr = word(type_at);
        if type_ptr == 0 {
            return Ok((fields, statics, types));
        }
        let type_name = names.entry(type_ptr).or_insert_with(|| mem.c_string(type_ptr)).clone();
        let Some(type_name) = type_name else { continue };
        let wanted_static = matches!(type_name.as_str(), "Abstract_VM_Version" | "CodeCache");
        if !wanted_static && !TYPES.contains(&type_name.as_str()) {
            continue;
        }
        let Some(field_name) = mem.c_string(word(field_at)) else {
            continue;
        };
        if TYPED.contains(&(type_name.as_str(), field_name.as_str()))
            && let Some(type_string) = mem.c_string(word(string_at))
        {
            types.insert((type_name.clone(), field_name.clone()), type_string);
        }
        let is_static = u32::from_le_bytes(
            bytes[static_at as usize..static_at as usize + 4]
                .try_into()
                .unwrap_or_default(),
        ) != 0;
        if is_static {
            statics.insert((type_name, field_name), word(address_at));
        } else {
            fields.insert((type_name, field_name), word(offset_at));
        }
    }
    Err(HotSpotError::Malformed("vmStructs has no end"))
}

/// The sizes of the types named in [`TYPES`].
fn read_sizes(mem: &mut dyn Memory, e: &Exports) -> Result<HashMap<String, u64>, HotSpotError> {
    let [Some(array), Some(stride), Some(name_at), Some(size_at)] =
        [e.types, e.type_stride, e.type_name, e.type_size].map(|a| mem.u64(a))
    else {
        return Err(HotSpotError::Unreadable("the vmTypes exports"));
    };
    if array == 0 || stride == 0 {
        return Err(HotSpotError::NotReady);
    }
    if !(8..=256).contains(&stride) || name_at.saturating_add(8) > stride || size_at.saturating_add(8) > stride {
        return Err(HotSpotError::Malformed("vmTypes entry layout"));
    }
    let mut sizes = HashMap::new();
    for i in 0..MAX_ENTRIES as u64 {
        let entry = array
            .checked_add(i * stride)
            .ok_or(HotSpotError::Malformed("vmTypes"))?;
        let (Some(name_ptr), Some(size)) = (mem.u64(entry + name_at), mem.u64(entry + size_at)) else {
            return Err(HotSpotError::Unreadable("vmTypes"));
        };
        if name_ptr == 0 {
            return Ok(sizes);
        }
        if let Some(name) = mem.c_string(name_ptr)
            && TYPES.contains(&name.as_str())
        {
            sizes.insert(name, size);
        }
    }
    Err(HotSpotError::Malformed("vmTypes has no end"))
}
