//! Naming one address: blazesym's symbolizer as the tracer configures it, the functions it
//! finds at an address (inlined ones first), the kernel's build-id, and which
//! kernel functions are the tracer's own machinery. Used by the session's [`super::SymbolCache`]
//! and by offline symbolization.

use std::path::{Path, PathBuf};

use super::{
    go::GoText,
    named::{Named, symbol_name},
    plt::Plt,
};
use blazesym::symbolize::{
    CodeInfo, Input, Symbolized, Symbolizer,
    source::{Elf, Source},
};
use tracer_unwind::names::{capped, capped_str};

/// A blazesym symbolizer; inlined functions if `inline`.
pub(crate) fn symbolizer(inline: bool) -> Symbolizer {
    {
        // blazesym would demangle plain C names that happen to read as mangled types (`c` ->
        // `char`); names are demangled here, and only when they carry a mangling prefix.
        // Debug files are looked up through `.gnu_debuglink` and build-id in blazesym's default
        // directories, /usr/lib/debug and /lib/debug (and their `.build-id/`).
        Symbolizer::builder()
            .enable_demangling(false)
            .enable_code_info(true)
            .enable_inlined_fns(inline)
            .build()
    }
}

/// The functions at each of `offsets` (object-relative addresses) in the ELF file `file`
/// (`None`: no file, every frame unnamed), one entry per offset; an offset in one of the
/// object's PLT stubs (`plt`) is named after the stub, one in the Go code of its `.gopclntab`
/// (`go`) from that table.
pub(crate) fn name_in_file(
    symbolizer: &Symbolizer,
    file: Option<PathBuf>,
    plt: &Plt,
    go: Option<&GoText>,
    offsets: &[u64],
) -> Vec<Vec<Named>> {
    let mut named: Vec<Option<Vec<Named>>> = offsets
        .iter()
        .map(|&offset| match plt.name(offset) {
            Some(stub) => Some(vec![Named {
                symbol: Some(capped_str(stub).into_owned()),
                ..Named::default()
            }]),
            None => go.and_then(|go| go.name(offset)),
        })
        .collect();
    let rest: Vec<u64> = offsets
        .iter()
        .zip(&named)
        .filter(|(_, named)| named.is_none())
        .map(|(&offset, _)| offset)
        .collect();
    let mut from_file = symbolize_in_file(symbolizer, file, &rest).into_iter();
    for slot in named.iter_mut().filter(|named| named.is_none()) {
        *slot = Some(from_file.next().unwrap_or_else(|| vec![Named::default()]));
    }
    named.into_iter().map(Option::unwrap_or_default).collect()
}

/// The functions blazesym finds at each of `offsets` in `file` (see [`name_in_file`]).
fn symbolize_in_file(symbolizer: &Symbolizer, file: Option<PathBuf>, offsets: &[u64]) -> Vec<Vec<Named>> {
    if offsets.is_empty() {
        return Vec::new();
    }
    let symbolized = match file {
        Some(path) => {
            // DWARF nested deeper than blazesym's recursion takes is left unread: the file is
            // named from its symbol table (`symfiles::dwarf_usable`).
            let debug_syms = crate::symfiles::dwarf_usable(&path);
            let mut elf = Elf::new(path.clone());
            elf.debug_syms = debug_syms;
            guarded(&path, || {
                symbolizer
                    .symbolize(&Source::Elf(elf), Input::VirtOffset(offsets))
                    .unwrap_or_default()
            })
        }
        None => Vec::new(),
    };
    (0..offsets.len()).map(|i| names_of(symbolized.get(i))).collect()
}

/// `name` run so that a panic in it (blazesym's arithmetic on a hostile file's values
/// overflows in a build with overflow checks) costs the file `path` its names, never the
/// session: nothing is named, and the file is refused from then on, counted
/// (`naming_panicked`).
pub(crate) fn guarded<T: Default>(path: &Path, name: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(name)).unwrap_or_else(|_| {
        crate::symfiles::naming_panicked(path);
        T::default()
    })
}

/// Kernel functions that only run because the tracer does: the BPF program itself, the code
/// that runs programs on raw tracepoints, tracepoints' perf and BPF glue.
pub(super) fn is_tracing_machinery(symbol: &str) -> bool {
    const PREFIXES: [&str; 6] = [
        "bpf_prog_",
        "bpf_trace_run",
        "__bpf_trace_",
        "__traceiter_",
        "perf_trace_",
        "perf_syscall_",
    ];
    symbol == "trace_call_bpf" || PREFIXES.iter().any(|prefix| symbol.starts_with(prefix))
}

/// The functions blazesym found at one address, innermost first: the inlined ones (when asked
/// for and present), then the function they are inlined into. Unknown: one frame without name.
pub(super) fn names_of(symbolized: Option<&Symbolized<'_>>) -> Vec<Named> {
    let Some(Symbolized::Sym(sym)) = symbolized else {
        return vec![Named::default()];
    };
    if sym.name.is_empty() {
        return vec![Named::default()];
    }
    let located = |code_info: Option<&CodeInfo<'_>>| {
        (
            code_info.map(|c| capped(c.to_path().display().to_string())),
            code_info.and_then(|c| c.line),
        )
    };
    let mut names = Vec::with_capacity(sym.inlined.len() + 1);
    // blazesym lists inlined calls outermost first, each with the location inside it.
    for inlined in sym.inlined.iter().rev() {
        let (file, line) = located(inlined.code_info.as_ref());
        names.push(Named {
            symbol: Some(symbol_name(&inlined.name)),
            file,
            line,
            inlined: true,
        });
    }
    let (file, line) = located(sym.code_info.as_deref());
    names.push(Named {
        symbol: Some(symbol_name(&sym.name)),
        file,
        line,
        inlined: false,
    });
    names
}

/// The GNU build-id in a sequence of ELF notes (`/sys/kernel/notes`, native byte order).
pub fn gnu_build_id(notes: &[u8]) -> Option<Vec<u8>> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let word = |at: usize| -> Option<u32> { Some(u32::from_ne_bytes(notes.get(at..at + 4)?.try_into().ok()?)) };
    let mut at = 0;
    while at + 12 <= notes.len() {
        let (name_size, desc_size, kind) = (word(at)? as usize, word(at + 4)? as usize, word(at + 8)?);
        let name = at + 12;
        let desc = name.checked_add(name_size.checked_next_multiple_of(4)?)?;
        let next = desc.checked_add(desc_size.checked_next_multiple_of(4)?)?;
        if kind == NT_GNU_BUILD_ID && notes.get(name..name + name_size) == Some(b"GNU\0") {
            return notes.get(desc..desc + desc_size).map(<[u8]>::to_vec);
        }
        at = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::guarded;

    /// Issue 29: a panic while naming from a hostile file (blazesym's arithmetic overflowing in
    /// a build with overflow checks) costs that file its names, counted as `naming_panicked`,
    /// and the file is not handed to the symbolizer again; the caller goes on.
    #[test]
    fn a_panic_while_naming_refuses_the_file_and_goes_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hostile");
        std::fs::copy("/bin/true", &path).expect("a copy of /bin/true");
        let panicked = || {
            crate::symfiles::figures()
                .refused_by_reason
                .get("naming_panicked")
                .copied()
                .unwrap_or(0)
        };
        assert_eq!(
            crate::symfiles::symbol_file(None, Some(&path)).as_deref(),
            Some(path.as_path()),
            "an ordinary ELF file is named from"
        );
        let before = panicked();
        let named: Vec<u64> = guarded(&path, || panic!("overflow in a hostile file's values"));
        assert!(named.is_empty());
        assert_eq!(panicked(), before + 1, "counted as naming_panicked");
        assert_eq!(
            crate::symfiles::symbol_file(None, Some(&path)),
            None,
            "the file is refused from then on"
        );
        let after: Vec<u64> = guarded(&path, || vec![1]);
        assert_eq!(after, [1], "naming goes on for the session");
    }

    /// A program (with DWARF) whose owner is not root, with a `.gnu_debuglink` and a
    /// `.gnu_debugaltlink` naming FIFOs beside it: the symbolizer reads its sealed copy, which
    /// names no other file (a symbolizer following those links would open what the owner
    /// chose), and still finds the program's own symbols and DWARF in it.
    #[test]
    fn the_copy_of_a_users_file_names_no_other_file() {
        use object::{Object as _, ObjectSection as _};
        use std::{os::unix::fs::PermissionsExt as _, process::Command};
        let dir = tempfile::tempdir().expect("tempdir");
        let run = |cmd: &mut Command| {
            let status = cmd.status().expect("runs");
            assert!(status.success(), "{cmd:?}: {status}");
        };
        let program = dir.path().join("linked");
        let target = dir.path().join("linked.debug");
        let alt = dir.path().join("alt.fifo");
        std::fs::write(&target, b"not a debug file").expect("write");
        let source = dir.path().join("linked.c");
        std::fs::write(&source, "int main(void) { return 0; }\n").expect("write");
        run(Command::new("cc").args(["-g", "-O0", "-o"]).arg(&program).arg(&source));
        let mut altlink = alt.as_os_str().as_encoded_bytes().to_vec();
        altlink.push(0);
        altlink.extend([0xab; 20]);
        std::fs::write(dir.path().join("altlink"), altlink).expect("write");
        run(Command::new("objcopy")
            .arg(format!("--add-gnu-debuglink={}", target.display()))
            .arg(format!(
                "--add-section=.altlink={}",
                dir.path().join("altlink").display()
            ))
            .arg(&program));
        // objcopy refuses to add this name directly: added, then renamed.
        run(Command::new("objcopy")
            .arg("--rename-section=.altlink=.gnu_debugaltlink")
            .arg(&program));
        std::fs::remove_file(&target).expect("rm");
        run(Command::new("mkfifo").arg(&target).arg(&alt));
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let path = std::ffi::CString::new(program.as_os_str().as_encoded_bytes()).expect("no NUL");
        // A path this test made.
        if crate::sys::fs::chown(&path, 65534, 65534).is_err() {
            eprintln!("SKIPPED: chown needs root");
            return;
        }
        let links = |file: &std::path::Path| {
            let bytes = std::fs::read(file).expect("read");
            let object = object::File::parse(&*bytes).expect("ELF");
            let names: Vec<String> = object
                .sections()
                .filter_map(|s| s.name().ok().map(str::to_owned))
                .collect();
            tracer_unwind::objfile::LINK_SECTIONS
                .iter()
                .filter(|link| names.iter().any(|n| n.as_bytes() == **link))
                .count()
        };
        assert_eq!(links(&program), 2, "the program names its debug files");
        let copy = crate::symfiles::symbol_file(None, Some(&program)).expect("a copy is read");
        assert_ne!(
            copy, program,
            "a file its owner can change is read through a sealed copy"
        );
        assert_eq!(links(&copy), 0, "the copy names no other file");
        let nm = Command::new("nm").arg(&program).output().expect("nm runs");
        let main = String::from_utf8_lossy(&nm.stdout)
            .lines()
            .find_map(|l| l.strip_suffix(" T main").map(|a| u64::from_str_radix(a, 16)))
            .expect("nm lists main")
            .expect("a hex address");
        let named = super::name_in_file(
            &super::symbolizer(false),
            Some(copy),
            &super::Plt::default(),
            None,
            &[main],
        );
        let main = named.first().and_then(|n| n.first()).expect("one name");
        assert_eq!(main.symbol.as_deref(), Some("main"));
        assert!(
            main.file.as_deref().is_some_and(|f| f.ends_with("linked.c")),
            "its own DWARF is read: {main:?}"
        );
    }
}
