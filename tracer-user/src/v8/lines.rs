//! Where a JavaScript frame is in its function ([`super::code`]): the line running in it,
//! and the functions compiled code inlined there, each a frame of its own. The code found for
//! a PC, a function's bytecode positions and a script's lines are cached per process and
//! read again once [`RECHECK_NS`] old (a function's code is replaced when it is optimized
//! again or thrown away; what is found is checked to be the frame's function's, or no line
//! is given).

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

use tracer_common::frame_word::{BCI_MASK, BCI_SHIFT, WORD_ADDR_MASK};

use super::{
    Inner, Proc, RECHECK_NS, V8, budget,
    code::{self, CompiledCode, Positions},
    read::JsFunction,
    timed,
};

/// Entries of each cache at most, all processes together (then it is emptied).
const MAX_ENTRIES: usize = 1 << 16;

/// Where a frame's PC is, as the walk found it.
#[derive(Clone, Copy, Debug)]
pub struct FrameAt {
    /// Its PC (a caller's: its return address less one).
    pub lookup: u64,
    /// Whether the PC is in code no object maps (V8's compiled code, or other JIT code).
    pub jit: bool,
    /// Whether it is the sampled frame (an interpreted one may not have saved its bytecode
    /// offset yet).
    pub sampled: bool,
}

/// What was read, or why it could not be.
type Known<T> = Result<Arc<T>, &'static str>;

/// A function's bytecode positions and its data word (`code::bytecode_positions`).
type Bytecode = (Positions, u64);

/// A script's source's address, where its lines start (`code::line_starts`), and when that
/// was checked.
type Script = (u64, Option<Arc<Vec<u32>>>, u64);

/// The caches of where frames are.
#[derive(Default)]
pub(super) struct Lines {
    /// Per process, the code found, by the start of its instructions, and when it was read.
    codes: HashMap<u32, BTreeMap<u64, (Arc<CompiledCode>, u64)>>,
    codes_len: usize,
    /// PCs where no code was found, why, and when.
    missing: HashMap<(u32, u64), (&'static str, u64)>,
    /// Per function (process and shared info): its bytecode's positions, and when read.
    bytecode: HashMap<(u32, u64), (Known<Bytecode>, u64)>,
    /// Per script: its source's address, where its lines start, and when that was checked.
    scripts: HashMap<(u32, u64), Script>,
    /// A function at a line (0: none): the function of that name, script and line.
    lined: HashMap<(u32, u32), u32>,
}

impl Lines {
    pub(super) fn forget(&mut self, pid: u32) {
        if let Some(codes) = self.codes.remove(&pid) {
            self.codes_len -= codes.len();
        }
        self.missing.retain(|&(p, _), _| p != pid);
        self.bytecode.retain(|&(p, _), _| p != pid);
        self.scripts.retain(|&(p, _), _| p != pid);
    }
}

impl V8 {
    /// The JavaScript frames a frame stands for, innermost first, into `out`: each a function
    /// at its running line (for [`V8::function`]) and whether it was inlined into the next.
    /// `word` is the kernel's for the frame (its function's shared info, maybe its bytecode
    /// offset), `at` where its PC is. False (nothing added) when the frame's function cannot
    /// be named; a frame whose line cannot be read is named without one (counted).
    pub fn frames(&self, pid: u32, word: u64, at: FrameAt, time_ns: u64, out: &mut Vec<(u32, bool)>) -> bool {
        let shared = word & WORD_ADDR_MASK;
        let Some(own) = self.frame(pid, shared, time_ns) else {
            return false;
        };
        let Some(proc) = self.procs.get(&pid) else {
            return false;
        };
        let chain = {
            let mut inner = self.inner.borrow_mut();
            whereabouts(&mut inner, proc, pid, word, at, time_ns)
        };
        let chain_known = chain.is_ok();
        let chain = match chain {
            Ok(chain) => chain,
            Err(reason) => {
                let mut inner = self.inner.borrow_mut();
                *inner.stats.unlined_by_reason.entry(reason).or_default() += 1;
                vec![(shared, None)]
            }
        };
        let last = chain.len() - 1;
        for (i, &(function_shared, offset)) in chain.iter().enumerate() {
            let function = if function_shared == shared {
                Some(own)
            } else {
                self.frame(pid, function_shared, time_ns)
            };
            let Some(function) = function else { continue };
            let mut inner = self.inner.borrow_mut();
            let line = match offset {
                Some(o) => line_of(&mut inner, proc, pid, function_shared, o, time_ns),
                None => Err("no_position"),
            };
            let line = match line {
                Ok(line) => Some(line),
                Err(reason) => {
                    // Counted once per frame (a frame without a position is counted above).
                    if chain_known {
                        *inner.stats.unlined_by_reason.entry(reason).or_default() += 1;
                    }
                    None
                }
            };
            inner.stats.lined += u64::from(line.is_some());
            inner.stats.inlined += u64::from(i < last);
            if i < last {
                // Counted as a frame by `frame`, but for its own: not this one's.
                inner.stats.frames += u64::from(function_shared == shared);
            }
            let lined = with_line(&mut inner, function, line.unwrap_or(0));
            out.push((lined, i < last));
        }
        true
    }
}

/// The functions running in a frame, innermost first, each with its character offset in its
/// script (`None`: not known); or why it is not known.
fn whereabouts(
    inner: &mut Inner,
    proc: &Proc,
    pid: u32,
    word: u64,
    at: FrameAt,
    time_ns: u64,
) -> Result<Vec<(u64, Option<u64>)>, &'static str> {
    let shared = word & WORD_ADDR_MASK;
    // Compiled code: where it is in it. (Its offset slot is not the interpreter's, or, in
    // code entered from the interpreter in the middle of a loop, an offset no longer true.)
    if at.jit {
        let code = code_for(inner, proc, pid, at.lookup, time_ns)?;
        if code.baseline {
            // At the bytecode its instructions are for, if the function's baseline code is
            // this one.
            let Some(map) = &code.baseline_map else {
                return Err("baseline");
            };
            let known = bytecode_for(inner, proc, pid, shared, time_ns)?;
            let (positions, function_data) = &*known;
            if *function_data != code.code {
                return Err("code_of_another");
            }
            let offset = code::baseline_offset(map, at.lookup - code.start).ok_or("no_bytecode_offset")?;
            // (The table keys a bytecode one past its index: `code::bytecode_offset`.)
            let position = code::position_at(positions, offset + 1).ok_or("no_position")?;
            return Ok(vec![(shared, code::script_offset(position))]);
        }
        if code.shared != shared {
            return Err("code_of_another");
        }
        return code.chain(at.lookup - code.start).ok_or("no_position");
    }
    // An interpreted frame: at its bytecode offset, saved by the time it calls.
    if at.sampled {
        return Err("sampled_frame");
    }
    let smi = (word >> BCI_SHIFT & BCI_MASK)
        .checked_sub(1)
        .ok_or("no_bytecode_offset")?;
    let offset = code::bytecode_offset(&proc.layout, smi).ok_or("no_bytecode_offset")?;
    let known = bytecode_for(inner, proc, pid, shared, time_ns)?;
    let position = code::position_at(&known.0, offset).ok_or("no_position")?;
    Ok(vec![(shared, code::script_offset(position))])
}

/// The compiled code holding `pc` in `pid`, cached.
fn code_for(
    inner: &mut Inner,
    proc: &Proc,
    pid: u32,
    pc: u64,
    time_ns: u64,
) -> Result<Arc<CompiledCode>, &'static str> {
    let fresh = |read_ns: u64| time_ns.saturating_sub(read_ns) < RECHECK_NS;
    if let Some((_, (code, read_ns))) = inner.lines.codes.get(&pid).and_then(|c| c.range(..=pc).next_back())
        && pc < code.end
        && fresh(*read_ns)
    {
        return Ok(Arc::clone(code));
    }
    if let Some(&(reason, when)) = inner.lines.missing.get(&(pid, pc))
        && fresh(when)
    {
        return Err(reason);
    }
    budget(inner).map_err(|_| "over_budget")?;
    let layout = Arc::clone(&proc.layout);
    let found = timed(inner, pid, proc.uid, move |read| code::code_at(&layout, pc, read));
    let lines = &mut inner.lines;
    match found {
        Ok(code) => {
            let code = Arc::new(code);
            if lines.codes_len >= MAX_ENTRIES {
                lines.codes.clear();
                lines.codes_len = 0;
            }
            let codes = lines.codes.entry(pid).or_default();
            // What it replaces: code read before at the same place.
            let stale: Vec<u64> = codes
                .range(..code.end)
                .rev()
                .take_while(|(_, (c, _))| c.end > code.start)
                .map(|(&start, _)| start)
                .collect();
            lines.codes_len -= stale.len();
            stale.iter().for_each(|s| drop(codes.remove(s)));
            codes.insert(code.start, (Arc::clone(&code), time_ns));
            lines.codes_len += 1;
            Ok(code)
        }
        Err(error) => {
            if lines.missing.len() >= MAX_ENTRIES {
                lines.missing.clear();
            }
            lines.missing.insert((pid, pc), (error.reason(), time_ns));
            Err(error.reason())
        }
    }
}

/// The positions of the bytecode of the function whose shared info is `shared`, and its data
/// word ([`code::bytecode_positions`]), cached.
fn bytecode_for(inner: &mut Inner, proc: &Proc, pid: u32, shared: u64, time_ns: u64) -> Known<Bytecode> {
    if let Some((positions, read_ns)) = inner.lines.bytecode.get(&(pid, shared))
        && time_ns.saturating_sub(*read_ns) < RECHECK_NS
    {
        return positions.clone();
    }
    budget(inner).map_err(|_| "over_budget")?;
    let layout = Arc::clone(&proc.layout);
    let read = timed(inner, pid, proc.uid, move |read| {
        code::bytecode_positions(&layout, shared, read)
    });
    let positions = read.map(Arc::new).map_err(|e| e.reason());
    if inner.lines.bytecode.len() >= MAX_ENTRIES {
        inner.lines.bytecode.clear();
    }
    inner.lines.bytecode.insert((pid, shared), (positions.clone(), time_ns));
    positions
}

/// The line of character `offset` in the script of the function whose shared info is
/// `shared` (named and cached by [`V8::frame`]), or why it is not known.
fn line_of(
    inner: &mut Inner,
    proc: &Proc,
    pid: u32,
    shared: u64,
    offset: u64,
    time_ns: u64,
) -> Result<u32, &'static str> {
    let script = inner.cache.get(&(pid, shared)).ok_or("no_script")?.identity[1];
    let layout = Arc::clone(&proc.layout);
    let cached = inner.lines.scripts.get(&(pid, script)).cloned();
    let starts = match cached {
        Some((_, starts, checked)) if time_ns.saturating_sub(checked) < RECHECK_NS => starts,
        cached => {
            budget(inner).map_err(|_| "over_budget")?;
            let check = Arc::clone(&layout);
            let source = timed(inner, pid, proc.uid, move |read| {
                let field = check.script_source;
                super::read::Reader { layout: &check, read }.field(script, field)
            })
            .map_err(|e| e.reason())?;
            let starts = match cached {
                // The same source: its lines are the same.
                Some((was, starts, _)) if was == source => starts,
                _ => {
                    budget(inner).map_err(|_| "over_budget")?;
                    let read = timed(inner, pid, proc.uid, move |read| {
                        code::line_starts(&layout, script, read)
                    });
                    read.map_err(|e| e.reason())?.map(Arc::new)
                }
            };
            if inner.lines.scripts.len() >= MAX_ENTRIES {
                inner.lines.scripts.clear();
            }
            inner
                .lines
                .scripts
                .insert((pid, script), (source, starts.clone(), time_ns));
            starts
        }
    };
    code::line_of(&starts.ok_or("source_not_flat")?, offset).ok_or("no_position")
}

/// Function `function` at line `line` (0: none): the function of its name and script there.
fn with_line(inner: &mut Inner, function: u32, line: u32) -> u32 {
    if let Some(&lined) = inner.lines.lined.get(&(function, line)) {
        return lined;
    }
    let Some(named) = inner.functions.get(function) else {
        return function;
    };
    let lined = JsFunction { line, ..named.clone() };
    let Ok(index) = inner.functions.intern(lined) else {
        return function;
    };
    if inner.lines.lined.len() >= MAX_ENTRIES {
        inner.lines.lined.clear();
    }
    inner.lines.lined.insert((function, line), index);
    index
}
