//! Names that other users control (command names, object paths, symbols, source file names,
//! event paths), made safe for the text outputs and the terminal: a name can neither forge a
//! record nor reach a terminal raw. Pure: text in, text out.
//!
//! The rules, one per consumer:
//! - everywhere ([`escaped`]): each control character, C0 (U+0000 to U+001F: newline, carriage
//!   return, tab, escape...), DEL (U+007F) and C1 (U+0080 to U+009F), is written as `\xHH`, its
//!   code point in hex. A name stays one line and never carries a terminal escape sequence.
//! - folded ([`folded`]): also `;` (the frame separator) becomes `_`, whitespace at either end
//!   of a name becomes `_` (readers trim lines), and a name whose last word, after a space, is
//!   made of digits and dots has that space replaced by `_`: the readers take the last such word
//!   of a line as its count (two of them as a differential profile's counts), so a name must
//!   never end like one. A line therefore has exactly one `;` per frame and ends in its count.
//! - perf-script ([`perf_script_comm`], [`perf_script_object`]): fields are separated by spaces
//!   and a line starting with `#` is a comment, so the command name has whitespace replaced by
//!   `_` (as stackcollapse-perf does itself) and a leading `#` by `_`, and an object path has its
//!   spaces written as `\x20`.
//!
//! JSON and protobuf outputs (json, pprof, otlp) carry names as strings and need none of this
//! (serde_json escapes control characters itself); text from invalid UTF-8 is made valid where it
//! is read (`String::from_utf8_lossy`), before it reaches any output.
//!
//! Length ([`capped`], [`capped_str`]): every name, from every source (ELF and DWARF symbols,
//! demangled names, source file names, perf maps, jitdumps, Python code objects), is cut to at
//! most [`MAX_NAME_BYTES`] bytes where it enters the tracer, its end replaced by [`CUT_MARKER`]
//! (so that a cut name is seen as one). A name is otherwise as long as its owner wants: one
//! 4 MiB symbol written once per sample made a 2-second session write gigabytes.

use std::{borrow::Cow, fmt::Write as _};

/// The most bytes a name may have (UTF-8), [`CUT_MARKER`] included when it was cut.
pub const MAX_NAME_BYTES: usize = 1024;
/// What ends a name cut to [`MAX_NAME_BYTES`].
pub const CUT_MARKER: &str = "…[cut]";

/// `name`, cut to at most [`MAX_NAME_BYTES`] bytes (at a character boundary) and ending in
/// [`CUT_MARKER`] if it was longer; as it is (no copy) otherwise.
pub fn capped(mut name: String) -> String {
    if name.len() > MAX_NAME_BYTES {
        name.truncate(cut_at(&name));
        name.push_str(CUT_MARKER);
    }
    name
}

/// [`capped`] of a borrowed name: borrowed when short enough, else the cut copy (the long
/// name is never copied whole).
pub fn capped_str(name: &str) -> Cow<'_, str> {
    if name.len() <= MAX_NAME_BYTES {
        return Cow::Borrowed(name);
    }
    let mut cut = String::with_capacity(MAX_NAME_BYTES);
    cut.push_str(&name[..cut_at(name)]);
    cut.push_str(CUT_MARKER);
    Cow::Owned(cut)
}

/// [`capped`] of bytes read as the tracer reads names (invalid UTF-8 made valid, lossily),
/// without converting more than the bound of a long name.
pub fn capped_lossy(bytes: &[u8]) -> String {
    // Making text valid never shortens it (each invalid sequence becomes U+FFFD, 3 bytes, and
    // is at most 3 bytes long): a prefix of MAX_NAME_BYTES + 1 bytes is still too long, and cut.
    let head = &bytes[..bytes.len().min(MAX_NAME_BYTES + 1)];
    capped(String::from_utf8_lossy(head).into_owned())
}

/// Where a name longer than [`MAX_NAME_BYTES`] is cut: the last character boundary that
/// leaves room for [`CUT_MARKER`].
fn cut_at(name: &str) -> usize {
    let mut at = (MAX_NAME_BYTES - CUT_MARKER.len()).min(name.len());
    while !name.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Whether `c` is a control character: C0, DEL or C1.
fn is_control(c: char) -> bool {
    matches!(c, '\0'..='\x1f' | '\x7f'..='\u{9f}')
}

/// `name` with every control character written as `\xHH`.
pub fn escaped(name: &str) -> Cow<'_, str> {
    if !name.chars().any(is_control) {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        if is_control(c) {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `name` as one element of a folded line (see the module documentation).
pub fn folded(name: &str) -> Cow<'_, str> {
    let mut chars: Vec<char> = escaped(name).chars().map(|c| if c == ';' { '_' } else { c }).collect();
    for c in chars.iter_mut().take_while(|c| c.is_whitespace()) {
        *c = '_';
    }
    for c in chars.iter_mut().rev().take_while(|c| c.is_whitespace()) {
        *c = '_';
    }
    if let Some(space) = chars.iter().rposition(|&c| c == ' ')
        && chars[space + 1..].iter().all(|c| c.is_ascii_digit() || *c == '.')
    {
        chars[space] = '_';
    }
    let safe: String = chars.into_iter().collect();
    if safe == name {
        Cow::Borrowed(name)
    } else {
        Cow::Owned(safe)
    }
}

/// A command name as the first field of a perf-script header line.
pub fn perf_script_comm(comm: &str) -> String {
    let mut safe: String = escaped(comm)
        .chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect();
    if safe.starts_with('#') {
        safe.replace_range(..1, "_");
    }
    safe
}

/// An object path as the `(OBJECT)` field of a perf-script frame line.
pub fn perf_script_object(path: &str) -> String {
    escaped(path).replace(' ', "\\x20")
}

#[cfg(test)]
mod tests;
