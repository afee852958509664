//! The code HotSpot compiled and generated, read from its code heaps: `CodeCache::_heaps`
//! lists them; each is a range of committed memory (`_memory._low` to `_memory._high`) cut
//! into blocks of whole segments, each block a header (its length in segments, whether it is
//! used) and, when used, a `CodeBlob`: its name (`nmethod` for compiled Java methods, else the
//! stub's: `Interpreter`, `StubRoutines (1)`...), its code range, its frame size (in words)
//! and where its frame is complete. A compiled method is named `Class.method` through its
//! `Method` (constant pool, holder class, symbols).
//!
//! The heap is the process's memory: every length, pointer and offset is checked against the
//! block it is in, the blocks read are bounded ([`MAX_HEAP_BYTES`], [`MAX_BLOBS`]), and a blob
//! that makes no sense is skipped (counted), never taken.

use super::{
    HotSpotError,
    scopes::{self, PcScopes},
    vmstructs::{CodeRange, Layout, Memory, ScopeLayout, ScopesAt},
};

/// The most bytes of a compiled method's scopes (or metadata) read from outside its blob.
pub const MAX_SCOPE_BYTES: u64 = 1 << 20;

/// The most committed bytes of one code heap read.
pub const MAX_HEAP_BYTES: u64 = 256 << 20;
/// The most code heaps (HotSpot has up to three).
pub const MAX_HEAPS: usize = 8;
/// The most blobs taken in one scan.
pub const MAX_BLOBS: usize = 200_000;
/// The largest frame taken, in words.
pub const MAX_FRAME_WORDS: i32 = 1 << 16;
/// Heap bytes read at a time.
const CHUNK: u64 = 1 << 20;

/// What a blob is, for the walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlobKind {
    /// A compiled Java method (C1, C2): a fixed frame, no frame pointer of its own.
    Compiled,
    /// A native method's wrapper, the interpreter, the call stub: they keep frame pointers.
    FramePointer,
    /// Other stubs and adapters.
    Stub,
}

/// One blob of code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blob {
    pub kind: BlobKind,
    /// Its code, at `code_begin` in the process.
    pub code_begin: u64,
    pub code: Vec<u8>,
    /// Bytes from `code_begin` where its frame is complete (`None`: not known), and its size in
    /// bytes (with the return address and the saved frame pointer).
    pub frame_complete: Option<u32>,
    pub frame_bytes: u32,
    /// For compiled methods: where the stubs after the method's body begin (bytes from
    /// `code_begin`), if within its code.
    pub body_end: Option<u32>,
    pub name: String,
    /// For compiled methods whose layout is read (`Layout::scopes`): the Java scopes of its
    /// PCs (`scopes`), by offset from `code_begin`, and its own method (`Method*`) with the
    /// name read for it (`None`: not readable).
    pub java: Vec<PcScopes>,
    pub method: Option<(u64, Option<String>)>,
}

/// A scan of a process's code heaps.
#[derive(Debug, Default)]
pub struct Scan {
    pub blobs: Vec<Blob>,
    /// The committed ranges of the heaps.
    pub heaps: Vec<(u64, u64)>,
    /// The runs of used blocks (start, end), in address order: where code was at the read.
    /// New code goes into the free blocks between them, or past them.
    pub used: Vec<(u64, u64)>,
    /// Blobs skipped as malformed, and compiled methods whose name could not be read.
    pub malformed: u64,
    pub unnamed: u64,
    /// Blobs past [`MAX_BLOBS`].
    pub over_limit: u64,
    /// Compiled methods whose Java scopes could not be read.
    pub unscoped: u64,
    /// The methods the compiled code's scopes run: name and line table (`methods`), and the
    /// coding of the scopes' numbers (`None`: scopes not read).
    pub methods: std::collections::HashMap<u64, super::methods::Method>,
    pub coding: Option<scopes::Coding>,
}

/// Read the code heaps of the process `mem` reads, whose JVM `layout` describes.
pub fn scan(mem: &mut dyn Memory, layout: &Layout) -> Result<Scan, HotSpotError> {
    let array = mem
        .u64(layout.code_heaps)
        .ok_or(HotSpotError::Unreadable("CodeCache::_heaps"))?;
    if array == 0 {
        return Err(HotSpotError::NotReady);
    }
    let len = mem
        .i32(array.wrapping_add(layout.array_len))
        .ok_or(HotSpotError::Unreadable("the code heap list"))?;
    let data = mem
        .u64(array.wrapping_add(layout.array_data))
        .ok_or(HotSpotError::Unreadable("the code heap list"))?;
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l <= MAX_HEAPS)
        .ok_or(HotSpotError::Malformed("code heap count"))?;
    if len == 0 {
        return Err(HotSpotError::NotReady);
    }
    let mut out = Scan::default();
    for i in 0..len as u64 {
        let heap = mem
            .u64(data.wrapping_add(i * 8))
            .ok_or(HotSpotError::Unreadable("a code heap"))?;
        let space = heap.wrapping_add(layout.heap_memory);
        let (Some(low), Some(high), Some(log2)) = (
            mem.u64(space.wrapping_add(layout.space_low)),
            mem.u64(space.wrapping_add(layout.space_high)),
            mem.i32(heap.wrapping_add(layout.heap_log2_segment)),
        ) else {
            return Err(HotSpotError::Unreadable("a code heap"));
        };
        // (A heap not set up yet, as the JVM starts: read again later.)
        if high == 0 || log2 == 0 {
            return Err(HotSpotError::NotReady);
        }
        if high < low || high - low > MAX_HEAP_BYTES || !(4..=16).contains(&log2) {
            return Err(HotSpotError::Malformed("code heap bounds"));
        }
        out.heaps.push((low, high));
        let mut bytes = vec![0u8; (high - low) as usize];
        for (n, chunk) in bytes.chunks_mut(CHUNK as usize).enumerate() {
            if !mem.read(low + n as u64 * CHUNK, chunk) {
                return Err(HotSpotError::Unreadable("code heap memory"));
            }
        }
        blocks(mem, layout, low, &bytes, log2 as u32, &mut out);
    }
    if let Some(scopes) = &layout.scopes {
        let methods = out
            .blobs
            .iter()
            .flat_map(|b| &b.java)
            .flat_map(|pc| &pc.scopes)
            .map(|&(method, _)| method);
        // (The compiled methods' own names were read with their blobs.)
        let named = out.blobs.iter().filter_map(|b| b.method.clone()).collect();
        out.methods = super::methods::read(mem, layout, scopes, methods, named);
        out.coding = Some(scopes.coding);
    }
    Ok(out)
}

/// The blobs in the blocks of one heap's committed `bytes` (at `low` in the process).
fn blocks(mem: &mut dyn Memory, layout: &Layout, low: u64, bytes: &[u8], log2: u32, out: &mut Scan) {
    let mut at = 0u64;
    let word = |at: u64| {
        let at = usize::try_from(at).ok()?;
        Some(u64::from_le_bytes(bytes.get(at..at.checked_add(8)?)?.try_into().ok()?))
    };
    let int = |at: u64| {
        let at = usize::try_from(at).ok()?;
        Some(i32::from_le_bytes(bytes.get(at..at.checked_add(4)?)?.try_into().ok()?))
    };
    while at < bytes.len() as u64 {
        let segments = match layout.block_length_width {
            8 => word(at.wrapping_add(layout.block_length)),
            _ => int(at.wrapping_add(layout.block_length)).map(|l| u64::from(l as u32)),
        };
        let Some(segments) = segments else {
            return;
        };
        let length = segments.checked_shl(log2).unwrap_or(0);
        if segments == 0 || length == 0 || at.checked_add(length).is_none_or(|end| end > bytes.len() as u64) {
            return; // past the last block, or not a block
        }
        let used = bytes
            .get((at.wrapping_add(layout.block_used)) as usize)
            .is_some_and(|&b| b != 0);
        if used {
            let (start, end) = (low + at, low + at + length);
            match out.used.last_mut() {
                Some(run) if run.1 == start => run.1 = end,
                _ => out.used.push((start, end)),
            }
            if out.blobs.len() >= MAX_BLOBS {
                out.over_limit += 1;
            } else {
                match blob(mem, layout, low, at, length, &word, &int, bytes) {
                    Some((blob, named)) => {
                        out.unnamed += u64::from(!named);
                        out.unscoped += u64::from(blob.kind == BlobKind::Compiled && blob.java.is_empty());
                        out.blobs.push(blob);
                    }
                    None => out.malformed += 1,
                }
            }
        }
        at += length;
    }
}

/// The blob of the used block at `at` (of `length` bytes), and whether it is named as it
/// should be; `None` if it makes no sense.
#[allow(clippy::too_many_arguments)]
fn blob(
    mem: &mut dyn Memory,
    layout: &Layout,
    low: u64,
    at: u64,
    length: u64,
    word: &dyn Fn(u64) -> Option<u64>,
    int: &dyn Fn(u64) -> Option<i32>,
    bytes: &[u8],
) -> Option<(Blob, bool)> {
    let blob = at.wrapping_add(layout.block_size);
    let (block_start, block_end) = (low + at, low + at + length);
    // Where the offsets of a blob start from: its header.
    let header = block_start.wrapping_add(layout.block_size);
    let (code_begin, code_end) = match layout.blob_code {
        CodeRange::Pointers => (
            word(blob.wrapping_add(layout.blob_code_begin))?,
            word(blob.wrapping_add(layout.blob_code_end))?,
        ),
        CodeRange::Offsets => {
            let offset = |at| int(blob.wrapping_add(at)).and_then(|o| u64::try_from(o).ok());
            (
                header.checked_add(offset(layout.blob_code_begin)?)?,
                header.checked_add(offset(layout.blob_code_end)?)?,
            )
        }
    };
    if code_begin < block_start.wrapping_add(layout.block_size) || code_end < code_begin || code_end > block_end {
        return None;
    }
    // (-1: a stub without a frame of its own.)
    let frame_words = int(blob.wrapping_add(layout.blob_frame_size))?.max(0);
    if frame_words > MAX_FRAME_WORDS {
        return None;
    }
    let size = code_end - code_begin;
    let frame_complete = match layout.blob_frame_complete_width {
        4 => int(blob.wrapping_add(layout.blob_frame_complete))?,
        _ => i32::from(int(blob.wrapping_add(layout.blob_frame_complete))? as i16),
    };
    // Bytes from the start of its code (-1: none).
    let frame_complete = u32::try_from(frame_complete).ok().filter(|&f| u64::from(f) <= size);
    let name = mem.c_string(word(blob.wrapping_add(layout.blob_name))?)?;
    let code = bytes
        .get((code_begin - low) as usize..(code_end - low) as usize)?
        .to_vec();
    let mut own = None;
    let (kind, name, named, body_end, java) = match name.as_str() {
        "nmethod" | "native nmethod" => {
            let method = word(blob.wrapping_add(layout.compiled_method))?;
            let read_name = super::methods::method_name(mem, layout, method);
            own = Some((method, read_name.clone()));
            let java_name = read_name;
            let named = java_name.is_some();
            let java_name = java_name.unwrap_or_else(|| String::from("[unknown Java method]"));
            if name == "nmethod" {
                let stubs = int(blob.wrapping_add(layout.nmethod_stub_offset))
                    .and_then(|s| u64::try_from(s).ok())
                    .and_then(|s| header.wrapping_add(s).checked_sub(code_begin))
                    .filter(|&s| s <= size)
                    .map(|s| s as u32);
                let java = layout
                    .scopes
                    .as_ref()
                    .map(|l| java_scopes(mem, l, (blob, header, low), (block_start, block_end), word, int, bytes))
                    .unwrap_or_default();
                (BlobKind::Compiled, java_name, named, stubs, java)
            } else {
                (
                    BlobKind::FramePointer,
                    format!("{java_name} (native)"),
                    named,
                    None,
                    Vec::new(),
                )
            }
        }
        "Interpreter" => (BlobKind::FramePointer, name, true, None, Vec::new()),
        n if n.starts_with("StubRoutines") => (BlobKind::FramePointer, name, true, None, Vec::new()),
        _ => (BlobKind::Stub, name, true, None, Vec::new()),
    };
    Some((
        Blob {
            kind,
            code_begin,
            code,
            frame_complete,
            frame_bytes: frame_words as u32 * 8,
            body_end,
            name,
            java,
            method: own,
        },
        named,
    ))
}

/// The Java scopes of the compiled method whose blob is at `blob` of the heap's `bytes` (its
/// header at `header` in the process, the heap at `low`, its block `[start, end)`): its
/// `PcDesc`s, scope descriptions and metadata, where `l` says (in the blob: all of it inside
/// its block; apart: read from the process, at most [`MAX_SCOPE_BYTES`] each), decoded
/// (`scopes::decode`); none when a part is out of bounds or cannot be read.
fn java_scopes(
    mem: &mut dyn Memory,
    l: &ScopeLayout,
    (blob, header, low): (u64, u64, u64),
    (start, end): (u64, u64),
    word: &dyn Fn(u64) -> Option<u64>,
    int: &dyn Fn(u64) -> Option<i32>,
    bytes: &[u8],
) -> Vec<PcScopes> {
    let offset = |field: u64| int(blob.wrapping_add(field)).and_then(|o| u64::try_from(o).ok());
    let parts = match l.at {
        ScopesAt::InBlob {
            pcs_offset,
            pcs_end_offset,
            metadata_offset,
            scopes_begin,
        } => (|| {
            let (pcs, pcs_end, metadata) = (
                header.checked_add(offset(pcs_offset)?)?,
                header.checked_add(offset(pcs_end_offset)?)?,
                header.checked_add(offset(metadata_offset)?)?,
            );
            let scopes = word(blob.wrapping_add(scopes_begin))?;
            // In the blob, in this order: metadata, scope descriptions, `PcDesc`s.
            if !(start <= metadata && metadata <= scopes && scopes <= pcs && pcs <= pcs_end && pcs_end <= end) {
                return None;
            }
            let slice = |a: u64, b: u64| bytes.get((a - low) as usize..(b - low) as usize).map(<[u8]>::to_vec);
            Some((slice(pcs, pcs_end)?, slice(scopes, pcs)?, slice(metadata, scopes)?))
        })(),
        ScopesAt::Apart {
            immutable,
            immutable_size,
            pcs_offset,
            scopes_offset,
            mutable,
            mutable_size,
            relocation_size,
        } => (|| {
            let (pcs, scopes, size) = (offset(pcs_offset)?, offset(scopes_offset)?, offset(immutable_size)?);
            let (relocations, mutable_size) = (offset(relocation_size)?, offset(mutable_size)?);
            let bounded = pcs <= scopes && scopes <= size && size <= MAX_SCOPE_BYTES;
            if !bounded || relocations > mutable_size || mutable_size > MAX_SCOPE_BYTES {
                return None;
            }
            let mut data = vec![0u8; size as usize];
            mem.read(word(blob.wrapping_add(immutable))?, &mut data).then_some(())?;
            let mut metadata = vec![0u8; (mutable_size - relocations) as usize];
            let mutable_at = word(blob.wrapping_add(mutable))?.checked_add(relocations)?;
            mem.read(mutable_at, &mut metadata).then_some(())?;
            let scope_bytes = data.split_off(scopes as usize);
            let pc_bytes = data.split_off(pcs as usize);
            Some((pc_bytes, scope_bytes, metadata))
        })(),
    };
    let Some((pc_bytes, scope_bytes, meta_bytes)) = parts else {
        return Vec::new();
    };
    let metadata: Vec<u64> = meta_bytes
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
        .collect();
    scopes::decode(
        &pc_bytes,
        l.pc_desc_size as usize,
        (l.pc_desc_pc as usize, l.pc_desc_scope as usize),
        &scope_bytes,
        &metadata,
        l.coding,
    )
}
