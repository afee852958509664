//! Fuzz the rules that make names other users control safe to write (`names`): any bytes,
//! read as the tracer reads names (lossily), come out of every rule without a control character;
//! a folded name has no `;`, no whitespace at its ends and no last word that reads as a count;
//! a perf-script command name has no whitespace and no leading `#`, an object path no space.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer_unwind::names;

fn has_control(s: &str) -> bool {
    s.chars().any(|c| c.is_control())
}

fuzz_target!(|bytes: &[u8]| {
    let name = String::from_utf8_lossy(bytes);
    assert!(!has_control(&names::escaped(&name)));
    let folded = names::folded(&name);
    assert!(!has_control(&folded) && !folded.contains(';'), "{folded:?}");
    assert!(
        !folded.starts_with(char::is_whitespace) && !folded.ends_with(char::is_whitespace),
        "{folded:?}"
    );
    if let Some((_, last)) = folded.rsplit_once(' ') {
        assert!(!last.chars().all(|c| c.is_ascii_digit() || c == '.'), "{folded:?}");
    }
    let comm = names::perf_script_comm(&name);
    assert!(
        !has_control(&comm) && !comm.contains(char::is_whitespace) && !comm.starts_with('#'),
        "{comm:?}"
    );
    let object = names::perf_script_object(&name);
    assert!(!has_control(&object) && !object.contains(' '), "{object:?}");
});
