//! JIT code described by a jitdump, made objects of the catalog: each anonymous executable
//! mapping holding code the process's jitdump describes (read by [`crate::jit::dumps`]) becomes
//! an object of its own, an ELF image of that code ([`crate::jit::elf`]) kept in an anonymous
//! memory file, its table built from the runtime's `.eh_frame` and its symbols from the
//! code-load records. The kernel then unwinds that code exactly, frame pointers or not. The
//! images are bounded: [`MAX_IMAGE_BYTES`] in a session, and the process's share of the
//! JIT-name budget.

use std::{path::PathBuf, sync::Arc};

use tracer_common::trace::ExecMapping;

use super::{Catalog, Object, ResolvedMapping, TableStore, memory_file};
use crate::{
    jit::{
        budget::Part,
        dump::JitDump,
        dumps::{DumpFile, MAX_IMAGE_BYTES},
        hotspot::HOTSPOT_OBJECT,
    },
    procmaps::Mapping,
};

impl<T: TableStore> Catalog<T> {
    /// The jitdump `pid` maps, read as far as it grew ([`crate::jit::dumps::JitDumps::read`]).
    pub(super) fn jit_dump(&mut self, pid: u32, mappings: &[Mapping]) -> Option<DumpFile> {
        let jit = &mut self.runtimes.jit;
        jit.dumps.read(pid, mappings, &mut jit.names.budget)
    }

    /// The object of the JIT code `dump` describes in the anonymous mapping `m`, and its bias
    /// (the mapping's start), if it describes any there; a new one is named `name`
    /// (`[jitdump]`, or `[hotspot]` for code read from a JVM's memory).
    pub(super) fn jit_code(&mut self, pid: u32, m: &Mapping, dump: &JitDump, name: &str) -> Option<(usize, u64)> {
        let loads = dump.within(m.start, m.end);
        log::debug!(
            "pid {pid}: {name} image of {:#x}-{:#x}: {} pieces of code",
            m.start,
            m.end,
            loads.len()
        );
        let (image, unusable) = crate::jit::elf::image(&loads, dump.machine, m.start)?;
        let jit = &mut self.runtimes.jit;
        jit.dumps.stats.unusable_unwind += unusable;
        let covered = || {
            loads
                .iter()
                .map(|l| (l.addr.wrapping_sub(m.start), l.end().wrapping_sub(m.start)))
                .collect()
        };
        if let Some(i) = self.objects.find_image(&image) {
            jit.dumps.cover(i, covered, false);
            return Some((i, m.start));
        }
        if jit.dumps.stats.image_bytes + image.len() as u64 > MAX_IMAGE_BYTES {
            jit.dumps.stats.over_limit += 1;
            return None;
        }
        let bytes = jit.dumps.image_bytes(pid) + image.len() as u64;
        if bytes > jit.names.budget.room(pid, Part::Images) {
            jit.names.budget.stats.jitdump_images_over_budget += 1;
            return None;
        }
        let file = Arc::new(memory_file("jitdump", &image).ok()?);
        jit.dumps.set_image_bytes(pid, bytes);
        jit.names.budget.set(pid, Part::Images, bytes);
        jit.dumps.stats.image_bytes += image.len() as u64;
        let mut object = Object::new(PathBuf::from(name), None, Some(file), None);
        object.table = self.loader.load_image(&image, &object.path);
        jit.dumps.stats.regions += 1;
        let index = self.objects.push_image(image, object);
        jit.dumps.cover(index, covered, true);
        Some((index, m.start))
    }

    /// The image `pid`'s mapping `m` had from the last read of its JVM's code heaps, and its
    /// bias: a JVM not read again now (`jit::hotspot::HotSpots::paced`) keeps it.
    pub(super) fn kept_hotspot(&self, pid: u32, m: &Mapping) -> Option<(usize, u64)> {
        self.processes
            .current
            .get(&pid)?
            .iter()
            .find(|r| r.start == m.start && r.end == m.end)
            .and_then(|r| Some((r.object?, r.bias)))
            .filter(|&(object, _)| self.hotspot_image(Some(object)))
    }

    /// Whether `object` is an image of a JVM's code heaps.
    pub fn hotspot_image(&self, object: Option<usize>) -> bool {
        object
            .and_then(|o| self.objects.get(o))
            .is_some_and(|o| o.name == HOTSPOT_OBJECT)
    }

    /// `exec` (the kernel's mappings of `pid`, one per `resolved`) with each mapping of a
    /// JVM's code heaps (its image made) marked for the kernel's walk to keep, with each frame
    /// it finds by frame pointer there, an interpreted frame's `Method*` and bytecode index
    /// (`jit::hotspot::interpreted`), and cut to the parts that held code at the last read
    /// (`jit::hotspot::pieces`): a sample in code compiled since meets no mapping, and is
    /// walked from a stack copy once the heaps are read again.
    pub(super) fn hotspot_mappings(
        &self,
        pid: u32,
        resolved: &[ResolvedMapping],
        exec: Vec<ExecMapping>,
    ) -> Vec<ExecMapping> {
        let hotspot = &self.runtimes.jit.hotspot;
        let frame_word = hotspot.frame_word(pid);
        let mut out = Vec::with_capacity(exec.len());
        for (r, e) in resolved.iter().zip(exec) {
            if !self.hotspot_image(r.object) {
                out.push(e);
                continue;
            }
            let e = ExecMapping { frame_word, ..e };
            match hotspot.code_pieces(pid, e.start, e.end) {
                Some(pieces) => out.extend(pieces.into_iter().map(|(start, end)| ExecMapping { start, end, ..e })),
                None => out.push(e),
            }
        }
        out
    }

    /// The mapping of `pid` holding `pc` at kernel time `time_ns` ([`Catalog::mapping_at`]),
    /// but for code a JVM compiled after the read that mapping's image comes from: then the
    /// mapping as read since, if its image holds it. With whether the code is known (false:
    /// a JVM's code no image holds yet; the kernel's mappings leave it out,
    /// [`Catalog::hotspot_mappings`], and a stack copy waits for the next read).
    pub fn code_mapping_at(&self, pid: u32, pc: u64, time_ns: u64) -> Option<(&ResolvedMapping, bool)> {
        let holds = |m: &ResolvedMapping| {
            m.object
                .filter(|&o| self.hotspot_image(Some(o)))
                .and_then(|o| self.runtimes.jit.dumps.covers(o, pc.wrapping_sub(m.bias)))
        };
        let mapping = self.mapping_at(pid, pc, time_ns)?;
        if holds(mapping) != Some(false) {
            return Some((mapping, true));
        }
        match self.processes.current_mapping_at(pid, pc) {
            Some(now) if holds(now) == Some(true) => Some((now, true)),
            _ => Some((mapping, false)),
        }
    }
}
