//! Host tests of the frame-pointer fallback against fake stacks: the x86-64 chain and its
//! sanity checks, and aarch64's frame 0 (a leaf without a record, a function with one before
//! and after it made a call), signed return addresses, and what a frame the fallback found
//! may take from a table.

use super::*;
use crate::unwind::{FLAG_FP_SAVED, FLAG_RA_SAVED, KIND_OUTERMOST, REG_FP};
use crate::walk::tests::{BASE, FakeStack, regs, rule, sp_rule};

/// Frame pointers: `(pc, sp, fp) = (*(fp + 8), fp + 16, *fp)` up to FP 0, which is outermost.
#[test]
fn frame_pointer_chain() {
    let fp1 = BASE + 0x10;
    let fp2 = BASE + 0x30;
    let mut words = [0u64; 8];
    words[2] = fp2;
    words[3] = 0x2222;
    words[6] = 0;
    words[7] = 0x3333;
    let stack = FakeStack::new(&words);
    let read = |a| stack.read(a);
    let Step::Next(caller) = frame_pointer_step(&regs(0x1111, BASE, fp1), Arch::X86_64, false, true, read) else {
        panic!("first step");
    };
    assert_eq!(caller, regs(0x2222, fp1 + 16, fp2));
    let Step::Next(outer) = frame_pointer_step(&caller, Arch::X86_64, true, false, read) else {
        panic!("second step");
    };
    assert_eq!(outer, regs(0x3333, fp2 + 16, 0));
    assert_eq!(
        frame_pointer_step(&outer, Arch::X86_64, true, false, read),
        Step::Stop(StopReason::Outermost)
    );
}

/// An FP of 0 that no frame-pointer step loaded (frame 0, or after table-unwound frames that
/// left RBP alone) is no chain at all: the walk stops without information, not as complete.
#[test]
fn unchained_zero_frame_pointer_is_no_information() {
    let stack = FakeStack::new(&[0u64; 2]);
    assert_eq!(
        frame_pointer_step(&regs(0x1111, BASE, 0), Arch::X86_64, false, true, |a| stack.read(a)),
        Step::Stop(StopReason::NoInfo)
    );
}

/// The frame-pointer fallback refuses misaligned or below-SP FPs, saved FPs that do not
/// go up, zero RAs, failed reads and overflow instead of inventing a frame.
#[test]
fn frame_pointer_sanity_checks() {
    let words = [BASE + 0x10, 0x2222, BASE, 0x3333, BASE + 0x20, 0];
    let stack = FakeStack::new(&words);
    let fp_step = |sp, fp| frame_pointer_step(&regs(0x1000, sp, fp), Arch::X86_64, true, false, |a| stack.read(a));
    let bad = Step::Stop(StopReason::BadFramePointer);
    assert_eq!(fp_step(BASE, BASE), Step::Next(regs(0x2222, BASE + 16, BASE + 0x10)));
    assert_eq!(fp_step(BASE, BASE + 4), bad);
    assert_eq!(fp_step(BASE + 8, BASE), bad);
    assert_eq!(fp_step(BASE, BASE + 0x10), bad, "saved FP below FP");
    assert_eq!(fp_step(BASE, BASE + 0x20), Step::Stop(StopReason::ZeroRa));
    assert_eq!(fp_step(BASE, BASE + 0x30), Step::Stop(StopReason::RaReadFailed));
    assert_eq!(fp_step(0, u64::MAX - 7), bad, "fp + 16 overflows");
    let failing = FakeStack::failing_at(&words, BASE);
    assert_eq!(
        frame_pointer_step(&regs(0x1000, BASE, BASE), Arch::X86_64, true, false, |a| failing
            .read(a)),
        Step::Stop(StopReason::FpReadFailed)
    );
}

/// A PAC signature in the high bits of a return address (`paciasp`).
const SIGNATURE: u64 = 0x002d_0000_0000_0000;

/// aarch64 registers with a link register.
fn with_lr(pc: u64, sp: u64, fp: u64, lr: u64) -> Regs {
    Regs { pc, sp, fp, lr }
}

/// An aarch64 stack under a leaf without a frame record (`-momit-leaf-frame-pointer`): x29
/// points at its caller's record, whose return address is the caller's caller (0x3333), while
/// the leaf's own return address (0x2222) is in LR. Following the record would skip the
/// caller: frame 0 stops without information instead.
#[test]
fn aarch64_leaf_without_a_record_stops_in_frame_zero() {
    let caller_fp = BASE + 0x20;
    let mut words = [0u64; 8];
    words[4] = BASE + 0x30; // the caller's record: saved FP, then its return address
    words[5] = 0x3333;
    let stack = FakeStack::new(&words);
    let leaf = with_lr(0x1111, BASE, caller_fp, 0x2222);
    assert_eq!(
        frame_pointer_step(&leaf, Arch::Aarch64, false, true, |a| stack.read(a)),
        Step::Stop(StopReason::NoInfo)
    );
    // x86-64 has no link register: the same record is followed (its rule, unchanged).
    assert_eq!(
        frame_pointer_step(&regs(0x1111, BASE, caller_fp), Arch::X86_64, false, true, |a| stack
            .read(a)),
        Step::Next(regs(0x3333, caller_fp + 16, BASE + 0x30))
    );
}

/// A function with its own record: before it made a call, the record's return address is LR,
/// so the record is the function's own and is followed; after a call, LR (0x1180) is a return
/// address into the function itself, not its caller: taking it would invent a frame, the
/// record cannot be proven the function's own, and frame 0 stops without information.
#[test]
fn aarch64_own_record_is_followed_only_while_it_holds_lr() {
    let mut words = [0u64; 4];
    words[0] = BASE + 0x10;
    words[1] = 0x2222;
    let stack = FakeStack::new(&words);
    let step = |lr| {
        frame_pointer_step(&with_lr(0x1111, BASE, BASE, lr), Arch::Aarch64, false, true, |a| {
            stack.read(a)
        })
    };
    assert_eq!(step(0x2222), Step::Next(regs(0x2222, BASE + 16, BASE + 0x10)));
    assert_eq!(step(0x1180), Step::Stop(StopReason::NoInfo));
}

/// `pac-ret` code signs LR before saving it: the signed record matches the signed LR, and
/// the caller's PC is the stripped address; above frame 0 (no LR) the chain is followed and
/// stripped too.
#[test]
fn aarch64_signed_return_addresses_are_stripped() {
    let mut words = [0u64; 8];
    words[0] = BASE + 0x20;
    words[1] = 0x2222 | SIGNATURE;
    words[4] = 0;
    words[5] = 0x3333 | SIGNATURE;
    let stack = FakeStack::new(&words);
    let signed = with_lr(0x1111, BASE, BASE, 0x2222 | SIGNATURE);
    let Step::Next(caller) = frame_pointer_step(&signed, Arch::Aarch64, false, true, |a| stack.read(a)) else {
        panic!("frame 0 with its own signed record");
    };
    assert_eq!(caller, regs(0x2222, BASE + 16, BASE + 0x20));
    assert_eq!(
        frame_pointer_step(&caller, Arch::Aarch64, true, false, |a| stack.read(a)),
        Step::Next(regs(0x3333, BASE + 0x30, 0))
    );
    // x86-64 strips nothing: the word is the address.
    assert_eq!(
        frame_pointer_step(&caller, Arch::X86_64, true, false, |a| stack.read(a)),
        Step::Next(regs(0x3333 | SIGNATURE, BASE + 0x30, 0))
    );
}

/// On aarch64 a frame the fallback found has only a lower bound of its SP (`fp + 16`: the
/// record is at the bottom of the frame), so a table rule with its CFA on SP is refused; one
/// on FP, an outermost rule, and every rule of a frame a table found are applied; x86-64's
/// `fp + 16` is exact and its rules are always applied.
#[test]
fn aarch64_frame_found_by_frame_pointers_needs_a_cfa_on_fp() {
    let mut words = [0u64; 8];
    words[2] = BASE + 0x30; // a record at BASE + 0x10: saved FP, then the return address
    words[3] = 0x4444;
    let stack = FakeStack::new(&words);
    let read = |a| stack.read(a);
    // Found by the fallback: SP = the callee's FP + 16 (a lower bound), FP its own record.
    let found = regs(0x2222, BASE, BASE + 0x10);
    let on_sp = rule(KIND_CFA, REG_SP, 32, FLAG_RA_SAVED | FLAG_FP_SAVED, -8, -16);
    let on_fp = rule(KIND_CFA, REG_FP, 16, FLAG_RA_SAVED | FLAG_FP_SAVED, -8, -16);
    let outermost = rule(KIND_OUTERMOST, 0, 0, 0, 0, 0);
    assert_eq!(
        table_step(Arch::Aarch64, true, &on_sp, &found, false, read),
        Step::Stop(StopReason::CfaRegister)
    );
    assert_eq!(
        table_step(Arch::Aarch64, true, &on_fp, &found, false, read),
        Step::Next(regs(0x4444, BASE + 0x20, BASE + 0x30))
    );
    assert_eq!(
        table_step(Arch::Aarch64, true, &outermost, &found, false, read),
        Step::Stop(StopReason::Outermost)
    );
    assert_eq!(
        table_step(Arch::Aarch64, false, &on_sp, &found, false, read),
        step(&on_sp, &found, false, read)
    );
    assert_eq!(
        table_step(Arch::X86_64, true, &sp_rule(8), &found, false, read),
        step(&sp_rule(8), &found, false, read)
    );
}
