//! Which Java methods a compiled method's code runs at a PC, and at which lines: HotSpot keeps,
//! for every PC of compiled code where it may need to rebuild the interpreter's frames (calls,
//! safepoints), a `PcDesc` (its offset in the code, and where its scope is described), and a
//! stream of scope descriptions: each scope its method (an index into the compiled method's
//! metadata), its bytecode index, and the scope it was inlined into (its caller), down to the
//! compiled method itself. A method's bytecode indexes map to source lines through its line
//! number table, a compressed stream after its bytecodes.
//!
//! Everything here is pure: bytes in (read from the code heap and the process's memory by
//! `heap`), frames out; every offset, index and length is checked against the bytes given.
//!
//! Both streams are of `UNSIGNED5` numbers (Pack200's coding: small values in one byte, any
//! 32-bit value in at most five). JDK 20 changed the coding to leave out the byte 0
//! ([`Coding`]): a JVM is read with its own.

/// How a JVM codes its numbers: `excluded` low byte values none of its codes use (0 to JDK 19,
/// 1 since: a zero byte then ends a stream).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Coding {
    pub excluded: u8,
}

impl Coding {
    /// The coding of JVM major version `major`.
    pub fn of_major(major: u32) -> Coding {
        Coding {
            excluded: u8::from(major >= 20),
        }
    }
}

/// The number of "high" byte values (each carries 6 bits and says more bytes follow).
const HIGH: u32 = 64;
const LOG_HIGH: u32 = 6;
/// The most bytes of one number.
const MAX_BYTES: usize = 5;
/// Scopes followed from a PC outwards at most (HotSpot inlines to a depth of 15 by default).
pub const MAX_DEPTH: usize = 64;
/// Line-table pairs read at most.
const MAX_PAIRS: usize = 1 << 16;
/// `InvocationEntryBci`: a scope's coded bytecode index is one more than its own.
const INVOCATION_ENTRY_BCI: i64 = -1;

/// A reader of `bytes` from `at`.
struct Stream<'a> {
    bytes: &'a [u8],
    at: usize,
    coding: Coding,
}

impl Stream<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    /// One `UNSIGNED5` number; `None` past the end or at an excluded byte.
    fn unsigned(&mut self) -> Option<u32> {
        let x = u32::from(self.coding.excluded);
        let low = 256 - x - HIGH;
        let mut sum = 0u32;
        for i in 0..MAX_BYTES {
            let b = u32::from(self.byte()?);
            let digit = b.checked_sub(x)?;
            sum = sum.wrapping_add(digit << (LOG_HIGH * i as u32));
            if digit < low || i == MAX_BYTES - 1 {
                return Some(sum);
            }
        }
        None
    }

    /// One signed number (its sign in the lowest bit).
    fn signed(&mut self) -> Option<i32> {
        let v = self.unsigned()?;
        Some(((v >> 1) as i32) ^ -((v & 1) as i32))
    }
}

/// The scopes at one PC of a compiled method: its offset in the code, and each scope's method
/// (`Method*`) and bytecode index, innermost (the inlined method running) first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PcScopes {
    pub pc_offset: u32,
    pub scopes: Vec<(u64, i32)>,
}

/// The scopes of every PC a compiled method describes: `pcs` its `PcDesc`s (`pc_size` bytes
/// each, the PC's offset at `pc_offset` and its scope's at `scope_offset` within one),
/// `scopes` its scope descriptions, `metadata` its metadata (index `i` is entry `i - 1`).
/// A `PcDesc` whose scope cannot be read is left out; the result is sorted by PC offset.
pub fn decode(
    pcs: &[u8],
    pc_size: usize,
    (pc_offset, scope_offset): (usize, usize),
    scopes: &[u8],
    metadata: &[u64],
    coding: Coding,
) -> Vec<PcScopes> {
    let int = |desc: &[u8], at: usize| -> Option<i32> {
        Some(i32::from_le_bytes(desc.get(at..at.checked_add(4)?)?.try_into().ok()?))
    };
    let mut out: Vec<PcScopes> = Vec::new();
    if pc_size == 0 {
        return out;
    }
    for desc in pcs.chunks_exact(pc_size) {
        let (Some(pc), Some(scope)) = (int(desc, pc_offset), int(desc, scope_offset)) else {
            continue;
        };
        let (Ok(pc), Ok(scope)) = (u32::try_from(pc), usize::try_from(scope)) else {
            continue;
        };
        if let Some(chain) = chain(scopes, scope, metadata, coding) {
            out.push(PcScopes {
                pc_offset: pc,
                scopes: chain,
            });
        }
    }
    out.sort_by_key(|p| p.pc_offset);
    out
}

/// The scope at `offset` of `scopes` and those it was inlined into, innermost first: `None`
/// when one cannot be read, or for offset 0 (HotSpot's "no scope").
fn chain(scopes: &[u8], mut offset: usize, metadata: &[u64], coding: Coding) -> Option<Vec<(u64, i32)>> {
    let mut out = Vec::new();
    while offset != 0 {
        if out.len() >= MAX_DEPTH {
            return None;
        }
        let mut stream = Stream {
            bytes: scopes,
            at: offset,
            coding,
        };
        let sender = stream.unsigned()? as usize;
        let index = stream.unsigned()? as usize;
        let method = *metadata.get(index.checked_sub(1)?)?;
        let bci = i64::from(stream.unsigned()?) + INVOCATION_ENTRY_BCI;
        if method == 0 {
            return None;
        }
        out.push((method, i32::try_from(bci).ok()?));
        // A caller is described before its callees.
        if sender >= offset {
            return None;
        }
        offset = sender;
    }
    (!out.is_empty()).then_some(out)
}

/// The line of bytecode index `bci` in a method's compressed line number `table` (HotSpot's
/// `Method::line_number_from_bci`: the line of the entry at `bci`, else of the last entry
/// before it); `None` without one.
pub fn line_at(table: &[u8], bci: i32, coding: Coding) -> Option<u32> {
    let bci = bci.max(0);
    let mut stream = Stream {
        bytes: table,
        at: 0,
        coding,
    };
    let (mut at, mut line) = (0i32, 0i32);
    let mut best: Option<(i32, i32)> = None;
    for _ in 0..MAX_PAIRS {
        let next = stream.byte()?;
        if next == 0 {
            break;
        }
        if next == 0xff {
            at = at.wrapping_add(stream.signed()?);
            line = line.wrapping_add(stream.signed()?);
        } else {
            at = at.wrapping_add(i32::from(next >> 3));
            line = line.wrapping_add(i32::from(next & 7));
        }
        if at == bci {
            return u32::try_from(line).ok();
        }
        if at < bci && best.is_none_or(|(b, _)| at >= b) {
            best = Some((at, line));
        }
    }
    best.and_then(|(_, line)| u32::try_from(line).ok())
}

/// The Java frames of one compiled method at each PC it describes, as the walk gives them:
/// each frame its method (an index its runtime names) and line (0: none), innermost first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompiledFrames {
    /// Per PC (sorted): its offset, and its frames' first index in `frames` and count.
    pcs: Vec<(u32, u32, u32)>,
    frames: Vec<(u32, u32)>,
}

impl CompiledFrames {
    /// The frames of `pcs` (`decode`), each method given its index by `method` (`None`: the
    /// PC is left out) and the line of its bytecode index in `lines(method)` (a line table).
    pub fn new<'a>(
        pcs: &[PcScopes],
        mut method: impl FnMut(u64) -> Option<u32>,
        lines: impl Fn(u64) -> Option<&'a [u8]>,
        coding: Coding,
    ) -> CompiledFrames {
        let mut out = CompiledFrames::default();
        'pc: for pc in pcs {
            let first = out.frames.len();
            for &(m, bci) in &pc.scopes {
                let Some(index) = method(m) else {
                    out.frames.truncate(first);
                    continue 'pc;
                };
                let line = lines(m).and_then(|t| line_at(t, bci, coding)).unwrap_or(0);
                out.frames.push((index, line));
            }
            out.pcs
                .push((pc.pc_offset, first as u32, (out.frames.len() - first) as u32));
        }
        out
    }

    /// The frames at `offset` from the code's start: those of the first PC described at or
    /// after it (a return address is described; a sampled PC belongs with the next PC
    /// described).
    pub fn at(&self, offset: u32) -> Option<&[(u32, u32)]> {
        let i = self.pcs.partition_point(|&(pc, _, _)| pc < offset);
        let &(_, first, count) = self.pcs.get(i)?;
        self.frames.get(first as usize..(first + count) as usize)
    }

    pub fn is_empty(&self) -> bool {
        self.pcs.is_empty()
    }
}

#[cfg(test)]
mod tests;
