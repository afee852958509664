//! Field offsets of kernel structures from the kernel's BTF (`/sys/kernel/btf/vmlinux`), for
//! the few reads the eBPF program makes of structures it only has a pointer to (the offcpu
//! program reads `task_struct::pid`, `::__state` and `::flags`; aya-ebpf has no CO-RE
//! relocations). Only
//! what that needs: the type section is walked once to find a named struct, and its members
//! are searched, through anonymous struct and union members. Byte order: the host's.
//!
//! Layout (Documentation/bpf/btf.rst): a header (magic `0xeB9F`, `hdr_len`, then the offsets
//! and lengths of the type and string sections after the header); types numbered from 1, each
//! `name_off, info (vlen: bits 0-15, kind: bits 24-28, kind_flag: bit 31), size/type` followed
//! by data whose length depends on the kind; struct members are `name_off, type, offset` with
//! the offset in bits (bits 0-23 when `kind_flag` says bitfields).

/// Why an offset could not be found.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BtfError {
    #[error("the kernel's BTF is malformed ({0})")]
    Malformed(&'static str),
    #[error("the kernel's BTF has an unknown type kind {0}")]
    UnknownKind(u32),
    #[error("the kernel's BTF has no struct {0}")]
    NoStruct(String),
    #[error("struct {strukt} of the kernel's BTF has no member {member}")]
    NoMember { strukt: String, member: String },
}

const MAGIC: u16 = 0xeb9f;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;

/// One type: kind, vlen, kind_flag, name offset, and where its trailing data starts.
#[derive(Clone, Copy)]
struct Type {
    name: u32,
    kind: u32,
    vlen: usize,
    kind_flag: bool,
    data: usize,
}

/// A BTF blob's types and strings.
pub struct Btf<'a> {
    types: Vec<Type>,
    type_data: &'a [u8],
    strings: &'a [u8],
}

fn word(bytes: &[u8], at: usize) -> Result<u32, BtfError> {
    let end = at.checked_add(4).ok_or(BtfError::Malformed("offset overflow"))?;
    let raw = bytes.get(at..end).ok_or(BtfError::Malformed("truncated"))?;
    Ok(u32::from_ne_bytes(raw.try_into().expect("four bytes")))
}

impl<'a> Btf<'a> {
    /// Index the types of `blob`.
    pub fn parse(blob: &'a [u8]) -> Result<Btf<'a>, BtfError> {
        if blob.len() < 24 || u16::from_ne_bytes([blob[0], blob[1]]) != MAGIC {
            return Err(BtfError::Malformed("bad magic"));
        }
        let hdr_len = word(blob, 4)? as usize;
        let section = |off: usize, len: usize| -> Result<&'a [u8], BtfError> {
            let start = hdr_len.checked_add(word(blob, off)? as usize);
            let end = start.and_then(|s| s.checked_add(word(blob, len).ok()? as usize));
            start
                .zip(end)
                .and_then(|(s, e)| blob.get(s..e))
                .ok_or(BtfError::Malformed("section out of bounds"))
        };
        let type_data = section(8, 12)?;
        let strings = section(16, 20)?;
        let mut types = Vec::new();
        let mut at = 0;
        while at < type_data.len() {
            let info = word(type_data, at + 4)?;
            let kind = (info >> 24) & 0x1f;
            let vlen = (info & 0xffff) as usize;
            let data = at + 12;
            let extra = match kind {
                // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG.
                2 | 7..=12 | 16 | 18 => 0,
                // INT, VAR, DECL_TAG.
                1 | 14 | 17 => 4,
                // ARRAY.
                3 => 12,
                // STRUCT, UNION, DATASEC, ENUM64.
                4 | 5 | 15 | 19 => 12 * vlen,
                // ENUM, FUNC_PROTO.
                6 | 13 => 8 * vlen,
                other => return Err(BtfError::UnknownKind(other)),
            };
            types.push(Type {
                name: word(type_data, at)?,
                kind,
                vlen,
                kind_flag: info >> 31 == 1,
                data,
            });
            at = data + extra;
        }
        Ok(Btf {
            types,
            type_data,
            strings,
        })
    }

    fn name(&self, offset: u32) -> &'a [u8] {
        let rest = self.strings.get(offset as usize..).unwrap_or_default();
        &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())]
    }

    /// The byte offset of `member` in `struct strukt` (a complete definition, not a forward
    /// declaration), also when it sits in an anonymous struct or union member.
    pub fn member_offset(&self, strukt: &str, member: &str) -> Result<u32, BtfError> {
        let found = self
            .types
            .iter()
            .find(|t| t.kind == KIND_STRUCT && t.vlen > 0 && self.name(t.name) == strukt.as_bytes())
            .ok_or_else(|| BtfError::NoStruct(strukt.to_owned()))?;
        let bits = self
            .find_member(found, member.as_bytes(), 0, 0)?
            .ok_or_else(|| BtfError::NoMember {
                strukt: strukt.to_owned(),
                member: member.to_owned(),
            })?;
        Ok(bits / 8)
    }

    /// The bit offset of `member` in `ty` plus `base`, searching anonymous members (at most a
    /// few levels deep: the kernel nests them two or three).
    fn find_member(&self, ty: &Type, member: &[u8], base: u32, depth: u32) -> Result<Option<u32>, BtfError> {
        for i in 0..ty.vlen {
            let at = ty.data + 12 * i;
            let (name, member_type, offset) = (
                word(self.type_data, at)?,
                word(self.type_data, at + 4)?,
                word(self.type_data, at + 8)?,
            );
            let bits = base.wrapping_add(if ty.kind_flag { offset & 0xff_ffff } else { offset });
            if name != 0 {
                if self.name(name) == member {
                    return Ok(Some(bits));
                }
                continue;
            }
            let inner = member_type
                .checked_sub(1)
                .and_then(|i| self.types.get(i as usize))
                .filter(|t| matches!(t.kind, KIND_STRUCT | KIND_UNION));
            if let Some(inner) = inner
                && depth < 8
                && let Some(found) = self.find_member(inner, member, bits, depth + 1)?
            {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }
}

/// Offsets of the fields of the running kernel's `task_struct` the offcpu program reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskOffsets {
    pub pid: u32,
    /// `__state` (named so since 5.14; offcpu needs 5.15).
    pub state: u32,
    pub flags: u32,
}

/// The [`TaskOffsets`] of the running kernel.
pub fn task_offsets() -> anyhow::Result<TaskOffsets> {
    use anyhow::Context as _;
    const VMLINUX: &str = "/sys/kernel/btf/vmlinux";
    let blob = std::fs::read(VMLINUX).with_context(|| format!("reading {VMLINUX}"))?;
    let btf = Btf::parse(&blob)?;
    Ok(TaskOffsets {
        pid: btf.member_offset("task_struct", "pid")?,
        state: btf.member_offset("task_struct", "__state")?,
        flags: btf.member_offset("task_struct", "flags")?,
    })
}

/// The offsets of `task_struct::signal`, `signal_struct::live` and `task_struct::start_time`
/// in the running kernel (`tracer_common::notice::GLOBAL_TASK_SIGNAL_OFFSET`,
/// `GLOBAL_TASK_START_TIME_OFFSET`), by which the exit program tells the last thread of a
/// group, and the samples of its memory's teardown are told from a later task's.
pub fn exit_offsets() -> anyhow::Result<(u32, u32, u32)> {
    use anyhow::Context as _;
    const VMLINUX: &str = "/sys/kernel/btf/vmlinux";
    let blob = std::fs::read(VMLINUX).with_context(|| format!("reading {VMLINUX}"))?;
    let btf = Btf::parse(&blob)?;
    let signal = btf.member_offset("task_struct", "signal")?;
    let live = btf.member_offset("signal_struct", "live")?;
    let start_time = btf.member_offset("task_struct", "start_time")?;
    anyhow::ensure!(
        signal > 0 && start_time > 0,
        "task_struct.signal or start_time at offset 0"
    );
    Ok((signal, live, start_time))
}

/// The offset of the TLS base in the running kernel's `task_struct` (x86-64:
/// `thread.fsbase`), which `tracer_common::python::PY_THREAD_PTHREAD` interpreters are
/// matched by; an error elsewhere (aarch64's `pthread_self()` is not its TLS register).
pub fn fsbase_offset() -> anyhow::Result<u32> {
    use anyhow::Context as _;
    const VMLINUX: &str = "/sys/kernel/btf/vmlinux";
    anyhow::ensure!(cfg!(target_arch = "x86_64"), "the TLS base is read on x86-64 only");
    let blob = std::fs::read(VMLINUX).with_context(|| format!("reading {VMLINUX}"))?;
    fsbase_offset_in(&Btf::parse(&blob)?)
}

/// [`fsbase_offset`] of `btf`.
pub fn fsbase_offset_in(btf: &Btf<'_>) -> anyhow::Result<u32> {
    let thread = btf.member_offset("task_struct", "thread")?;
    let fsbase = btf.member_offset("thread_struct", "fsbase")?;
    let offset = thread.checked_add(fsbase).filter(|&o| o > 0);
    offset.ok_or_else(|| anyhow::anyhow!("task_struct.thread.fsbase at offset 0"))
}

/// The `tracer_common::vma::VmaOffsets` of the running kernel (`page_shift` left 0: the caller
/// sets it).
pub fn vma_offsets() -> anyhow::Result<tracer_common::vma::VmaOffsets> {
    use anyhow::Context as _;
    const VMLINUX: &str = "/sys/kernel/btf/vmlinux";
    let blob = std::fs::read(VMLINUX).with_context(|| format!("reading {VMLINUX}"))?;
    let btf = Btf::parse(&blob)?;
    vma_offsets_in(&btf)
}

/// [`vma_offsets`] of `btf`.
pub fn vma_offsets_in(btf: &Btf<'_>) -> anyhow::Result<tracer_common::vma::VmaOffsets> {
    let vma = |m: &str| btf.member_offset("vm_area_struct", m);
    let inode = |m: &str| btf.member_offset("inode", m);
    // 6.11+: `i_mtime_sec` and `i_mtime_nsec`; before: a `timespec64` (`__i_ctime` in 6.6 to
    // 6.10), whose `tv_sec` and `tv_nsec` are its first two words.
    let time = |name: &str| -> Result<(u32, u32), BtfError> {
        if let (Ok(sec), Ok(nsec)) = (inode(&format!("i_{name}_sec")), inode(&format!("i_{name}_nsec"))) {
            return Ok((sec, nsec));
        }
        let at = inode(&format!("__i_{name}")).or_else(|_| inode(&format!("i_{name}")))?;
        Ok((at, at + 8))
    };
    let (i_mtime_sec, i_mtime_nsec) = time("mtime")?;
    let (i_ctime_sec, i_ctime_nsec) = time("ctime")?;
    Ok(tracer_common::vma::VmaOffsets {
        vm_start: vma("vm_start")?,
        vm_end: vma("vm_end")?,
        vm_pgoff: vma("vm_pgoff")?,
        vm_flags: vma("vm_flags")?,
        vm_file: vma("vm_file")?,
        f_inode: btf.member_offset("file", "f_inode")?,
        i_ino: inode("i_ino")?,
        i_sb: inode("i_sb")?,
        i_size: inode("i_size")?,
        i_mtime_sec,
        i_mtime_nsec,
        i_ctime_sec,
        i_ctime_nsec,
        s_dev: btf.member_offset("super_block", "s_dev")?,
        page_shift: 0,
        task_mm: btf.member_offset("task_struct", "mm")?,
        mm_start_code: btf.member_offset("mm_struct", "start_code")?,
        _pad: 0,
    })
}

#[cfg(test)]
mod tests;
