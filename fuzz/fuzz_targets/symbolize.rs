//! Fuzz the naming path with hostile symbol files: any bytes as an ELF file (with DWARF) go
//! through what the tracer does before and while it names an object's addresses: the vetting of
//! compressed sections and MiniDebugInfo (`compressed::vet_file`, which blazesym's own
//! unbounded decompression relies on), the DWARF depth check (`dwarfdepth::check_elf`, which
//! decides whether blazesym may read the DWARF), then blazesym itself as the tracer configures
//! it (inlined functions on) at the file's symbol addresses, every name cut by `names::capped`.
//! blazesym runs on a thread with a 16 MiB stack (the sanitizers' frames are large): deep
//! nesting the check lets through must not overflow it; libFuzzer's `-rss_limit_mb` (2 GiB, set
//! by `cargo xtask test`) bounds the memory. Names come out at most `MAX_NAME_BYTES` long.
#![no_main]

use std::{io::Write as _, os::fd::FromRawFd as _};

use blazesym::symbolize::{Input, Symbolized, Symbolizer, source::Elf, source::Source};
use libfuzzer_sys::fuzz_target;
use object::{Object as _, ObjectSymbol as _};
use tracer_unwind::{compressed, dwarfdepth, names};

/// The most addresses of one file named.
const ADDRESSES: usize = 16;
/// Past the highest user-space address of x86-64 and aarch64 (57-bit address spaces included).
const USER_SPACE_END: u64 = 1 << 57;

fuzz_target!(|bytes: &[u8]| {
    let mut read = |offset: u64, size: u64| {
        let start = usize::try_from(offset).ok()?;
        bytes
            .get(start..start.checked_add(usize::try_from(size).ok()?)?)
            .map(<[u8]>::to_vec)
    };
    if compressed::vet_file(bytes, &mut read, compressed::MAX_GNU_DEBUGDATA).is_err() {
        return;
    }
    let debug_syms = dwarfdepth::check_elf(bytes).is_ok();
    // Addresses the tracer can ask for: a sampled user-space PC made object-relative, below
    // the top of user space (blazesym's `find_units` adds 1 to the address without checking:
    // u64::MAX overflows, a case the tracer never reaches).
    let mut offsets: Vec<u64> = object::File::parse(bytes)
        .map(|file| {
            file.symbols()
                .map(|s| s.address())
                .filter(|&a| a < USER_SPACE_END)
                .take(ADDRESSES)
                .collect()
        })
        .unwrap_or_default();
    offsets.extend([0, 0x1000, 0x401000]);
    let file = memfd(bytes);
    let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&file));
    std::thread::Builder::new()
        .stack_size(16 << 20)
        .spawn(move || {
            let symbolizer = Symbolizer::builder()
                .enable_demangling(false)
                .enable_code_info(true)
                .enable_inlined_fns(true)
                .build();
            let mut elf = Elf::new(path);
            elf.debug_syms = debug_syms;
            // As the tracer does: a panic in blazesym costs the file its names (counted), not
            // the session; overflowing the stack or the memory limit still fails the run.
            // libFuzzer's panic hook aborts: it is set aside for blazesym's call only (panics in
            // the tracer's own code above still fail the run).
            let hook = std::panic::take_hook();
            std::panic::set_hook(Box::new(|_| {}));
            let named = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                symbolizer.symbolize(&Source::Elf(elf), Input::VirtOffset(&offsets))
            }));
            std::panic::set_hook(hook);
            let Ok(Ok(found)) = named else {
                return;
            };
            for symbolized in &found {
                let Symbolized::Sym(sym) = symbolized else { continue };
                let inlined = sym.inlined.iter().map(|f| &*f.name);
                for name in std::iter::once(&*sym.name).chain(inlined) {
                    let cut = names::capped_str(name);
                    assert!(cut.len() <= names::MAX_NAME_BYTES, "{} bytes", cut.len());
                    if name.len() > names::MAX_NAME_BYTES {
                        let kept = cut.strip_suffix(names::CUT_MARKER).expect("a cut name is marked");
                        assert!(name.starts_with(kept));
                    } else {
                        assert_eq!(cut, name);
                    }
                }
            }
            drop(file);
        })
        .expect("spawn the naming thread")
        .join()
        .expect("naming panicked");
});

/// An anonymous memory file holding `bytes` (blazesym reads files by path).
fn memfd(bytes: &[u8]) -> std::fs::File {
    // SAFETY: memfd_create with a valid NUL-terminated name; the descriptor is owned below.
    let fd = unsafe { libc::memfd_create(c"fuzz-elf".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create");
    // SAFETY: `fd` is a fresh descriptor this function owns.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(bytes).expect("write the memory file");
    file
}
