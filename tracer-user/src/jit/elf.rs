//! The code a jitdump describes in one region of a process, as a small ELF image, the form
//! the rest of the tracer reads objects in (as perf's `inject --jit` does): `.text` holds the
//! loaded code at its addresses in the process, `.symtab` names each function, and `.eh_frame`
//! gathers the runtime's unwind information for it. Each load's `.eh_frame` was written for
//! its own place after its code (see [`super::dump`]); gathered into one section, the
//! PC-relative start address of every FDE is rewritten for its new place (absolute ones need
//! nothing; other encodings are left out, counted). Pure: loads in, bytes out.

use gimli::{BaseAddresses, CieOrFde, EhFrame, NativeEndian, UnwindSection as _, constants};

use super::dump::CodeLoad;

/// The largest `.text` built (bytes from the first load's start to the last one's end).
pub const MAX_TEXT: u64 = 64 << 20;

const EHDR: usize = 64;
const PHDR: usize = 56;
const SHDR: usize = 64;
const SYM: usize = 24;

/// An ELF image of `loads` (by address, not overlapping, none below `base`), for machine
/// `machine`, its addresses relative to `base` (the start of the region: the bias of the
/// mapping); `None` when there are none or they span more than [`MAX_TEXT`]. Also returns how
/// many loads' unwind information could not be used.
pub fn image(loads: &[&CodeLoad], machine: u32, base: u64) -> Option<(Vec<u8>, u64)> {
    let text_start = loads.first()?.addr;
    let text_end = loads.iter().map(|l| l.end()).max()?;
    if text_start < base {
        return None;
    }
    if text_end - text_start > MAX_TEXT {
        return None;
    }
    let mut text = vec![0u8; usize::try_from(text_end - text_start).ok()?];
    for load in loads {
        let at = usize::try_from(load.addr - text_start).ok()?;
        text[at..at + load.code.len()].copy_from_slice(&load.code);
    }
    let eh_addr = text_end.next_multiple_of(8);
    let mut eh_frame = Vec::new();
    let mut unusable = 0;
    for load in loads {
        let Some(unwind) = &load.unwind else { continue };
        // Where it will be in the process's addresses (the image's plus `base`).
        let new_addr = eh_addr + eh_frame.len() as u64;
        match relocated(&unwind.eh_frame, load.eh_frame_addr(), new_addr, base) {
            Some(bytes) => eh_frame.extend_from_slice(&bytes),
            None => unusable += 1,
        }
    }
    let mut strtab = vec![0u8];
    let mut symtab = vec![0u8; SYM];
    for load in loads {
        let name = strtab.len() as u32;
        strtab.extend_from_slice(load.name.replace('\0', "").as_bytes());
        strtab.push(0);
        symtab.extend_from_slice(&name.to_le_bytes());
        symtab.push(0x12); // STB_GLOBAL, STT_FUNC
        symtab.push(0);
        symtab.extend_from_slice(&1u16.to_le_bytes()); // .text
        symtab.extend_from_slice(&(load.addr - base).to_le_bytes());
        symtab.extend_from_slice(&(load.code.len() as u64).to_le_bytes());
    }
    Some((
        Writer::default().write(
            machine,
            text_start - base,
            &text,
            eh_addr - base,
            &eh_frame,
            &symtab,
            &strtab,
        ),
        unusable,
    ))
}

/// `eh_frame` (its entries up to a terminator), written for `old` and moved to `new`: every
/// FDE's start rewritten, PC-relative ones for the new place, absolute ones relative to
/// `base` (the image's addresses). `None` if it cannot be read or moved.
fn relocated(eh_frame: &[u8], old: u64, new: u64, base: u64) -> Option<Vec<u8>> {
    // Whole entries only, without the terminator (the gathered section gets one at its end).
    let mut end = 0;
    while let Some(len) = eh_frame.get(end..end + 4) {
        let len = u32::from_ne_bytes(len.try_into().ok()?);
        if len == 0 {
            break;
        }
        if len == u32::MAX {
            return None; // 64-bit DWARF: not written by JIT runtimes
        }
        end = end.checked_add(4 + len as usize).filter(|&e| e <= eh_frame.len())?;
    }
    let mut out = eh_frame[..end].to_vec();
    let section = EhFrame::new(&eh_frame[..end], NativeEndian);
    let bases = BaseAddresses::default().set_eh_frame(old);
    let mut entries = section.entries(&bases);
    while let Some(entry) = entries.next().ok()? {
        let CieOrFde::Fde(partial) = entry else { continue };
        let fde = partial.parse(EhFrame::cie_from_offset).ok()?;
        let field = fde.offset() + 8;
        let encoding = fde.cie().fde_address_encoding().unwrap_or(constants::DW_EH_PE_absptr);
        match (encoding.application(), encoding.format()) {
            (constants::DW_EH_PE_absptr, constants::DW_EH_PE_absptr | constants::DW_EH_PE_udata8) => {
                let value = fde.initial_address().wrapping_sub(base);
                out.get_mut(field..field + 8)?.copy_from_slice(&value.to_ne_bytes());
            }
            (constants::DW_EH_PE_pcrel, constants::DW_EH_PE_sdata4) => {
                let value = fde.initial_address().wrapping_sub(new + field as u64) as i64;
                let value = i32::try_from(value).ok()?;
                out.get_mut(field..field + 4)?.copy_from_slice(&value.to_ne_bytes());
            }
            (constants::DW_EH_PE_pcrel, constants::DW_EH_PE_sdata8 | constants::DW_EH_PE_udata8) => {
                let value = fde.initial_address().wrapping_sub(new + field as u64);
                out.get_mut(field..field + 8)?.copy_from_slice(&value.to_ne_bytes());
            }
            _ => return None,
        }
    }
    Some(out)
}

/// The ELF file layout: header, one program header, the sections' data, the section headers.
#[derive(Default)]
struct Writer {
    out: Vec<u8>,
    shstrtab: Vec<u8>,
    headers: Vec<u8>,
}

impl Writer {
    /// Append `data` (aligned to `align`) as section `name`; returns its file offset.
    #[allow(clippy::too_many_arguments)]
    fn section(&mut self, name: &str, kind: u32, flags: u64, addr: u64, data: &[u8], link: u32, entsize: u64) -> u64 {
        while !self.out.len().is_multiple_of(16) {
            self.out.push(0);
        }
        let offset = self.out.len() as u64;
        self.out.extend_from_slice(data);
        let name_at = self.shstrtab.len() as u32;
        self.shstrtab.extend_from_slice(name.as_bytes());
        self.shstrtab.push(0);
        let h = &mut self.headers;
        h.extend_from_slice(&name_at.to_le_bytes());
        h.extend_from_slice(&kind.to_le_bytes());
        h.extend_from_slice(&flags.to_le_bytes());
        h.extend_from_slice(&addr.to_le_bytes());
        h.extend_from_slice(&offset.to_le_bytes());
        h.extend_from_slice(&(data.len() as u64).to_le_bytes());
        h.extend_from_slice(&link.to_le_bytes());
        // sh_info of .symtab: the first global symbol (all but the null one).
        h.extend_from_slice(&u32::from(kind == 2).to_le_bytes());
        h.extend_from_slice(&(if kind == 2 { 8u64 } else { 1 }).to_le_bytes());
        h.extend_from_slice(&entsize.to_le_bytes());
        offset
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        mut self,
        machine: u32,
        text_addr: u64,
        text: &[u8],
        eh_addr: u64,
        eh_frame: &[u8],
        symtab: &[u8],
        strtab: &[u8],
    ) -> Vec<u8> {
        self.out = vec![0; EHDR + PHDR];
        self.shstrtab.push(0);
        self.headers = vec![0; SHDR];
        const SHF_ALLOC: u64 = 2;
        let text_offset = self.section(".text", 1, SHF_ALLOC | 4, text_addr, text, 0, 0);
        let mut count = 2;
        if !eh_frame.is_empty() {
            let mut section = eh_frame.to_vec();
            section.extend_from_slice(&[0; 4]);
            self.section(".eh_frame", 1, SHF_ALLOC, eh_addr, &section, 0, 0);
            count += 1;
        }
        // .symtab links to .strtab, the section after it.
        self.section(".symtab", 2, 0, 0, symtab, count + 1, SYM as u64);
        self.section(".strtab", 3, 0, 0, strtab, 0, 0);
        count += 2;
        let shstrndx = count;
        // Its own name is in it too: added by `section` where this copy has it.
        let mut names = self.shstrtab.clone();
        names.extend_from_slice(b".shstrtab\0");
        self.section(".shstrtab", 3, 0, 0, &names, 0, 0);
        count += 1;
        while !self.out.len().is_multiple_of(8) {
            self.out.push(0);
        }
        let shoff = self.out.len() as u64;
        let headers = std::mem::take(&mut self.headers);
        self.out.extend_from_slice(&headers);
        // The ELF header.
        let mut e = Vec::with_capacity(EHDR);
        e.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
        e.extend_from_slice(&3u16.to_le_bytes()); // ET_DYN
        e.extend_from_slice(&(machine as u16).to_le_bytes());
        e.extend_from_slice(&1u32.to_le_bytes());
        e.extend_from_slice(&0u64.to_le_bytes()); // no entry point
        e.extend_from_slice(&(EHDR as u64).to_le_bytes());
        e.extend_from_slice(&shoff.to_le_bytes());
        e.extend_from_slice(&0u32.to_le_bytes());
        for half in [EHDR, PHDR, 1, SHDR, count as usize, shstrndx as usize] {
            e.extend_from_slice(&(half as u16).to_le_bytes());
        }
        self.out[..EHDR].copy_from_slice(&e);
        // One PT_LOAD, read and execute, over .text.
        let mut p = Vec::with_capacity(PHDR);
        p.extend_from_slice(&1u32.to_le_bytes());
        p.extend_from_slice(&5u32.to_le_bytes());
        p.extend_from_slice(&text_offset.to_le_bytes());
        p.extend_from_slice(&text_addr.to_le_bytes());
        p.extend_from_slice(&text_addr.to_le_bytes());
        p.extend_from_slice(&(text.len() as u64).to_le_bytes());
        p.extend_from_slice(&(text.len() as u64).to_le_bytes());
        p.extend_from_slice(&1u64.to_le_bytes());
        self.out[EHDR..EHDR + PHDR].copy_from_slice(&p);
        self.out
    }
}
