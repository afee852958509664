//! The fast evaluator of CFI programs: an FDE's rows computed from gimli's decoded instructions
//! while tracking only what the table builder reads (CFA, the RA and FP columns, aarch64's
//! RA_SIGN_STATE), instead of gimli's `UnwindTable`, which copies a 192-register row on every
//! step. It must give exactly the rows, and the errors, of gimli's evaluation: when it cannot
//! promise that it answers `None` and the caller evaluates with gimli.
//!
//! 1. The CIE's initial program is evaluated once per CIE ([`Initial::of`]); a CIE with
//!    anything but rule definitions (advances, remember/restore, `DW_CFA_restore`), or one
//!    gimli would reject, is left to gimli.
//! 2. The FDE's program then runs as gimli's `UnwindTable::next_row` does: a row ends at each
//!    `DW_CFA_advance_loc` / `DW_CFA_set_loc` and at the end of the program (the FDE end).
//! 3. gimli's limits are kept: at most 192 registers with a rule (only which registers have
//!    one is tracked, as a bit set; a register numbered 256 or more hands the FDE to gimli),
//!    and a stack of 4 rows that holds the CIE's rules too when it has more than one.
//!
//! It does no I/O and must not panic on malformed input.

use gimli::{CallFrameInstruction as Op, CommonInformationEntry, FrameDescriptionEntry, Register, UnwindSection};

use super::{Arch, CfiCfa, CfiReg, Slice};

/// One row of an FDE's unwind table, as the table builder converts it (what
/// both evaluators produce: this one, and gimli's behind `rows`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FdeRow {
    /// `[start, end)`: the addresses the row covers (as gimli computes them: not clipped to
    /// the FDE, and not checked to be ascending, on malformed input).
    pub start: u64,
    pub end: u64,
    pub cfa: CfiCfa,
    /// The bytes of the CFA expression when `cfa` is [`CfiCfa::Expression`], else empty.
    pub cfa_expression: Vec<u8>,
    pub ra: CfiReg,
    pub fp: CfiReg,
    /// aarch64: the return address is signed (the RA_SIGN_STATE pseudo-register is 1).
    pub mangled_ra: bool,
}

/// gimli's `MAX_RULES`: registers with a rule in one row.
const MAX_RULES: u32 = 192;
/// gimli's `MAX_UNWIND_STACK_DEPTH`: rows on the remember/restore stack, the current one included.
const MAX_STACK: usize = 4;
/// Registers this evaluator can track in its bit set.
const MAX_REGISTER: u16 = 256;
/// DWARF number of aarch64's RA_SIGN_STATE pseudo-register (`gimli::AArch64::RA_SIGN_STATE`).
const RA_SIGN_STATE: u16 = 34;

/// How the CFA is computed: gimli's `CfaRule`, the expression kept as its location.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cfa {
    Reg { reg: u16, offset: i64 },
    Expression(gimli::UnwindExpression<usize>),
}

/// The part of a row the builder reads, and which registers have a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct State {
    cfa: Cfa,
    ra: CfiReg,
    fp: CfiReg,
    /// RA_SIGN_STATE: `Some(value)` for no rule (0) or a constant, `None` for any other rule.
    sign: Option<u64>,
    /// Registers with a rule (gimli's row holds one entry for each).
    has_rule: [u64; 4],
}

impl State {
    /// gimli's default row: CFA = r0 + 0, no register rules.
    const DEFAULT: State = State {
        cfa: Cfa::Reg { reg: 0, offset: 0 },
        ra: CfiReg::SameValue,
        fp: CfiReg::SameValue,
        sign: Some(0),
        has_rule: [0; 4],
    };

    fn rules(&self) -> u32 {
        self.has_rule.iter().map(|w| w.count_ones()).sum()
    }
}

/// The state a CIE's initial program leaves, for the FDEs that use it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Initial {
    state: State,
    /// gimli keeps a copy of the initial rules on the stack when there is more than one.
    stack_floor: usize,
}

/// Register `reg`'s rule as this evaluator tracks it.
enum Rule {
    Reg(CfiReg),
    /// `DW_CFA_restore`: the CIE's rule, or none.
    Restore,
}

/// What one instruction did.
enum Step {
    Continue,
    /// The row ends at this address.
    Advance(u64),
}

impl Initial {
    /// Step 1: the state after `cie`'s initial program, `None` when gimli must evaluate it.
    pub(super) fn of<'d, S: UnwindSection<Slice<'d>>>(
        arch: Arch,
        section: &S,
        bases: &gimli::BaseAddresses,
        cie: &CommonInformationEntry<Slice<'d>>,
    ) -> Option<Initial> {
        if !matches!(cie.address_size(), 4 | 8) {
            return None;
        }
        let mut ops = cie.instructions(section, bases);
        let mut eval = Eval::new(arch, cie, None);
        loop {
            let next = ops.next();
            match &next {
                Ok(None) => break,
                Ok(Some(
                    Op::SetLoc { .. }
                    | Op::AdvanceLoc { .. }
                    | Op::Restore { .. }
                    | Op::RememberState
                    | Op::RestoreState,
                ))
                | Err(_) => return None,
                Ok(Some(op)) => match eval.apply(op) {
                    Ok(Some(Step::Continue)) => {}
                    _ => return None,
                },
            }
        }
        let state = eval.state;
        Some(Initial {
            state,
            stack_floor: if state.rules() > 1 { 2 } else { 1 },
        })
    }
}

/// Steps 2-3: every row of `fde`, whose CIE left `initial`, as gimli's `UnwindTable` gives
/// them; `None` when gimli must evaluate it (a register numbered 256 or more).
pub(super) fn rows<'d, S: UnwindSection<Slice<'d>>>(
    arch: Arch,
    section: &S,
    bases: &gimli::BaseAddresses,
    fde: &FrameDescriptionEntry<Slice<'d>>,
    initial: &Initial,
    out: &mut Vec<FdeRow>,
) -> Option<gimli::Result<()>> {
    let mut eval = Eval::new(arch, fde.cie(), Some(initial));
    eval.start = fde.initial_address();
    let mut ops = fde.instructions(section, bases);
    loop {
        // Matched in place, by reference: moving the returned instruction out first made the
        // copy wait on the callee's narrower stores (a store-forwarding stall on every one).
        let next = ops.next();
        let step = match &next {
            Ok(Some(op)) => eval.apply(op),
            Ok(None) => return Some(eval.end_row(section, fde.end_address(), out)),
            Err(e) => return Some(Err(*e)),
        };
        match step {
            Ok(Some(Step::Continue)) => {}
            Ok(Some(Step::Advance(next))) => {
                if let Err(e) = eval.end_row(section, next, out) {
                    return Some(Err(e));
                }
            }
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        }
    }
}

/// One program's evaluation.
struct Eval<'i> {
    arch: Arch,
    initial: Option<&'i Initial>,
    code_align: u64,
    data_align: i64,
    address_size: u8,
    /// Where the current row starts (`DW_CFA_restore_state` keeps it).
    start: u64,
    state: State,
    /// Rows remembered below the current one; `depth` is gimli's stack length.
    stack: [State; MAX_STACK],
    depth: usize,
}

impl<'i> Eval<'i> {
    fn new(arch: Arch, cie: &CommonInformationEntry<Slice<'_>>, initial: Option<&'i Initial>) -> Self {
        Eval {
            arch,
            initial,
            code_align: cie.code_alignment_factor(),
            data_align: cie.data_alignment_factor(),
            address_size: cie.address_size(),
            start: 0,
            state: initial.map_or(State::DEFAULT, |i| i.state),
            stack: [State::DEFAULT; MAX_STACK],
            depth: initial.map_or(1, |i| i.stack_floor),
        }
    }

    /// The current row up to `end`, as the builder reads it; the next one starts at `end`.
    fn end_row<'d, S: UnwindSection<Slice<'d>>>(
        &mut self,
        section: &S,
        end: u64,
        out: &mut Vec<FdeRow>,
    ) -> gimli::Result<()> {
        let (cfa, cfa_expression) = match self.state.cfa {
            Cfa::Reg { reg, offset } => (CfiCfa::RegOffset { reg, offset }, Vec::new()),
            Cfa::Expression(expr) => (CfiCfa::Expression, expr.get(section)?.0.slice().to_vec()),
        };
        out.push(FdeRow {
            start: self.start,
            end,
            cfa,
            cfa_expression,
            ra: self.state.ra,
            fp: self.state.fp,
            mangled_ra: self.arch == Arch::Aarch64 && self.state.sign == Some(1),
        });
        self.start = end;
        Ok(())
    }

    /// One instruction, as gimli's `UnwindTable::evaluate`; `Ok(None)` hands the program to gimli.
    fn apply(&mut self, op: &Op<usize>) -> gimli::Result<Option<Step>> {
        let data_align = self.data_align;
        let data = |factored: i64| factored.wrapping_mul(data_align);
        match *op {
            Op::SetLoc { address } => {
                if address < self.start {
                    return Err(gimli::Error::InvalidCfiSetLoc(address));
                }
                return Ok(Some(Step::Advance(address)));
            }
            Op::AdvanceLoc { delta } => {
                let delta = u64::from(delta).wrapping_mul(self.code_align);
                return add_sized(self.start, delta, self.address_size).map(|a| Some(Step::Advance(a)));
            }
            Op::DefCfa { register, offset } => {
                self.state.cfa = Cfa::Reg {
                    reg: register.0,
                    offset: offset as i64,
                }
            }
            Op::DefCfaSf {
                register,
                factored_offset,
            } => {
                self.state.cfa = Cfa::Reg {
                    reg: register.0,
                    offset: data(factored_offset),
                }
            }
            Op::DefCfaRegister { register } => match &mut self.state.cfa {
                Cfa::Reg { reg, .. } => *reg = register.0,
                Cfa::Expression(_) => return Err(gimli::Error::CfiInstructionInInvalidContext),
            },
            Op::DefCfaOffset { offset } => self.set_cfa_offset(offset as i64)?,
            Op::DefCfaOffsetSf { factored_offset } => self.set_cfa_offset(data(factored_offset))?,
            Op::DefCfaExpression { expression } => self.state.cfa = Cfa::Expression(expression),
            Op::Undefined { register } => return self.set(register, Rule::Reg(CfiReg::Undefined)),
            Op::SameValue { register } => return self.set(register, Rule::Reg(CfiReg::SameValue)),
            Op::Offset {
                register,
                factored_offset,
            } => return self.set(register, Rule::Reg(CfiReg::Offset(data(factored_offset as i64)))),
            Op::OffsetExtendedSf {
                register,
                factored_offset,
            } => return self.set(register, Rule::Reg(CfiReg::Offset(data(factored_offset)))),
            Op::ValOffset {
                register,
                factored_offset,
            } => return self.set(register, Rule::Reg(CfiReg::ValOffset(data(factored_offset as i64)))),
            Op::ValOffsetSf {
                register,
                factored_offset,
            } => return self.set(register, Rule::Reg(CfiReg::ValOffset(data(factored_offset)))),
            Op::Register {
                dest_register,
                src_register,
            } => return self.set(dest_register, Rule::Reg(CfiReg::Register(src_register.0))),
            Op::Expression { register, .. } => return self.set(register, Rule::Reg(CfiReg::Expression)),
            Op::ValExpression { register, .. } => return self.set(register, Rule::Reg(CfiReg::ValExpression)),
            Op::Restore { register } => return self.set(register, Rule::Restore),
            Op::RememberState => {
                if self.depth >= MAX_STACK {
                    return Err(gimli::Error::StackFull);
                }
                self.stack[self.depth] = self.state;
                self.depth += 1;
            }
            Op::RestoreState => {
                let floor = self.initial.map_or(1, |i| i.stack_floor);
                if self.depth <= floor {
                    return Err(gimli::Error::PopWithEmptyStack);
                }
                self.depth -= 1;
                self.state = self.stack[self.depth];
            }
            Op::ArgsSize { .. } | Op::Nop => {}
            Op::NegateRaState => {
                let Some(value) = self.state.sign else {
                    return Err(gimli::Error::CfiInstructionInInvalidContext);
                };
                if !self.mark(RA_SIGN_STATE)? {
                    return Ok(None);
                }
                self.state.sign = Some(value ^ 1);
            }
        }
        Ok(Some(Step::Continue))
    }

    fn set_cfa_offset(&mut self, new: i64) -> gimli::Result<()> {
        match &mut self.state.cfa {
            Cfa::Reg { offset, .. } => {
                *offset = new;
                Ok(())
            }
            Cfa::Expression(_) => Err(gimli::Error::CfiInstructionInInvalidContext),
        }
    }

    /// Give `register` a rule (gimli's `set_register_rule`, or `DW_CFA_restore`).
    fn set(&mut self, register: Register, rule: Rule) -> gimli::Result<Option<Step>> {
        let reg = register.0;
        let rule = match rule {
            Rule::Reg(rule) => Some(rule),
            Rule::Restore => {
                // gimli cannot restore while it evaluates the CIE; `Initial::of` never asks.
                let Some(initial) = self.initial else {
                    return Err(gimli::Error::CfiInstructionInInvalidContext);
                };
                if !has(&initial.state.has_rule, reg) {
                    self.clear(reg);
                    return Ok(Some(Step::Continue));
                }
                if !self.mark(reg)? {
                    return Ok(None);
                }
                let i = initial.state;
                match reg {
                    r if r == self.arch.ra() => self.state.ra = i.ra,
                    r if r == self.arch.fp() => self.state.fp = i.fp,
                    RA_SIGN_STATE => self.state.sign = i.sign,
                    _ => {}
                }
                return Ok(Some(Step::Continue));
            }
        };
        if !self.mark(reg)? {
            return Ok(None);
        }
        if let Some(rule) = rule {
            match reg {
                r if r == self.arch.ra() => self.state.ra = rule,
                r if r == self.arch.fp() => self.state.fp = rule,
                RA_SIGN_STATE => self.state.sign = None,
                _ => {}
            }
        }
        Ok(Some(Step::Continue))
    }

    /// Record that `reg` has a rule: `Ok(false)` when it is out of the bit set's range,
    /// `TooManyRegisterRules` when it is new and the row is full.
    fn mark(&mut self, reg: u16) -> gimli::Result<bool> {
        if reg >= MAX_REGISTER {
            return Ok(false);
        }
        if !has(&self.state.has_rule, reg) {
            if self.state.rules() >= MAX_RULES {
                return Err(gimli::Error::TooManyRegisterRules);
            }
            self.state.has_rule[usize::from(reg / 64)] |= 1 << (reg % 64);
        }
        Ok(true)
    }

    /// `DW_CFA_restore` of a register the CIE gave no rule: none again.
    fn clear(&mut self, reg: u16) {
        if reg < MAX_REGISTER {
            self.state.has_rule[usize::from(reg / 64)] &= !(1 << (reg % 64));
        }
        match reg {
            r if r == self.arch.ra() => self.state.ra = CfiReg::SameValue,
            r if r == self.arch.fp() => self.state.fp = CfiReg::SameValue,
            RA_SIGN_STATE => self.state.sign = Some(0),
            _ => {}
        }
    }
}

fn has(bits: &[u64; 4], reg: u16) -> bool {
    reg < MAX_REGISTER && bits[usize::from(reg / 64)] & (1 << (reg % 64)) != 0
}

/// gimli's `add_sized` for the address sizes evaluated here (4 and 8): `address + delta`, an
/// error when it overflows `size` bytes.
fn add_sized(address: u64, delta: u64, size: u8) -> gimli::Result<u64> {
    let sum = address.checked_add(delta).ok_or(gimli::Error::AddressOverflow)?;
    let mask = if size == 4 { u64::from(u32::MAX) } else { u64::MAX };
    if sum & !mask != 0 {
        return Err(gimli::Error::AddressOverflow);
    }
    Ok(sum)
}
