//! [`CfiTable`]: finds the FDE that covers an address and evaluates its program with gimli.
//!
//! 1. `.eh_frame` with an `.eh_frame_hdr` search table: binary search in the table.
//! 2. `.eh_frame` without one: scan the section once when the table is built, keep
//!    `(start, end, offset)` sorted, binary search it.
//! 3. No FDE there (or no `.eh_frame`): the same with `.debug_frame`, so code built with
//!    `-fno-asynchronous-unwind-tables -g` (CFI only in `.debug_frame`) is covered too.
//! 4. Evaluate the FDE's CIE and FDE programs up to the address in one reused `UnwindContext`.
//!
//! It must not read anything but the ELF file's bytes, and it must not panic on malformed input.

use std::{borrow::Cow, cell::RefCell, fmt};

use gimli::{
    BaseAddresses, DebugFrame, DebugFrameOffset, EhFrame, EhFrameHdr, EhFrameOffset, EhHdrTable, FrameDescriptionEntry,
    ReaderOffsetId, Register, RunTimeEndian, UnwindContext, UnwindSection, Vendor,
};
use object::{Object as _, ObjectSection as _};

use super::{
    Arch, CfiCfa, CfiError, CfiReg, CfiRule, CfiSource, Slice,
    scan::{FdeRange, entry_error, scan},
};

/// A section's bytes and its address.
pub(super) type Located<'a> = (Cow<'a, [u8]>, u64);

/// The sections a table is built from, as found in the ELF file (empty sections count as absent).
pub(super) struct Sections<'a> {
    pub text: Option<u64>,
    pub eh_frame: Option<Located<'a>>,
    pub eh_frame_hdr: Option<Located<'a>>,
    pub debug_frame: Option<Located<'a>>,
}

/// One CFI section and how an address finds its FDE there.
pub(super) struct Part<'a> {
    pub(super) source: CfiSource,
    /// `.eh_frame` or `.debug_frame`, per `source`.
    data: Cow<'a, [u8]>,
    /// `.eh_frame_hdr` and the number of entries in its search table, when `source` is `EhFrameHdr`.
    hdr: Cow<'a, [u8]>,
    hdr_count: usize,
    /// FDEs sorted by start, when `source` is not `EhFrameHdr`.
    index: Vec<FdeRange>,
    /// Entries the indexing scan could not read (and skipped).
    unreadable: Vec<CfiError>,
}

impl<'a> Part<'a> {
    /// A section to be scanned (what `from_sections` turns into a search-table part if it can).
    fn new(source: CfiSource, data: Cow<'a, [u8]>) -> Self {
        Part {
            source,
            data,
            hdr: Cow::Borrowed(&[]),
            hdr_count: 0,
            index: Vec::new(),
            unreadable: Vec::new(),
        }
    }
}

/// The call-frame information of one ELF file, ready for lookups by address.
pub struct CfiTable<'a> {
    arch: Arch,
    endian: RunTimeEndian,
    address_size: u8,
    pub(super) bases: BaseAddresses,
    /// Searched in order: `.eh_frame` (if any), then `.debug_frame` (if any).
    pub(super) parts: Vec<Part<'a>>,
    /// Reused by every lookup: allocating one is the expensive part of an evaluation.
    pub(super) ctx: RefCell<UnwindContext<usize>>,
}

impl fmt::Debug for CfiTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CfiTable")
            .field("arch", &self.arch)
            .field("sources", &self.sources())
            .finish_non_exhaustive()
    }
}

impl<'a> CfiTable<'a> {
    /// Reads the CFI of an ELF file: `None` when it has neither `.eh_frame` nor `.debug_frame`.
    pub fn from_elf(file: &'a [u8]) -> Result<Option<CfiTable<'a>>, CfiError> {
        let obj = object::File::parse(file).map_err(CfiError::Elf)?;
        let sections = Sections {
            text: obj.section_by_name(".text").map(|s| s.address()),
            eh_frame: section(&obj, ".eh_frame")?,
            eh_frame_hdr: section(&obj, ".eh_frame_hdr")?,
            debug_frame: section(&obj, ".debug_frame")?,
        };
        if sections.eh_frame.is_none() && sections.debug_frame.is_none() {
            return Ok(None);
        }
        let arch = match obj.architecture() {
            object::Architecture::X86_64 | object::Architecture::X86_64_X32 => Arch::X86_64,
            object::Architecture::Aarch64 | object::Architecture::Aarch64_Ilp32 => Arch::Aarch64,
            object::Architecture::S390x => Arch::S390x,
            other => return Err(CfiError::UnsupportedMachine(other)),
        };
        let endian = if obj.is_little_endian() {
            RunTimeEndian::Little
        } else {
            RunTimeEndian::Big
        };
        let address_size = if obj.is_64() { 8 } else { 4 };
        Self::from_sections(arch, endian, address_size, sections)
    }

    /// Builds the table from sections already located (the ELF-free core of [`Self::from_elf`]).
    pub(super) fn from_sections(
        arch: Arch,
        endian: RunTimeEndian,
        address_size: u8,
        sections: Sections<'a>,
    ) -> Result<Option<CfiTable<'a>>, CfiError> {
        let mut bases = BaseAddresses::default();
        if let Some(text) = sections.text {
            bases = bases.set_text(text);
        }
        let mut parts = Vec::new();
        if let Some((data, address)) = sections.eh_frame {
            bases = bases.set_eh_frame(address);
            let mut part = Part::new(CfiSource::EhFrame, data);
            if let Some((hdr, hdr_address)) = sections.eh_frame_hdr {
                bases = bases.set_eh_frame_hdr(hdr_address);
                let parsed = EhFrameHdr::new(&hdr, endian)
                    .parse(&bases, address_size)
                    .map_err(|source| CfiError::Header {
                        address: hdr_address,
                        source,
                    })?;
                // An empty table (or none) is no table: the section is scanned instead.
                let count = match parsed.table() {
                    None => 0,
                    // An entry takes at least 4 bytes: a larger count is a lie (and would make
                    // offsets computed from it overflow).
                    Some(search) => match search.iter(&bases).size_hint().1 {
                        Some(count) if count <= hdr.len() / 4 => count,
                        _ => {
                            return Err(CfiError::HeaderCount {
                                address: hdr_address,
                                len: hdr.len(),
                            });
                        }
                    },
                };
                if count > 0 {
                    part.source = CfiSource::EhFrameHdr;
                    part.hdr = hdr;
                    part.hdr_count = count;
                }
            }
            parts.push(part);
        }
        if let Some((data, _)) = sections.debug_frame {
            parts.push(Part::new(CfiSource::DebugFrame, data));
        }
        if parts.is_empty() {
            return Ok(None);
        }
        let mut table = CfiTable {
            arch,
            endian,
            address_size,
            bases,
            parts,
            ctx: RefCell::new(UnwindContext::new()),
        };
        let scans: Vec<_> = table
            .parts
            .iter()
            .map(|part| {
                if part.source == CfiSource::EhFrameHdr {
                    (Vec::new(), Vec::new())
                } else {
                    table.scan(part)
                }
            })
            .collect();
        for (part, (index, unreadable)) in table.parts.iter_mut().zip(scans) {
            part.index = index;
            part.unreadable = unreadable;
        }
        Ok(Some(table))
    }

    /// The machine whose DWARF register numbers the rules use.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// The sections searched, in order: `.eh_frame` (with or without its search table), then
    /// `.debug_frame` for the addresses `.eh_frame` does not cover.
    pub fn sources(&self) -> Vec<CfiSource> {
        self.parts.iter().map(|p| p.source).collect()
    }

    /// Every readable FDE with a non-empty range, sorted by start, found by scanning the sections
    /// (not the `.eh_frame_hdr` table, so the two can be checked against each other).
    pub fn fdes(&self) -> Vec<FdeRange> {
        let mut fdes: Vec<_> = self.parts.iter().flat_map(|part| self.scan(part).0).collect();
        fdes.sort_unstable_by_key(|f| (f.start, f.end));
        fdes
    }

    /// The entries skipped when the sections without a search table were indexed: addresses
    /// they cover have no rule. (With `.eh_frame_hdr`, such an entry is an error at lookup.)
    pub fn unreadable(&self) -> impl Iterator<Item = &CfiError> {
        self.parts.iter().flat_map(|part| &part.unreadable)
    }

    /// The rule in effect at `pc`, or `None` when no FDE covers it.
    pub fn rule_at(&self, pc: u64) -> Result<Option<CfiRule>, CfiError> {
        for part in &self.parts {
            if let Some(rule) = self.rule_in(part, pc)? {
                return Ok(Some(rule));
            }
        }
        Ok(None)
    }

    fn rule_in(&self, part: &Part<'_>, pc: u64) -> Result<Option<CfiRule>, CfiError> {
        let section = part.source.section();
        let mut ctx = self.ctx.borrow_mut();
        match part.source {
            CfiSource::EhFrameHdr => {
                let eh = self.eh_frame(part);
                let lookup = |source| CfiError::Lookup { section, pc, source };
                let hdr = EhFrameHdr::new(&part.hdr, self.endian)
                    .parse(&self.bases, self.address_size)
                    .map_err(lookup)?;
                let Some(search) = hdr.table() else {
                    return Ok(None);
                };
                let Some(offset) = self.hdr_search(&search, part.hdr_count, pc).map_err(lookup)? else {
                    return Ok(None);
                };
                let fde = eh
                    .fde_from_offset(&self.bases, EhFrameOffset(offset), EhFrame::cie_from_offset)
                    .map_err(|source| entry_error(section, offset, source))?;
                if !fde.contains(pc) {
                    return Ok(None);
                }
                self.evaluate(part.source, &eh, &mut ctx, &fde, pc)
            }
            CfiSource::EhFrame => {
                let Some(offset) = indexed(&part.index, pc) else {
                    return Ok(None);
                };
                let eh = self.eh_frame(part);
                let fde = eh
                    .fde_from_offset(&self.bases, EhFrameOffset(offset), EhFrame::cie_from_offset)
                    .map_err(|source| entry_error(section, offset, source))?;
                self.evaluate(part.source, &eh, &mut ctx, &fde, pc)
            }
            CfiSource::DebugFrame => {
                let Some(offset) = indexed(&part.index, pc) else {
                    return Ok(None);
                };
                let debug = self.debug_frame(part);
                let fde = debug
                    .fde_from_offset(&self.bases, DebugFrameOffset(offset), DebugFrame::cie_from_offset)
                    .map_err(|source| entry_error(section, offset, source))?;
                self.evaluate(part.source, &debug, &mut ctx, &fde, pc)
            }
        }
    }

    /// The `.eh_frame` offset of the FDE listed last among the `.eh_frame_hdr` entries whose
    /// initial location is at most `pc`. (gimli's own lookup trusts the table's values in
    /// unchecked arithmetic; this reads entries with gimli and does the arithmetic checked.)
    fn hdr_search(&self, search: &EhHdrTable<'_, Slice<'_>>, count: usize, pc: u64) -> gimli::Result<Option<usize>> {
        let entry = |i: usize| -> gimli::Result<(u64, u64)> {
            let (initial, fde) = search
                .iter(&self.bases)
                .nth(i)?
                .ok_or(gimli::Error::UnexpectedEof(ReaderOffsetId(0)))?;
            Ok((initial.direct()?, fde.direct()?))
        };
        let (mut lo, mut hi) = (0, count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if entry(mid)?.0 <= pc {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let Some(last) = lo.checked_sub(1) else {
            return Ok(None);
        };
        let eh_frame = self.bases.eh_frame.section.unwrap_or(0);
        Ok(entry(last)?
            .1
            .checked_sub(eh_frame)
            .and_then(|offset| usize::try_from(offset).ok()))
    }

    /// Every readable FDE of one section with a non-empty range, sorted by start, and the
    /// entries that could not be read.
    fn scan(&self, part: &Part<'_>) -> (Vec<FdeRange>, Vec<CfiError>) {
        let (mut fdes, unreadable) = match part.source {
            CfiSource::EhFrameHdr | CfiSource::EhFrame => {
                scan(&self.eh_frame(part), &part.data, self.endian, &self.bases, part.source)
            }
            CfiSource::DebugFrame => scan(
                &self.debug_frame(part),
                &part.data,
                self.endian,
                &self.bases,
                part.source,
            ),
        };
        fdes.sort_unstable_by_key(|f| (f.start, f.end));
        (fdes, unreadable)
    }

    pub(super) fn eh_frame<'d>(&self, part: &'d Part<'_>) -> EhFrame<Slice<'d>> {
        let mut eh = EhFrame::new(&part.data, self.endian);
        eh.set_address_size(self.address_size);
        if self.arch == Arch::Aarch64 {
            eh.set_vendor(Vendor::AArch64);
        }
        eh
    }

    pub(super) fn debug_frame<'d>(&self, part: &'d Part<'_>) -> DebugFrame<Slice<'d>> {
        let mut debug = DebugFrame::new(&part.data, self.endian);
        debug.set_address_size(self.address_size);
        if self.arch == Arch::Aarch64 {
            debug.set_vendor(Vendor::AArch64);
        }
        debug
    }

    fn evaluate<'d, S: UnwindSection<Slice<'d>>>(
        &self,
        source: CfiSource,
        section: &S,
        ctx: &mut UnwindContext<usize>,
        fde: &FrameDescriptionEntry<Slice<'d>>,
        pc: u64,
    ) -> Result<Option<CfiRule>, CfiError> {
        let row = match fde.unwind_info_for_address(section, &self.bases, ctx, pc) {
            Ok(row) => row,
            Err(gimli::Error::NoUnwindInfoForAddress) => return Ok(None),
            Err(source_error) => {
                return Err(CfiError::Evaluate {
                    section: source.section(),
                    fde_offset: fde.offset() as u64,
                    pc,
                    source: source_error,
                });
            }
        };
        Ok(Some(CfiRule {
            cfa: CfiCfa::from_gimli(row.cfa()),
            ra: CfiReg::from_gimli(row.register(Register(self.arch.ra()))),
            fp: CfiReg::from_gimli(row.register(Register(self.arch.fp()))),
            source,
            fde_start: fde.initial_address(),
            fde_end: fde.end_address(),
            row_start: row.start_address(),
            row_end: row.end_address(),
            signal: fde.is_signal_trampoline(),
        }))
    }
}

/// Section offset of the FDE in `index` (sorted by start) that contains `pc`.
fn indexed(index: &[FdeRange], pc: u64) -> Option<usize> {
    let after = index.partition_point(|f| f.start <= pc);
    let fde = index.get(after.checked_sub(1)?)?;
    if pc < fde.end {
        usize::try_from(fde.offset).ok()
    } else {
        None
    }
}

/// A non-empty section's bytes and address, decompressed if compressed (also in the GNU form,
/// `.zdebug_*` for `.debug_*`); `None` when absent, empty or `SHT_NOBITS`.
fn section<'a>(obj: &object::File<'a>, name: &'static str) -> Result<Option<Located<'a>>, CfiError> {
    let gnu = name.strip_prefix(".debug_").map(|rest| format!(".zdebug_{rest}"));
    let Some(s) = obj
        .section_by_name(name)
        .or_else(|| gnu.and_then(|gnu| obj.section_by_name(&gnu)))
    else {
        return Ok(None);
    };
    let data = crate::compressed::object_section_data(&s, name)
        .map_err(|source| CfiError::Section { section: name, source })?;
    Ok((!data.is_empty()).then(|| (data, s.address())))
}
