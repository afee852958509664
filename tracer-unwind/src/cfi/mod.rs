//! DWARF call-frame information (`.eh_frame`, then `.debug_frame`) read with gimli and reduced to
//! the three things a stack walker needs at one address: how to find the CFA, the return address
//! and the caller's frame pointer. It is the oracle `check` compares SFrame against and the
//! fallback source of unwind rows for code without SFrame.
//!
//! Pure: bytes of an ELF file in, typed rules out. It must not do I/O, must not know about SFrame,
//! and must not panic on malformed input (every failure is a [`CfiError`] naming what and where).

mod program;
mod rows;
mod scan;
mod table;

pub(crate) use program::FdeRow;
pub(crate) use rows::{Evaluator, FdeRows};
pub use scan::FdeRange;
pub use table::CfiTable;

use std::fmt;

/// The gimli reader over a section's bytes, in the file's byte order.
type Slice<'d> = gimli::EndianSlice<'d, gimli::RunTimeEndian>;

/// The machines whose DWARF register numbers this module knows (from the ELF header's machine).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// DWARF SP = 7 (rsp), FP = 6 (rbp), RA = 16 (the rip column).
    X86_64,
    /// DWARF SP = 31, FP = 29 (x29), RA = 30 (x30, the link register).
    Aarch64,
    /// DWARF SP = 15 (r15), FP = 11 (r11), RA = 14 (r14, the link register).
    S390x,
}

impl Arch {
    /// DWARF number of the stack pointer.
    pub fn sp(self) -> u16 {
        match self {
            Arch::X86_64 => 7,
            Arch::Aarch64 => 31,
            Arch::S390x => 15,
        }
    }
    /// DWARF number of the frame pointer.
    pub fn fp(self) -> u16 {
        match self {
            Arch::X86_64 => 6,
            Arch::Aarch64 => 29,
            Arch::S390x => 11,
        }
    }
    /// DWARF number of the return-address column.
    pub fn ra(self) -> u16 {
        match self {
            Arch::X86_64 => 16,
            Arch::Aarch64 => 30,
            Arch::S390x => 14,
        }
    }
    /// The register's conventional name, or `r<n>` for the ones this module has no name for.
    pub fn reg_name(self, reg: u16) -> String {
        match (self, reg) {
            (Arch::X86_64, 7) => "rsp".into(),
            (Arch::X86_64, 6) => "rbp".into(),
            (Arch::X86_64, 16) => "rip".into(),
            (Arch::Aarch64, 31) => "sp".into(),
            (Arch::Aarch64, 29) => "x29".into(),
            (Arch::Aarch64, 30) => "x30".into(),
            _ => format!("r{reg}"),
        }
    }
}

/// Which section the rules come from and how an address finds its FDE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CfiSource {
    /// `.eh_frame`, searched through `.eh_frame_hdr`'s binary search table.
    EhFrameHdr,
    /// `.eh_frame` without a usable `.eh_frame_hdr`: FDEs indexed by one scan.
    EhFrame,
    /// `.debug_frame`: FDEs indexed by one scan. Searched after `.eh_frame`, for the addresses it
    /// does not cover (code built with `-fno-asynchronous-unwind-tables -g` has only this).
    DebugFrame,
}

impl CfiSource {
    /// The section the rules are read from.
    pub fn section(self) -> &'static str {
        match self {
            CfiSource::EhFrameHdr | CfiSource::EhFrame => ".eh_frame",
            CfiSource::DebugFrame => ".debug_frame",
        }
    }
}

impl fmt::Display for CfiSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CfiSource::EhFrameHdr => f.write_str(".eh_frame (via .eh_frame_hdr)"),
            CfiSource::EhFrame | CfiSource::DebugFrame => f.write_str(self.section()),
        }
    }
}

/// The unwind rule in effect at one address, as gimli evaluates the FDE's program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CfiRule {
    pub cfa: CfiCfa,
    /// The return-address column.
    pub ra: CfiReg,
    /// The frame pointer.
    pub fp: CfiReg,
    /// The section the FDE is in.
    pub source: CfiSource,
    /// `[fde_start, fde_end)`: the FDE that covers the address.
    pub fde_start: u64,
    pub fde_end: u64,
    /// `[row_start, row_end)`: the addresses this same rule covers (the next rule starts at `row_end`).
    pub row_start: u64,
    pub row_end: u64,
    /// The CIE's augmentation has `S`: a signal trampoline.
    pub signal: bool,
}

/// How the CFA is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CfiCfa {
    /// `CFA = reg + offset`, `reg` a DWARF register number.
    RegOffset { reg: u16, offset: i64 },
    /// `CFA = eval(DWARF expression)`: not comparable with a register + offset rule.
    Expression,
}

/// Where the caller's value of a register is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CfiReg {
    /// No recoverable value (for RA: the outermost frame).
    Undefined,
    /// Unchanged from this frame; also what an unspecified column means here.
    SameValue,
    /// `value = *(CFA + n)`.
    Offset(i64),
    /// `value = CFA + n`.
    ValOffset(i64),
    /// `value = reg` (DWARF number).
    Register(u16),
    /// `value = *eval(expression)`.
    Expression,
    /// `value = eval(expression)`.
    ValExpression,
    /// Architectural or constant pseudo-register rules.
    Other,
}

impl CfiReg {
    fn from_gimli<T: gimli::ReaderOffset>(rule: Option<gimli::RegisterRule<T>>) -> CfiReg {
        use gimli::RegisterRule as R;
        match rule {
            None | Some(R::SameValue) => CfiReg::SameValue,
            Some(R::Undefined) => CfiReg::Undefined,
            Some(R::Offset(n)) => CfiReg::Offset(n),
            Some(R::ValOffset(n)) => CfiReg::ValOffset(n),
            Some(R::Register(r)) => CfiReg::Register(r.0),
            Some(R::Expression(_)) => CfiReg::Expression,
            Some(R::ValExpression(_)) => CfiReg::ValExpression,
            Some(R::Architectural | R::Constant(_)) => CfiReg::Other,
        }
    }
}

impl CfiCfa {
    fn from_gimli<T: gimli::ReaderOffset>(rule: &gimli::CfaRule<T>) -> CfiCfa {
        match *rule {
            gimli::CfaRule::RegisterAndOffset { register, offset } => CfiCfa::RegOffset {
                reg: register.0,
                offset,
            },
            gimli::CfaRule::Expression(_) => CfiCfa::Expression,
        }
    }
}

/// Why CFI could not be read. Each variant says which section and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CfiError {
    #[error("not a readable ELF file")]
    Elf(#[source] object::Error),
    #[error("machine {0:?} is not supported (only x86-64, aarch64 and s390x)")]
    UnsupportedMachine(object::Architecture),
    #[error("cannot read section {section}: {source}")]
    Section {
        section: &'static str,
        #[source]
        source: crate::compressed::DecompressError,
    },
    #[error(".eh_frame_hdr at address {address:#x} is malformed")]
    Header {
        address: u64,
        #[source]
        source: gimli::Error,
    },
    #[error(".eh_frame_hdr at address {address:#x} claims more FDEs than its {len} bytes can list")]
    HeaderCount { address: u64, len: usize },
    #[error("{section} entry at section offset {offset:#x} is malformed")]
    Entry {
        section: &'static str,
        offset: u64,
        #[source]
        source: gimli::Error,
    },
    #[error("{section}: cannot find the FDE for pc {pc:#x}")]
    Lookup {
        section: &'static str,
        pc: u64,
        #[source]
        source: gimli::Error,
    },
    #[error("{section}: cannot evaluate the FDE at section offset {fde_offset:#x} for pc {pc:#x}")]
    Evaluate {
        section: &'static str,
        fde_offset: u64,
        pc: u64,
        #[source]
        source: gimli::Error,
    },
}

impl CfiError {
    /// Well-formed CFI that gimli does not support (an unknown CIE augmentation such as aarch64's
    /// `B`), as opposed to malformed input.
    pub fn is_unsupported(&self) -> bool {
        matches!(
            self,
            CfiError::Entry {
                source: gimli::Error::UnknownAugmentation,
                ..
            } | CfiError::Lookup {
                source: gimli::Error::UnknownAugmentation,
                ..
            } | CfiError::Evaluate {
                source: gimli::Error::UnknownAugmentation,
                ..
            }
        )
    }
}

#[cfg(test)]
mod tests;
