//! The `FILES` map (`tracer_common::vma`): which loaded table belongs to which file, so that
//! the kernel can walk code of a process userspace has not read yet with a table already
//! loaded for the same file. An entry is bound when a file's table is installed and goes with
//! the table ([`FileTables::unbind`] from `TableSet::remove`); what changed is written with the
//! other table maps. Also answers which object a table id belongs to, for the frames the
//! kernel resolved that way.
//!
//! [`exec_segments`] reads the executable `PT_LOAD` segments of a file (its ELF and program
//! headers only, through the descriptor held on it), from which the kernel computes a VMA's
//! bias.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    fs::File,
};

use object::{
    Endianness, FileKind, ReadCache, elf,
    read::elf::{FileHeader, ProgramHeader},
};
use tracer_common::vma::{FileKey, FileSegment, FileTable, MAX_FILE_SEGMENTS, NSEC_MASK};

use super::TableSet;
use crate::{procmaps::ObjectKey, sys::objfile::Pread};

/// The `FILES` entries of the loaded tables, and what the kernel map lacks.
#[derive(Clone, Debug, Default)]
pub struct FileTables {
    /// Per table id: its file and the object it was built for (the caller's index).
    by_table: HashMap<u32, (FileKey, usize)>,
    /// Per file: the table its kernel entry names (the one bound last).
    current: HashMap<FileKey, u32>,
    set: BTreeMap<FileKey, FileTable>,
    removed: BTreeSet<FileKey>,
}

/// `FILES` updates: entries to write, then keys to delete.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileChanges {
    pub set: Vec<(FileKey, FileTable)>,
    pub removed: Vec<FileKey>,
}

impl FileTables {
    /// Table `table` (of object `owner`) is the one of the file `key`, whose executable
    /// segments are `segments` (at most [`MAX_FILE_SEGMENTS`] are kept; a VMA of another one
    /// finds no table). A file without executable segments gets no entry.
    pub fn bind(&mut self, table: u32, owner: usize, key: &ObjectKey, segments: &[FileSegment]) {
        if segments.is_empty() {
            return;
        }
        let file = file_key(key);
        let mut value = FileTable {
            object: table,
            num_segments: segments.len().min(MAX_FILE_SEGMENTS) as u32,
            size: key.size,
            mtime_sec: key.mtime_ns.div_euclid(1_000_000_000) as i64,
            ctime_sec: key.ctime_ns.div_euclid(1_000_000_000) as i64,
            mtime_nsec: key.mtime_ns.rem_euclid(1_000_000_000) as u32 & NSEC_MASK,
            ctime_nsec: key.ctime_ns.rem_euclid(1_000_000_000) as u32 & NSEC_MASK,
            segments: [FileSegment::default(); MAX_FILE_SEGMENTS],
        };
        for (slot, segment) in value.segments.iter_mut().zip(segments) {
            *slot = *segment;
        }
        self.by_table.insert(table, (file, owner));
        self.current.insert(file, table);
        self.removed.remove(&file);
        self.set.insert(file, value);
    }

    /// Table `table` is unloaded: its file's entry goes, unless another table of that file
    /// (the file changed in place and was loaded again) has it since.
    pub fn unbind(&mut self, table: u32) {
        let Some((file, _)) = self.by_table.remove(&table) else {
            return;
        };
        if self.current.get(&file) == Some(&table) {
            self.current.remove(&file);
            if self.set.remove(&file).is_none() {
                self.removed.insert(file);
            }
        }
    }

    /// The object the loaded table `table` was bound for.
    pub fn owner(&self, table: u32) -> Option<usize> {
        self.by_table.get(&table).map(|&(_, owner)| owner)
    }

    /// What changed since the previous call.
    pub fn take_changes(&mut self) -> FileChanges {
        FileChanges {
            set: std::mem::take(&mut self.set).into_iter().collect(),
            removed: std::mem::take(&mut self.removed).into_iter().collect(),
        }
    }
}

/// Bind loaded table `table` of object `owner` to the file `key` (open as `file`) in `tables`:
/// see [`TableSet::bind_file`].
pub fn bind(tables: &mut TableSet, table: u32, owner: usize, key: &ObjectKey, file: &File) {
    tables.bind_file(table, owner, key, &exec_segments(file, crate::sys::page_bytes()));
}

/// The kernel's name of the file `key` names.
pub fn file_key(key: &ObjectKey) -> FileKey {
    FileKey {
        dev: FileKey::dev(key.device.major, key.device.minor),
        _pad: 0,
        inode: key.inode,
    }
}

/// The executable `PT_LOAD` segments of the ELF file `file` (empty when it is none, or its
/// headers cannot be read), for pages of `page_size` bytes.
pub fn exec_segments(file: &File, page_size: u64) -> Vec<FileSegment> {
    let Ok(meta) = file.metadata() else {
        return Vec::new();
    };
    let cache = ReadCache::new(Pread::new(file, meta.len()));
    match FileKind::parse(&cache) {
        Ok(FileKind::Elf32) => segments_in::<elf::FileHeader32<Endianness>>(&cache, page_size),
        Ok(FileKind::Elf64) => segments_in::<elf::FileHeader64<Endianness>>(&cache, page_size),
        _ => Vec::new(),
    }
}

fn segments_in<Elf: FileHeader<Endian = Endianness>>(data: &ReadCache<Pread<'_>>, page_size: u64) -> Vec<FileSegment> {
    let Ok(header) = Elf::parse(data) else {
        return Vec::new();
    };
    let Ok(endian) = header.endian() else {
        return Vec::new();
    };
    let Ok(segments) = header.program_headers(endian, data) else {
        return Vec::new();
    };
    segments
        .iter()
        .filter(|ph| ph.p_type(endian) == elf::PT_LOAD && ph.p_flags(endian).0 & elf::PF_X.0 != 0)
        .map(|ph| {
            let (offset, size, vaddr): (u64, u64, u64) = (
                ph.p_offset(endian).into(),
                ph.p_filesz(endian).into(),
                ph.p_vaddr(endian).into(),
            );
            FileSegment {
                start: offset & !(page_size.max(1) - 1),
                end: offset.saturating_add(size),
                delta: vaddr.wrapping_sub(offset),
            }
        })
        .filter(|s| s.start < s.end)
        .collect()
}

#[cfg(test)]
mod tests;
