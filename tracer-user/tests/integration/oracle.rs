//! An unwinder-independent judge of user stacks: each object's machine code as `objdump -d`
//! decodes it (function starts from its symbols, every call instruction with its end and its
//! target), and a stack is *exact* when every caller frame's return address directly follows a
//! call instruction whose target is the callee (a direct call to the callee's function, to a
//! PLT stub for a callee in another object, to a function that tail-jumps to the callee (in up to four jumps), or an
//! indirect call), and the outermost frame is `_start`. Nothing here reads unwind tables or the
//! tracer's symbol names.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The longest chain of tail jumps from a call's target to its callee that the judge follows.
const TAIL_CHAIN: usize = 4;

/// What a call instruction calls.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    /// `call ADDR <name>`: a direct call.
    Direct(u64),
    /// `call *...`: through a register or memory.
    Indirect,
}

/// One object's code, as objdump decodes it.
pub struct Code {
    /// (start, name) of every function and PLT stub, sorted by start.
    functions: Vec<(u64, String)>,
    /// The end address of every call instruction (a return address), and what it calls.
    calls: HashMap<u64, Target>,
    /// Direct `jmp` targets out of each function (its start): tail calls.
    tail_jumps: HashMap<u64, Vec<u64>>,
    /// Functions (their starts) with an indirect `jmp` or a `jmp` to a PLT stub: tail calls
    /// whose target only the run time knows (vtables, IFUNCs).
    dynamic_tail: std::collections::HashSet<u64>,
}

impl Code {
    /// Disassemble `path` (ELF virtual addresses).
    pub fn of(path: &Path) -> Code {
        let out = Command::new("objdump")
            .args(["-d", "-w"])
            .arg(path)
            .output()
            .expect("run objdump");
        assert!(out.status.success(), "objdump -d {} failed", path.display());
        let mut code = Code::parse_with(&String::from_utf8_lossy(&out.stdout), debug_symbols(path));
        // A stripped executable names no `_start`: it is the ELF entry, by definition.
        if let Some(entry) = entry(path)
            && !code.functions.iter().any(|(_, name)| name == "_start")
        {
            let at = code.functions.partition_point(|(start, _)| *start < entry);
            if code.functions.get(at).is_some_and(|(start, _)| *start == entry) {
                code.functions[at].1 = "_start".to_owned();
            } else {
                code.functions.insert(at, (entry, "_start".to_owned()));
            }
        }
        code
    }

    /// Parse `objdump -d -w` output: `ADDR <NAME>:` headers and `ADDR:\tBYTES\tMNEMONIC OPERANDS` lines.
    #[cfg(test)]
    fn parse(text: &str) -> Code {
        Code::parse_with(text, Vec::new())
    }

    /// [`Code::parse`], with `symbols` (start, name) as functions besides objdump's.
    fn parse_with(text: &str, symbols: Vec<(u64, String)>) -> Code {
        let mut functions = symbols;
        let mut calls = HashMap::new();
        // (address, direct target, target known only at run time) of every jmp.
        let mut jumps = Vec::new();
        for line in text.lines() {
            if let Some(header) = line.strip_suffix(">:") {
                if let Some((addr, name)) = header.split_once(" <")
                    && let Ok(addr) = u64::from_str_radix(addr.trim(), 16)
                {
                    functions.push((addr, name.to_owned()));
                }
                continue;
            }
            let mut fields = line.splitn(3, '\t');
            let (Some(addr), Some(bytes), Some(insn)) = (fields.next(), fields.next(), fields.next()) else {
                continue;
            };
            let Ok(addr) = u64::from_str_radix(addr.trim().trim_end_matches(':'), 16) else {
                continue;
            };
            let len = bytes.split_whitespace().count() as u64;
            let mut words = insn.split_whitespace();
            let mnemonic = words.next().unwrap_or_default();
            let operand = words.next().unwrap_or_default();
            let direct = u64::from_str_radix(operand, 16).ok();
            if mnemonic.starts_with("call") {
                let target = match direct {
                    Some(t) if !operand.starts_with('*') => Target::Direct(t),
                    _ => Target::Indirect,
                };
                calls.insert(addr + len, target);
            } else if mnemonic.starts_with("jmp") {
                let target = direct.filter(|_| !operand.starts_with('*'));
                jumps.push((addr, target, target.is_none() || insn.contains("@plt>")));
            }
        }
        // Objects stripped to their dynamic symbols (libc) hide internal functions: every direct
        // call target starts a function too.
        functions.sort();
        let mut targets: Vec<u64> = calls
            .values()
            .filter_map(|t| match t {
                Target::Direct(t) => Some(*t),
                Target::Indirect => None,
            })
            .collect();
        targets.sort_unstable();
        targets.dedup();
        let named = functions.clone();
        for t in targets {
            let i = named.partition_point(|(start, _)| *start <= t);
            match i.checked_sub(1).map(|i| &named[i]) {
                Some((start, _)) if *start == t => {}
                Some((start, name)) => functions.push((t, format!("{name}+{:#x}", t - start))),
                None => functions.push((t, format!("{t:#x}"))),
            }
        }
        functions.sort();
        let mut code = Code {
            functions,
            calls,
            tail_jumps: HashMap::new(),
            dynamic_tail: std::collections::HashSet::new(),
        };
        // Jumps belong to the functions as finally delimited.
        for (addr, target, dynamic) in jumps {
            let Some((start, _)) = code.function(addr) else {
                continue;
            };
            if let Some(t) = target {
                code.tail_jumps.entry(start).or_default().push(t);
            }
            if dynamic {
                code.dynamic_tail.insert(start);
            }
        }
        code
    }

    /// Whether the function at `start` reaches the function at `callee` through a chain of at
    /// most [`TAIL_CHAIN`] direct jumps (bash's `set_default_lang` jumps to `set_lang`, which
    /// jumps to a static function; glibc's `_setjmp` to `__sigsetjmp` to `__sigjmp_save`), each
    /// into a function's start or into its body (ld.so's mempcpy jumps past the first
    /// instruction of the memmove that follows it).
    fn tail_calls(&self, start: u64, callee: u64) -> bool {
        let (mut seen, mut next) = (std::collections::HashSet::from([start]), vec![start]);
        for _ in 0..TAIL_CHAIN {
            let mut reached = Vec::new();
            for from in next {
                for &j in self.tail_jumps.get(&from).into_iter().flatten() {
                    let Some((to, _)) = self.function(j) else { continue };
                    if to == callee {
                        return true;
                    }
                    if seen.insert(to) {
                        reached.push(to);
                    }
                }
            }
            next = reached;
        }
        false
    }

    /// The function (start, name) that contains `addr`.
    pub fn function(&self, addr: u64) -> Option<(u64, &str)> {
        let i = self.functions.partition_point(|(start, _)| *start <= addr);
        let (start, name) = self.functions.get(i.checked_sub(1)?)?;
        Some((*start, name.as_str()))
    }
}

/// The kernel's vDSO (the same image in every process; `[vdso]` in profiles, where a launcher
/// that asks the time is sampled), copied out of this process into a file objdump can read
/// (removed when dropped).
fn vdso_image() -> tempfile::NamedTempFile {
    use std::io::{Read as _, Seek as _};
    let maps = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
    let line = maps
        .lines()
        .find(|l| l.ends_with("[vdso]"))
        .expect("this process maps a vDSO");
    let (start, end) = line
        .split_whitespace()
        .next()
        .and_then(|range| range.split_once('-'))
        .and_then(|(a, b)| Some((u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?)))
        .expect("the vDSO's range");
    let mut mem = std::fs::File::open("/proc/self/mem").expect("open /proc/self/mem");
    mem.seek(std::io::SeekFrom::Start(start)).expect("seek to the vDSO");
    let mut image = vec![0; (end - start) as usize];
    mem.read_exact(&mut image).expect("read the vDSO");
    let file = tempfile::Builder::new()
        .prefix("vdso-")
        .tempfile()
        .expect("a file for the vDSO");
    std::fs::write(file.path(), image).expect("write the vDSO");
    file
}

/// The entry point of the ELF executable `path`; none for a shared library (a `SONAME`), whose
/// entry, if any, is not where its threads start (libc's prints its version).
fn entry(path: &Path) -> Option<u64> {
    let out = Command::new("readelf").args(["-h", "-d"]).arg(path).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    if text.contains("(SONAME)") {
        return None;
    }
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Entry point address:"))?;
    let entry = u64::from_str_radix(line.trim().strip_prefix("0x")?, 16).ok()?;
    (entry != 0).then_some(entry)
}

/// The function symbols (start, name) of `path`'s separate debug file found by its build-id
/// under `/usr/lib/debug/.build-id/` (libc6-dbg has ld.so's: the stripped loader names none of
/// its internal functions, `_start` included), none without one.
fn debug_symbols(path: &Path) -> Vec<(u64, String)> {
    let Ok(notes) = Command::new("readelf").arg("-n").arg(path).output() else {
        return Vec::new();
    };
    let notes = String::from_utf8_lossy(&notes.stdout);
    let Some(id) = notes.lines().find_map(|l| l.trim().strip_prefix("Build ID: ")) else {
        return Vec::new();
    };
    if id.len() < 3 {
        return Vec::new();
    }
    let debug = format!("/usr/lib/debug/.build-id/{}/{}.debug", &id[..2], &id[2..]);
    let Ok(out) = Command::new("nm").arg("--defined-only").arg(&debug).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (addr, kind, name) = (f.next()?, f.next()?, f.next()?);
            if !matches!(kind, "t" | "T" | "i" | "W" | "w") {
                return None;
            }
            Some((u64::from_str_radix(addr, 16).ok()?, name.to_owned()))
        })
        .collect()
}

/// A user frame: the object it is in and its object-relative address (the sampled PC for the
/// innermost frame, a return address minus one for the others).
#[derive(Clone, Debug)]
pub struct Frame {
    pub object: PathBuf,
    pub offset: u64,
}

/// The code of every object seen, disassembled once each.
#[derive(Default)]
pub struct Oracle {
    code: HashMap<PathBuf, Code>,
}

impl Oracle {
    fn code(&mut self, object: &Path) -> &Code {
        self.code.entry(object.to_owned()).or_insert_with(|| {
            if object.as_os_str() == "[vdso]" {
                Code::of(vdso_image().path())
            } else {
                Code::of(object)
            }
        })
    }

    /// The function names of a stack, as the disassembly names them (`?` outside any function).
    pub fn names(&mut self, stack: &[Frame]) -> Vec<String> {
        stack
            .iter()
            .map(|f| {
                self.code(&f.object)
                    .function(f.offset)
                    .map_or("?".to_owned(), |(_, n)| n.to_owned())
            })
            .collect()
    }

    /// `Ok` when `stack` (innermost first) is the true chain down to `_start`, else why not.
    pub fn judge(&mut self, stack: &[Frame]) -> Result<(), String> {
        let outermost = stack.last().ok_or("empty stack")?;
        let names = self.names(stack);
        if names.last().map(String::as_str) != Some("_start") {
            return Err(format!(
                "ends in {} at {}+{:#x}, not _start",
                names.last().map_or("?", |n| n),
                outermost.object.display(),
                outermost.offset
            ));
        }
        self.edges(stack)
    }

    /// `Ok` when every caller in `stack` (innermost first) called the frame below it: each
    /// return address follows a call whose target fits the callee (see [`Oracle::judge`]),
    /// whether or not the stack reaches `_start`; else the first edge that does not hold.
    pub fn edges(&mut self, stack: &[Frame]) -> Result<(), String> {
        let names = self.names(stack);
        for i in 1..stack.len() {
            let (callee, caller) = (&stack[i - 1], &stack[i]);
            let ret = caller.offset + 1;
            let callee_start = self
                .code(&callee.object)
                .function(callee.offset)
                .map(|(s, _)| s)
                .ok_or_else(|| format!("frame {} is in no function", i - 1))?;
            let same_object = caller.object == callee.object;
            let code = self.code(&caller.object);
            let target = code.calls.get(&ret).ok_or_else(|| {
                format!(
                    "frame {i} ({}+{ret:#x}, in {}) is not a return address",
                    caller.object.display(),
                    names[i]
                )
            })?;
            let Target::Direct(target) = *target else { continue };
            let target_name = code.function(target).map_or("?", |(_, n)| n);
            // A PLT stub is resolved at run time (through IFUNCs and aliases in libc, to its own
            // object or another): any callee is possible, unless the sample is in the stub.
            let fine = (same_object && target == callee_start)
                || target_name.ends_with("@plt")
                || code.dynamic_tail.contains(&target)
                || (same_object && code.tail_calls(target, callee_start));
            if !fine {
                return Err(format!(
                    "frame {i} ({}) calls {target_name}, but frame {} is in {}",
                    names[i],
                    i - 1,
                    names[i - 1]
                ));
            }
        }
        Ok(())
    }
}

/// The parser finds functions, call ends, targets and tail jumps (direct, indirect, through
/// the PLT) in objdump's layout.
#[test]
fn parses_objdump() {
    let text = "\n0000000000001000 <f>:\n    1000:\te8 fb 00 00 00       \tcall   1100 <g>\n    \
                1005:\tff d0                \tcall   *%rax\n    1007:\te9 f4 00 00 00       \tjmp    1100 <g>\n\n\
                0000000000001010 <h>:\n    1010:\tff e0                \tjmp    *%rax\n\n\
                0000000000001100 <g>:\n    1100:\tc3                   \tret\n";
    let code = Code::parse(text);
    assert_eq!(code.function(0x1006), Some((0x1000, "f")));
    assert_eq!(code.function(0x1100), Some((0x1100, "g")));
    assert_eq!(code.calls.get(&0x1005), Some(&Target::Direct(0x1100)));
    assert_eq!(code.calls.get(&0x1007), Some(&Target::Indirect));
    assert_eq!(code.tail_jumps.get(&0x1000), Some(&vec![0x1100]));
    assert!(!code.dynamic_tail.contains(&0x1000));
    assert!(code.dynamic_tail.contains(&0x1010));
}

/// A call's target reaches its callee through a chain of tail jumps, within the chain's bound.
#[test]
fn follows_chains_of_tail_jumps() {
    let text = "\n0000000000001000 <a>:\n    1000:\te9 fb 00 00 00       \tjmp    1100 <b>\n\n\
                0000000000001100 <b>:\n    1100:\te9 fb 00 00 00       \tjmp    1200 <c>\n\n\
                0000000000001200 <c>:\n    1200:\te9 fb 00 00 00       \tjmp    1300 <d>\n\n\
                0000000000001300 <d>:\n    1300:\te9 fb 00 00 00       \tjmp    1400 <e>\n\n\
                0000000000001400 <e>:\n    1400:\te9 fb 00 00 00       \tjmp    1500 <f>\n\n\
                0000000000001500 <f>:\n    1500:\tc3                   \tret\n";
    let code = Code::parse(text);
    assert!(code.tail_calls(0x1000, 0x1100));
    assert!(code.tail_calls(0x1000, 0x1400));
    assert!(!code.tail_calls(0x1000, 0x1500), "five jumps are beyond the bound");
    assert!(!code.tail_calls(0x1100, 0x1000), "jumps go one way");
}

/// The vDSO copied out of this process disassembles, with its exported functions.
#[test]
fn disassembles_the_vdso() {
    let code = Code::of(vdso_image().path());
    assert!(
        code.functions.iter().any(|(_, name)| name.contains("clock_gettime")),
        "no clock_gettime in the vDSO: {:?}",
        code.functions
    );
}
