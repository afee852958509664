//! How to unwind a compiled Java method on x86-64, from its code and frame size, written as
//! `.eh_frame` for the JIT image ([`crate::jit::elf`]). C1 and C2 build one fixed frame
//! (`frame_bytes`: the return address, the caller's saved `rbp` below it, then the rest) and
//! keep no frame pointer of their own, so the body's rule is `CFA = rsp + frame_bytes`,
//! return address at `CFA - 8`, `rbp` at `CFA - 16`. Around it:
//!
//! - the prologue, up to the blob's frame-complete offset, ends in one of two shapes, checked
//!   against the frame size: `push rbp; sub rsp, frame_bytes - 16` (C1, and C2 with a stack
//!   bang) or `sub rsp, frame_bytes - 8; mov [rsp + frame_bytes - 16], rbp` (C2 without one),
//!   followed in JDK 25 by the nmethod entry barrier (`cmp [r15 + d8], imm32` and a branch),
//!   which runs in the built frame.
//!   Everything before it (the inline-cache check, the stack bang, a `jmp` patched over a
//!   method no longer entered) runs with `CFA = rsp + 8`;
//! - each epilogue, `add rsp, frame_bytes - 16; pop rbp`, then the return's safepoint poll
//!   (`cmp rsp, [r15 + d]; ja stub`, a 32- or 8-bit `d`) and `ret`, or a `jmp` out: `CFA = rsp + 16` after the
//!   `add`, `rsp + 8` after the `pop`. The poll's out-of-line stub (`mov r10, imm64;
//!   mov [r15 + d], r10; jmp`) runs after the `pop` as well;
//! - code that matches none of this in a prologue, an epilogue whose end is not one of those
//!   shapes, and the stubs after the body (exception and deoptimization handlers) get no rule:
//!   the walk's frame-pointer fallback then takes them, and the stack ends there
//!   (`crate::jit::java`).
//!
//! Pure: code in, rules and bytes out.

/// The rule in force over a range of a method's code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// `CFA = rsp + cfa`; `rbp` saved at `CFA - 16` or not touched yet.
    Frame { cfa: u32, rbp_saved: bool },
}

const ENTRY: Rule = Rule::Frame {
    cfa: 8,
    rbp_saved: false,
};
const PUSHED: Rule = Rule::Frame {
    cfa: 16,
    rbp_saved: true,
};

/// The rules over `code` (`(start, end, rule)` by offset, in order, not overlapping; gaps have
/// none), for a compiled method whose frame is `frame_bytes`, complete at `frame_complete`,
/// whose body (before its stubs) ends at `body_end`.
pub fn rules(
    code: &[u8],
    frame_bytes: u32,
    frame_complete: Option<u32>,
    body_end: Option<u32>,
) -> Vec<(u32, u32, Rule)> {
    let mut out = Vec::new();
    let len = code.len() as u32;
    let body_end = body_end.unwrap_or(len).min(len);
    let Some(complete) = frame_complete.filter(|&c| c <= body_end) else {
        return out;
    };
    if frame_bytes < 16 || !frame_bytes.is_multiple_of(8) {
        return out;
    }
    let full = Rule::Frame {
        cfa: frame_bytes,
        rbp_saved: true,
    };
    // The prologue, and the entry barrier some versions put after it (with the frame built).
    let head = without_entry_barrier(&code[..complete as usize]);
    if (head.len() as u32) < complete {
        push_range(&mut out, head.len() as u32, complete, full);
    }
    let built = head.len() as u32;
    let mut prologue = Vec::new();
    if let Some(push) = ends_with_push_sub(head, frame_bytes - 16) {
        push_range(&mut prologue, 0, push, ENTRY);
        push_range(&mut prologue, push, built, PUSHED);
    } else if let Some((sub_start, sub_end)) = ends_with_sub_mov(head, frame_bytes) {
        push_range(&mut prologue, 0, sub_start, ENTRY);
        let unsaved = Rule::Frame {
            cfa: frame_bytes,
            rbp_saved: false,
        };
        push_range(&mut prologue, sub_end, built, unsaved);
    }
    if prologue.is_empty() {
        // Not a known prologue: nothing before the frame is complete has a rule.
        out.clear();
    }
    prologue.append(&mut out);
    out = prologue;
    // The body, with its epilogues cut out.
    let mut at = complete;
    let mut i = complete as usize;
    while i < body_end as usize {
        let Some((add_end, pop_end, tail_end)) = epilogue(code, i, frame_bytes - 16, body_end as usize) else {
            if let Some(end) = poll_stub(code, i, body_end as usize) {
                push_range(&mut out, at, i as u32, full);
                push_range(&mut out, i as u32, end as u32, ENTRY);
                at = end as u32;
                i = end;
                continue;
            }
            i += 1;
            continue;
        };
        push_range(&mut out, at, add_end as u32, full);
        push_range(&mut out, add_end as u32, pop_end as u32, PUSHED);
        if let Some(tail_end) = tail_end {
            push_range(&mut out, pop_end as u32, tail_end as u32, ENTRY);
            at = tail_end as u32;
            i = tail_end;
        } else {
            // An end not known: no rule up to the next instruction known to be in the frame,
            // which is not known either; the rest of the body gets none.
            return out;
        }
    }
    push_range(&mut out, at, body_end, full);
    out
}

/// Append `[start, end)` under `rule` (joined to the range before when it ends there under the
/// same rule).
fn push_range(out: &mut Vec<(u32, u32, Rule)>, start: u32, end: u32, rule: Rule) {
    if start >= end {
        return;
    }
    match out.last_mut() {
        Some(last) if last.1 == start && last.2 == rule => last.1 = end,
        _ => out.push((start, end, rule)),
    }
}

/// `head` without the nmethod entry barrier at its end, if it has one (JDK 25): C2's
/// `cmp dword [r15 + d8], imm32; jne rel32`, or C1's `cmp dword [r15 + d8], imm32; je +5;
/// call rel32`.
fn without_entry_barrier(head: &[u8]) -> &[u8] {
    let n = head.len();
    let cmp = |at: usize| head.get(at..at + 3) == Some(&[0x41, 0x81, 0x7f][..]);
    if n >= 14 && cmp(n - 14) && head[n - 6..n - 4] == [0x0f, 0x85] {
        return &head[..n - 14];
    }
    if n >= 15 && cmp(n - 15) && head[n - 7..n - 4] == [0x74, 0x05, 0xe8] {
        return &head[..n - 15];
    }
    head
}

/// `push rbp; sub rsp, imm` with `imm == sub` at the end of `head`: where the `push` ends.
fn ends_with_push_sub(head: &[u8], sub: u32) -> Option<u32> {
    let n = head.len();
    if sub == 0 {
        return (n >= 1 && head[n - 1] == 0x55).then_some(n as u32);
    }
    if sub < 128 && n >= 5 && head[n - 5..n - 1] == [0x55, 0x48, 0x83, 0xec] && u32::from(head[n - 1]) == sub {
        return Some((n - 4) as u32);
    }
    if n >= 8
        && head[n - 8..n - 4] == [0x55, 0x48, 0x81, 0xec]
        && u32::from_le_bytes(head[n - 4..].try_into().ok()?) == sub
    {
        return Some((n - 7) as u32);
    }
    None
}

/// `sub rsp, frame - 8; mov [rsp + frame - 16], rbp` at the end of `head`: where the `sub`
/// starts and ends.
fn ends_with_sub_mov(head: &[u8], frame: u32) -> Option<(u32, u32)> {
    let n = head.len();
    let slot = frame - 16;
    let mov = if slot < 128 {
        let m = [0x48, 0x89, 0x6c, 0x24, slot as u8];
        (n >= 5 && head[n - 5..] == m).then_some(5)?
    } else {
        let mut m = vec![0x48, 0x89, 0xac, 0x24];
        m.extend_from_slice(&slot.to_le_bytes());
        (n >= 8 && head[n - 8..] == m[..]).then_some(8)?
    };
    let before = &head[..n - mov];
    let b = before.len();
    let sub = frame - 8;
    if sub < 128 && b >= 4 && before[b - 4..b - 1] == [0x48, 0x83, 0xec] && u32::from(before[b - 1]) == sub {
        return Some(((b - 4) as u32, b as u32));
    }
    if b >= 7
        && before[b - 7..b - 4] == [0x48, 0x81, 0xec]
        && u32::from_le_bytes(before[b - 4..].try_into().ok()?) == sub
    {
        return Some(((b - 7) as u32, b as u32));
    }
    None
}

/// An epilogue starting at `i` (`add rsp, add; pop rbp`, or a bare `pop rbp` when `add` is 0
/// and a known end follows): where the `add` and the `pop` end, and where what follows the
/// `pop` ends (`None`: not a known shape).
fn epilogue(code: &[u8], i: usize, add: u32, end: usize) -> Option<(usize, usize, Option<usize>)> {
    let code = &code[..end];
    let add_end = if add == 0 {
        i
    } else if add < 128 && code.get(i..i + 4)? == [0x48, 0x83, 0xc4, add as u8] {
        i + 4
    } else if code.get(i..i + 3)? == [0x48, 0x81, 0xc4]
        && u32::from_le_bytes(code.get(i + 3..i + 7)?.try_into().ok()?) == add
    {
        i + 7
    } else {
        return None;
    };
    if *code.get(add_end)? != 0x5d {
        return None;
    }
    let pop_end = add_end + 1;
    let tail = return_tail(code, pop_end);
    if add == 0 && tail.is_none() {
        return None; // a lone `pop rbp` proves nothing
    }
    Some((add_end, pop_end, tail))
}

/// The end of a known return after an epilogue's `pop rbp`: `ret`; the safepoint poll
/// (`cmp rsp, [r15 + d32]` or `[r15 + d8]`; `ja rel32`) then `ret`; or a `jmp rel32` out.
fn return_tail(code: &[u8], at: usize) -> Option<usize> {
    let poll = |modrm: u8, disp: usize| {
        code.get(at..at + 3) == Some(&[0x49, 0x3b, modrm][..])
            && code.get(at + 3 + disp..at + 5 + disp) == Some(&[0x0f, 0x87][..])
            && code.get(at + 9 + disp) == Some(&0xc3)
    };
    match *code.get(at)? {
        0xc3 => Some(at + 1),
        0xe9 => (code.len() >= at + 5).then_some(at + 5),
        0x49 if poll(0xa7, 4) => Some(at + 14),
        0x49 if poll(0x67, 1) => Some(at + 11),
        _ => None,
    }
}

/// The return poll's out-of-line stub at `i` (`mov r10, imm64; mov [r15 + d32], r10; jmp
/// rel32`): where it ends.
fn poll_stub(code: &[u8], i: usize, end: usize) -> Option<usize> {
    let code = &code[..end];
    (code.get(i..i + 2)? == [0x49, 0xba]
        && code.get(i + 10..i + 13)? == [0x4d, 0x89, 0x97]
        && *code.get(i + 17)? == 0xe9
        && code.len() >= i + 22)
        .then_some(i + 22)
}

const DW_CFA_ADVANCE_LOC1: u8 = 0x02;
const DW_CFA_ADVANCE_LOC2: u8 = 0x03;
const DW_CFA_ADVANCE_LOC4: u8 = 0x04;
const DW_CFA_DEF_CFA_OFFSET: u8 = 0x0e;
const DW_CFA_OFFSET_RBP: u8 = 0x80 | 6;
const DW_CFA_RESTORE_RBP: u8 = 0xc0 | 6;

/// `.eh_frame` for `rules` of code at `code_addr`, the section taken to be at `at` (an FDE
/// per run of ranges without a gap; its start PC-relative): a CIE, the FDEs, no terminator.
pub fn eh_frame(rules: &[(u32, u32, Rule)], code_addr: u64, at: u64) -> Vec<u8> {
    let mut out = Vec::new();
    // CIE: version 1, "zR", code alignment 1, data alignment -8, return address register 16,
    // FDE addresses pcrel|sdata4; CFA = rsp + 8, return address at CFA - 8.
    let mut cie = vec![0, 0, 0, 0, 1, b'z', b'R', 0, 1, 0x78, 16, 1, 0x1b];
    cie.extend_from_slice(&[0x0c, 7, 8, 0x80 | 16, 1]);
    entry(&mut out, cie);
    let mut i = 0;
    while i < rules.len() {
        let mut j = i + 1;
        while j < rules.len() && rules[j].0 == rules[j - 1].1 {
            j += 1;
        }
        let run = &rules[i..j];
        let start = run[0].0;
        let end = run[j - i - 1].1;
        let mut fde = Vec::new();
        let here = out.len();
        // The CIE pointer: from this field back to the CIE (at 0).
        fde.extend_from_slice(&((here + 4) as u32).to_le_bytes());
        let field = at + here as u64 + 8;
        let pc = (code_addr + u64::from(start)).wrapping_sub(field) as i64 as i32;
        fde.extend_from_slice(&pc.to_le_bytes());
        fde.extend_from_slice(&(end - start).to_le_bytes());
        fde.push(0); // no augmentation data
        let mut loc = start;
        let mut state = ENTRY;
        for &(s, _, rule) in run {
            advance(&mut fde, s - loc);
            loc = s;
            let (
                Rule::Frame { cfa, rbp_saved },
                Rule::Frame {
                    cfa: was,
                    rbp_saved: had,
                },
            ) = (rule, state);
            if cfa != was {
                fde.push(DW_CFA_DEF_CFA_OFFSET);
                uleb(&mut fde, u64::from(cfa));
            }
            if rbp_saved != had {
                if rbp_saved {
                    fde.extend_from_slice(&[DW_CFA_OFFSET_RBP, 2]);
                } else {
                    fde.push(DW_CFA_RESTORE_RBP);
                }
            }
            state = rule;
        }
        entry(&mut out, fde);
        i = j;
    }
    out
}

/// Append one entry (length, then `body`, padded with `DW_CFA_nop` to a multiple of 8).
fn entry(out: &mut Vec<u8>, mut body: Vec<u8>) {
    while !(body.len() + 4).is_multiple_of(8) {
        body.push(0);
    }
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
}

fn advance(out: &mut Vec<u8>, delta: u32) {
    match delta {
        0 => {}
        1..0x40 => out.push(0x40 | delta as u8),
        0x40..0x100 => out.extend_from_slice(&[DW_CFA_ADVANCE_LOC1, delta as u8]),
        0x100..0x10000 => {
            out.push(DW_CFA_ADVANCE_LOC2);
            out.extend_from_slice(&(delta as u16).to_le_bytes());
        }
        _ => {
            out.push(DW_CFA_ADVANCE_LOC4);
            out.extend_from_slice(&delta.to_le_bytes());
        }
    }
}

fn uleb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}
