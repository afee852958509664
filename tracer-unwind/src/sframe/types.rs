//! The typed view of an SFrame section: what the parser produces and every consumer
//! (dump, check, the table builder) reads. Plain data only: no parsing, no I/O here.
//!
//! Rules are written as equations over the caller's registers, e.g. for amd64 DEFAULT rows
//! `CFA = SP + 16; RA = *(CFA - 8); FP = *(CFA - 16)`.

/// `abi/arch` byte of the header (docs/sframe-format.md, header offset 0x04).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Abi {
    Aarch64Be = 1,
    Aarch64Le = 2,
    Amd64Le = 3,
    S390xBe = 4,
}

/// Byte order the section was written in (a foreign-endian magic reads as 0xe2de).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endian {
    Little,
    Big,
}

/// Header flags (docs/sframe-format.md, header offset 0x03).
pub const FLAG_FDE_SORTED: u8 = 0x1;
/// v1/v2 only; an unused bit in v3.
pub const FLAG_FRAME_POINTER: u8 = 0x2;
/// v2 errata and v3: FDE start addresses are relative to the start field itself.
pub const FLAG_FDE_FUNC_START_PCREL: u8 = 0x4;

/// The fixed 28-byte header, decoded. Offsets are as on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub version: u8,
    pub flags: u8,
    pub abi: Abi,
    pub fixed_fp_offset: i8,
    pub fixed_ra_offset: i8,
    pub auxhdr_len: u8,
    pub num_fdes: u32,
    pub num_fres: u32,
    pub fre_len: u32,
    pub fdeoff: u32,
    pub freoff: u32,
}

impl Header {
    pub fn is_sorted(&self) -> bool {
        self.flags & FLAG_FDE_SORTED != 0
    }
    pub fn is_pcrel(&self) -> bool {
        self.flags & FLAG_FDE_FUNC_START_PCREL != 0
    }
}

/// How a PC selects a row inside a function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PcType {
    /// Last row with `start <= pc - func_start`.
    Inc,
    /// Last row with `start <= (pc - func_start) % rep_size` (PLT stubs).
    Mask,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FdeType {
    Default,
    /// v3 FLEX: (control, offset) word pairs for CFA, RA, FP.
    Flex,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PauthKey {
    A,
    B,
}

/// Width of a row's start-address field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreType {
    Addr1,
    Addr2,
    Addr4,
}

/// One function descriptor, with its start resolved to the address the ELF file places it at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Function {
    /// Resolved start address (section vaddr / field address + raw value, per version and flags).
    pub start: u64,
    pub size: u32,
    pub pc_type: PcType,
    /// Size of the repeating block for `PcType::Mask` (0 when unused).
    pub rep_size: u8,
    pub fde_type: FdeType,
    /// v3 SIGNAL bit: this function is a signal trampoline.
    pub signal: bool,
    pub pauth_key: PauthKey,
    pub fre_type: FreType,
    pub num_fres: u32,
    /// Byte offset of the first row inside the FRE sub-section (v3: just past the attribute record).
    pub fre_offset: u32,
    /// Position of this descriptor in the section's own order.
    pub index: u32,
}

impl Function {
    /// One past the last byte of the function.
    pub fn end(&self) -> u64 {
        self.start.saturating_add(u64::from(self.size))
    }
    pub fn contains(&self, pc: u64) -> bool {
        pc >= self.start && pc < self.end()
    }
}

/// A register named by a rule. The ABI's stack and frame pointers are normalised to `Sp`/`Fp`
/// (also when a v3 FLEX control word names them by DWARF number); any other is `Dwarf(n)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reg {
    Sp,
    Fp,
    Dwarf(u16),
}

/// `CFA = deref ? *(base + offset) : base + offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CfaRule {
    pub base: Reg,
    pub offset: i64,
    pub deref: bool,
}

/// Where the caller's value of RA or FP is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Not tracked by the row. RA: the header's fixed RA offset applies (`*(CFA + fixed)`);
    /// FP: unchanged from the callee (or the header's fixed FP offset, when non-zero).
    Unchanged,
    /// `value = *(CFA + offset)`.
    AtCfa(i64),
    /// `value = CFA + offset` (FLEX, reg_p = 0, deref_p = 0).
    ValCfa(i64),
    /// `value = reg` (s390x v2: the value is held in a register).
    InRegister(Reg),
    /// `value = deref ? *(reg + offset) : reg + offset` (FLEX with reg_p = 1: topmost frame only
    /// unless `reg` is SP/FP).
    Expr { base: Reg, offset: i64, deref: bool },
}

/// One frame row entry, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// The row's start as encoded: offset from the function start (`Inc`) or inside the
    /// repeating block (`Mask`).
    pub start: u32,
    pub cfa: CfaRule,
    pub ra: Rule,
    pub fp: Rule,
    /// A row with zero data words (or a v3 DEFAULT function with no rows): outermost frame.
    pub ra_undefined: bool,
    /// aarch64 PAC: the saved RA is signed.
    pub mangled_ra: bool,
    /// Byte offset of this row inside the whole section (for messages).
    pub offset: u32,
}
