//! Finding a PC's object in the kernel (Linux 5.17+, `bpf_find_vma`): when the walker meets a
//! PC that no mapping of [`crate::trace::MAP_PROCS`] holds (a process userspace has not read
//! yet, or code it mapped since), it asks the kernel for the VMA holding the PC and, when the
//! VMA maps a file whose table is loaded already (libc, ld.so, a program started before), walks
//! on with that table instead of shipping a stack copy. The file is recognised by what
//! userspace keys objects by (device, inode, size, modification and change times), read from
//! the VMA's inode; a file changed in place since its table was built is another file.
//!
//! - [`MAP_FILES`]: hash [`FileKey`] `->` [`FileTable`]: one entry per loaded table of a file,
//!   written by userspace when a table is installed and removed when it is unloaded.
//! - [`GLOBAL_VMA_OFFSETS`]: [`VmaOffsets`], the kernel structure offsets the reads need, from
//!   the kernel's BTF.
//! - [`PROG_WALK_VMA`]: the cpu-clock walker that does this; userspace loads it instead of
//!   `walk_user` where the kernel has the helper (the other walker copies never ask).
//!
//! A walked sample that used such mappings carries them after its user frames
//! ([`crate::trace::SampleHeader::vmas`] of them, [`crate::mapping::ExecMapping`] each), so that
//! userspace resolves its frames without having read the process (it may be gone by then).

/// The cpu-clock walker that asks the kernel for the VMA of a PC no known mapping holds.
pub const PROG_WALK_VMA: &str = "walk_user_vma";
/// Tables of files, by file identity (see the module docs).
pub const MAP_FILES: &str = "FILES";
/// Read-only global: the [`VmaOffsets`] of the running kernel.
pub const GLOBAL_VMA_OFFSETS: &str = "VMA_OFFSETS";
/// Mappings found through VMAs that one sample can carry, and that [`MAP_PROC_VMAS`] keeps per
/// process; a walk needing more ships a copy.
pub const MAX_VMAS: usize = 4;
/// Hash `tgid -> ProcVmas`: the mappings found through VMAs for each process not read by
/// userspace yet. `bpf_find_vma` can be called once per sample only (in the cpu-clock
/// interrupt the VMA lock's release waits for an irq_work, and a second call in the same
/// interrupt finds it busy), so each sample looks up at most one new VMA and the process's
/// later samples reuse it; the exec and mmap programs also fill it, outside any interrupt,
/// with the code a process starts with and maps. Entries go at the process's exec and exit, and
/// at an unmap that overlaps one of them.
pub const MAP_PROC_VMAS: &str = "PROC_VMAS";
/// Entries of [`MAP_PROC_VMAS`].
pub const PROC_VMAS_ENTRIES: u32 = 4096;
/// Executable segments of a file that [`FileTable`] describes.
pub const MAX_FILE_SEGMENTS: usize = 4;
/// Entries of [`MAP_FILES`]: tables of files loaded at once (more are simply not found there).
pub const FILES_ENTRIES: u32 = 16384;
/// `VM_EXEC` of `vm_area_struct::vm_flags`.
pub const VM_EXEC: u64 = 0x4;

/// A file as the kernel names it: `super_block::s_dev` (the kernel's encoding, `major << 20 |
/// minor`) and `inode::i_ino`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileKey {
    pub dev: u32,
    pub _pad: u32,
    pub inode: u64,
}

impl FileKey {
    /// The kernel's `dev_t` of device `major:minor` (`MKDEV`).
    pub const fn dev(major: u32, minor: u32) -> u32 {
        (major << 20) | (minor & 0xf_ffff)
    }
}

/// One executable `PT_LOAD` segment of a file: a VMA mapping file offset `off` (its `vm_pgoff`
/// in bytes) with `start <= off < end` maps code whose object-relative addresses are
/// `file offset + delta` (`p_vaddr - p_offset`, wrapping), so its bias is
/// `vm_start - off - delta`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileSegment {
    /// `p_offset` rounded down to the page.
    pub start: u64,
    /// `p_offset + p_filesz`.
    pub end: u64,
    pub delta: u64,
}

/// The value of [`MAP_FILES`]: the table loaded for a file, and the file's identity as it was
/// when the table was built.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileTable {
    /// The table (`PageKey::object`).
    pub object: u32,
    /// Valid entries of `segments`.
    pub num_segments: u32,
    pub size: u64,
    pub mtime_sec: i64,
    pub ctime_sec: i64,
    pub mtime_nsec: u32,
    pub ctime_nsec: u32,
    pub segments: [FileSegment; MAX_FILE_SEGMENTS],
}

/// The value of [`MAP_PROC_VMAS`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProcVmas {
    pub num: u32,
    pub _pad: u32,
    pub mappings: [crate::mapping::ExecMapping; MAX_VMAS],
}

/// Byte offsets of the kernel structure members the VMA walker reads (from the kernel's BTF).
/// Times are either `*_sec`/`*_nsec` members (6.11+) or a `timespec64` (`tv_sec` at 0,
/// `tv_nsec` at 8): userspace gives the offsets of the two words either way.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmaOffsets {
    pub vm_start: u32,
    pub vm_end: u32,
    pub vm_pgoff: u32,
    pub vm_flags: u32,
    pub vm_file: u32,
    pub f_inode: u32,
    pub i_ino: u32,
    pub i_sb: u32,
    pub i_size: u32,
    pub i_mtime_sec: u32,
    pub i_mtime_nsec: u32,
    pub i_ctime_sec: u32,
    pub i_ctime_nsec: u32,
    pub s_dev: u32,
    /// `log2` of the page size (`vm_pgoff` is in pages).
    pub page_shift: u32,
    /// `task_struct::mm` and `mm_struct::start_code` (the executable's code, looked up at exec).
    pub task_mm: u32,
    pub mm_start_code: u32,
    pub _pad: u32,
}

/// Nanoseconds of a time as the kernel keeps them: values below a second (6.13+ keeps a flag in
/// bit 31 of the change time's nanoseconds).
pub const NSEC_MASK: u32 = (1 << 30) - 1;

const _: () = assert!(core::mem::size_of::<FileKey>() == 16);
const _: () = assert!(core::mem::size_of::<FileSegment>() == 24);
const _: () = assert!(core::mem::size_of::<FileTable>() == 40 + 24 * MAX_FILE_SEGMENTS);
const _: () = assert!(core::mem::size_of::<VmaOffsets>() == 72);
const _: () = assert!(core::mem::size_of::<ProcVmas>() == 8 + 32 * MAX_VMAS);

#[cfg(feature = "user")]
mod pod {
    // SAFETY: `#[repr(C)]` records of integers and arrays of them, explicit padding fields,
    // sizes pinned above: every bit pattern is valid and there are no implicit padding bytes.
    unsafe impl aya::Pod for super::FileKey {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::FileTable {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::VmaOffsets {}
}
