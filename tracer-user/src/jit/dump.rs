//! jitdump files (`jit-PID.dump`, the format of the Linux perf tool's `jitdump.h`), as JIT
//! runtimes write them for profilers: a header, then records. Read here: code-load records
//! (name, address, size and the machine code itself), code-move records (the same code at
//! another address) and unwinding-info records (the `.eh_frame` of the code loaded next, laid
//! out as perf's `genelf` places it: at the code's start plus its size rounded up to 8).
//! Debug-info and close records are skipped. Pure: bytes in; the text is hostile, so every
//! size is checked against what is left, a record that does not fit ends the reading (counted),
//! and at most [`MAX_LOADS`] code loads are kept, and no more bytes than the room given
//! ([`JitDump::set_room`], the process's share of the JIT-name budget).
//!
//! A runtime appends records while it runs: [`header`] reads the header once, then
//! [`JitDump::add_records`] takes the records that follow as they come, whole records only,
//! and says how many bytes it used, so that a reader keeps the offset of the last complete
//! record and reads only what was appended after it.

use std::collections::BTreeMap;

/// `JiTD` in the writer's byte order; the other order is refused.
const MAGIC: u32 = 0x4A69_5444;
const CODE_LOAD: u32 = 0;
const CODE_MOVE: u32 = 1;
const UNWINDING_INFO: u32 = 4;
/// Record header: id, total size, timestamp.
const RECORD_HEADER: usize = 16;

/// The most code loads kept from one file.
pub const MAX_LOADS: usize = 1_000_000;

/// Why a jitdump cannot be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DumpError {
    #[error("jitdump: shorter than its header")]
    Short,
    #[error("jitdump: bad magic {0:#x} (or written in the other byte order)")]
    Magic(u32),
    #[error("jitdump: header size {0} is out of bounds")]
    HeaderSize(u32),
}

/// The `.eh_frame` a runtime gave for one piece of code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unwind {
    /// `.eh_frame` (without the `.eh_frame_hdr` that follows it in the record).
    pub eh_frame: Vec<u8>,
}

/// One function the runtime compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeLoad {
    pub addr: u64,
    pub code: Vec<u8>,
    pub name: String,
    pub unwind: Option<Unwind>,
}

impl CodeLoad {
    pub fn end(&self) -> u64 {
        self.addr.saturating_add(self.code.len() as u64)
    }

    /// Where the `.eh_frame` of this code is taken to be (its pointers are relative to it).
    pub fn eh_frame_addr(&self) -> u64 {
        self.addr.saturating_add((self.code.len() as u64).next_multiple_of(8))
    }
}

/// The code of a jitdump, later loads first replaced where they overlap earlier ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JitDump {
    /// The ELF machine of the code (`EM_X86_64`...).
    pub machine: u32,
    /// By address; none overlap.
    pub loads: BTreeMap<u64, CodeLoad>,
    /// Records that did not fit (the reading stopped there) or made no sense.
    pub malformed: u64,
    /// Code loads over [`MAX_LOADS`], and over the room given.
    pub over_limit: u64,
    pub over_budget: u64,
    /// The unwinding information read for the next code load.
    pending_unwind: Option<Unwind>,
    /// A record that could not be stepped over was met: nothing after it is read.
    stuck: bool,
    /// What the loads kept cost (see [`LOAD_COST`]), and the most they may (`None`: no bound).
    bytes: u64,
    room: Option<u64>,
}

/// What one kept load costs besides its code, name and unwind information.
pub const LOAD_COST: u64 = 96;

/// Little reader over the bytes of one record.
struct Fields<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Fields<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.at.checked_add(n)?;
        let out = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(out)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_ne_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_ne_bytes(self.take(8)?.try_into().ok()?))
    }
}

/// Read a jitdump (see the module docs).
pub fn parse(bytes: &[u8]) -> Result<JitDump, DumpError> {
    let (machine, size) = header(bytes)?;
    let mut dump = JitDump::new(machine);
    dump.add_records(&bytes[size..]);
    Ok(dump)
}

/// The machine and the size of the header `bytes` start with.
pub fn header(bytes: &[u8]) -> Result<(u32, usize), DumpError> {
    let mut header = Fields { bytes, at: 0 };
    let (magic, _version, size, machine) =
        (|| Some((header.u32()?, header.u32()?, header.u32()?, header.u32()?)))().ok_or(DumpError::Short)?;
    if magic != MAGIC {
        return Err(DumpError::Magic(magic));
    }
    let size32 = size;
    let size = usize::try_from(size).unwrap_or(usize::MAX);
    if size < 16 || size > bytes.len() {
        return Err(DumpError::HeaderSize(size32));
    }
    Ok((machine, size))
}

impl JitDump {
    /// No code yet, of `machine`.
    pub fn new(machine: u32) -> JitDump {
        JitDump {
            machine,
            ..JitDump::default()
        }
    }

    /// Take the whole records `bytes` start with (those that follow the ones taken before);
    /// returns how many bytes they span: the rest (a record still being written) is to be
    /// passed again with what follows it.
    pub fn add_records(&mut self, bytes: &[u8]) -> usize {
        let mut at = 0;
        while !self.stuck && at + RECORD_HEADER <= bytes.len() {
            let mut head = Fields { bytes, at };
            let (Some(id), Some(total)) = (head.u32(), head.u32()) else {
                break;
            };
            let total = total as usize;
            if total < RECORD_HEADER {
                // Nothing after it can be found.
                self.malformed += 1;
                self.stuck = true;
                break;
            }
            // Cut short: still being written (or a lie); what follows is not there yet.
            let Some(record) = at.checked_add(total).and_then(|end| bytes.get(at + RECORD_HEADER..end)) else {
                break;
            };
            at += total;
            let mut body = Fields { bytes: record, at: 0 };
            let ok = match id {
                CODE_LOAD => code_load(&mut body, self.pending_unwind.take()).map(|load| self.add(load)),
                CODE_MOVE => code_move(&mut body).map(|(from, to)| self.moved(from, to)),
                UNWINDING_INFO => unwinding(&mut body).map(|unwind| self.pending_unwind = Some(unwind)),
                _ => Some(()),
            };
            self.malformed += u64::from(ok.is_none());
        }
        at
    }

    /// The loads kept may cost at most `room` bytes from now on (those kept stay).
    pub fn set_room(&mut self, room: u64) {
        self.room = Some(room);
    }

    /// What the loads kept cost, in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// What keeping `load` costs.
fn cost(load: &CodeLoad) -> u64 {
    let unwind = load.unwind.as_ref().map_or(0, |u| u.eh_frame.len());
    (load.code.len() + load.name.len() + unwind) as u64 + LOAD_COST
}

/// pid, tid, vma, code address, size, index, name (NUL-ended), code.
fn code_load(body: &mut Fields<'_>, unwind: Option<Unwind>) -> Option<CodeLoad> {
    let (_pid, _tid, _vma) = (body.u32()?, body.u32()?, body.u64()?);
    let (addr, size, _index) = (body.u64()?, body.u64()?, body.u64()?);
    let rest = body.bytes.get(body.at..)?;
    let nul = rest.iter().position(|&b| b == 0)?;
    let name = tracer_unwind::names::capped_lossy(&rest[..nul]);
    body.at += nul + 1;
    let code = body.take(usize::try_from(size).ok()?)?.to_vec();
    (size > 0 && addr.checked_add(size).is_some()).then_some(CodeLoad {
        addr,
        code,
        name,
        unwind,
    })
}

/// pid, tid, vma, old address, new address, size, index.
fn code_move(body: &mut Fields<'_>) -> Option<(u64, u64)> {
    let (_pid, _tid, _vma) = (body.u32()?, body.u32()?, body.u64()?);
    let (from, to) = (body.u64()?, body.u64()?);
    Some((from, to))
}

/// unwinding size, `.eh_frame_hdr` size, mapped size, then `.eh_frame` and `.eh_frame_hdr`.
fn unwinding(body: &mut Fields<'_>) -> Option<Unwind> {
    let (size, hdr_size, _mapped) = (body.u64()?, body.u64()?, body.u64()?);
    let data = body.take(usize::try_from(size).ok()?)?;
    let eh_frame = data.get(..data.len().checked_sub(usize::try_from(hdr_size).ok()?)?)?;
    Some(Unwind {
        eh_frame: eh_frame.to_vec(),
    })
}

impl JitDump {
    /// `load` is the code at its addresses now: the loads it overlaps are dropped.
    fn add(&mut self, load: CodeLoad) {
        let (start, end) = (load.addr, load.end());
        let overlapping: Vec<u64> = self
            .loads
            .range(..end)
            .rev()
            .take_while(|(_, l)| l.end() > start)
            .map(|(&a, _)| a)
            .collect();
        for a in overlapping {
            if let Some(old) = self.loads.remove(&a) {
                self.bytes -= cost(&old);
            }
        }
        if self.loads.len() >= MAX_LOADS {
            self.over_limit += 1;
            return;
        }
        if self.room.is_some_and(|room| self.bytes + cost(&load) > room) {
            self.over_budget += 1;
            return;
        }
        self.bytes += cost(&load);
        self.loads.insert(start, load);
    }

    /// The code at `from` is at `to` now (with its unwind information).
    fn moved(&mut self, from: u64, to: u64) {
        let Some(mut load) = self.loads.remove(&from) else {
            return;
        };
        self.bytes -= cost(&load);
        if to.checked_add(load.code.len() as u64).is_none() {
            self.malformed += 1;
            return;
        }
        load.addr = to;
        self.add(load);
    }

    /// The loads within `[start, end)`, by address.
    pub fn within(&self, start: u64, end: u64) -> Vec<&CodeLoad> {
        self.loads
            .range(start..end)
            .map(|(_, l)| l)
            .filter(|l| l.end() <= end)
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests;
