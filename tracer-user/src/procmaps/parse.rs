//! Parser of `/proc/PID/maps` text (proc(5)): one [`MapsEntry`] per executable mapping. Pure:
//! takes the text, never opens files or looks at the ELF behind a mapping (see `image` and
//! `read`). Malformed lines are a [`ParseError`] naming the 1-based line, never a panic.
//!
//! Line format, as the kernel prints it (`show_map_vma`):
//! `start-end perms offset major:minor inode [padding] pathname`, with `start`, `end`, `offset`,
//! `major` and `minor` in hex and `inode` in decimal. The pathname is everything after the
//! padding, spaces included; the kernel escapes only a newline in it (as `\012`), and marks an
//! unlinked file with a ` (deleted)` suffix (memfd files always carry it). The text is bytes:
//! a file name need not be UTF-8, and paths stay bytes (`OsString`) from here on.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::PathBuf;

use super::Device;

/// One executable line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapsEntry {
    pub start: u64,
    pub end: u64,
    /// Offset in the file of the byte mapped at `start` (0 for anonymous mappings).
    pub file_offset: u64,
    pub device: Device,
    pub inode: u64,
    pub shared: bool,
    pub backing: Backing,
}

/// What is behind a mapping, according to its pathname column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backing {
    /// No pathname: anonymous memory (JIT code, for example).
    Anonymous,
    /// A name that is not a path: `[vdso]`, `[vsyscall]`, `[anon:name]`, `anon_inode:...`.
    Pseudo(String),
    /// A file: an absolute path, as seen from the process's root, without the ` (deleted)`
    /// suffix, which becomes `deleted`. A file really named `x (deleted)` is read as deleted;
    /// that is harmless because deleted files are opened through `map_files` anyway.
    File { path: PathBuf, deleted: bool },
}

/// Why a line of `/proc/PID/maps` could not be read.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    #[error("/proc/PID/maps line {line}: missing {field} field")]
    MissingField { line: usize, field: &'static str },
    #[error("/proc/PID/maps line {line}: bad {field} field {value:?}")]
    BadField {
        line: usize,
        field: &'static str,
        value: String,
    },
}

/// The executable mappings listed in `text` (the contents of `/proc/PID/maps`), in file order.
/// Blank lines are skipped; every other line must be well formed, executable or not.
pub fn parse_maps(text: impl AsRef<[u8]>) -> Result<Vec<MapsEntry>, ParseError> {
    let mut out = Vec::new();
    for (index, line) in text.as_ref().split(|&b| b == b'\n').enumerate() {
        if line.trim_ascii().is_empty() {
            continue;
        }
        if let Some(entry) = parse_line(index + 1, line)? {
            out.push(entry);
        }
    }
    Ok(out)
}

/// One line; `Ok(None)` when the mapping is not executable.
fn parse_line(line_no: usize, line: &[u8]) -> Result<Option<MapsEntry>, ParseError> {
    let mut fields = Fields { line_no, rest: line };
    let range = fields.next("address range")?;
    let (start, end) = range
        .split_once('-')
        .and_then(|(s, e)| Some((hex(s)?, hex(e)?)))
        .filter(|(s, e)| s < e)
        .ok_or_else(|| bad(line_no, "address range", range))?;
    let perms = fields.next("permissions")?;
    let (exec, shared) = parse_perms(perms).ok_or_else(|| bad(line_no, "permissions", perms))?;
    let offset = fields.next("offset")?;
    let file_offset = hex(offset).ok_or_else(|| bad(line_no, "offset", offset))?;
    let dev = fields.next("device")?;
    let device = dev
        .split_once(':')
        .and_then(|(major, minor)| {
            Some(Device {
                major: u32::try_from(hex(major)?).ok()?,
                minor: u32::try_from(hex(minor)?).ok()?,
            })
        })
        .ok_or_else(|| bad(line_no, "device", dev))?;
    let inode_text = fields.next("inode")?;
    let inode = inode_text
        .parse::<u64>()
        .map_err(|_| bad(line_no, "inode", inode_text))?;
    if !exec {
        return Ok(None);
    }
    Ok(Some(MapsEntry {
        start,
        end,
        file_offset,
        device,
        inode,
        shared,
        backing: backing(fields.rest.trim_ascii_start()),
    }))
}

/// `rwxp`/`r-xs`...: (executable, shared); `None` unless exactly four valid letters.
fn parse_perms(perms: &str) -> Option<(bool, bool)> {
    let &[r, w, x, s] = perms.as_bytes() else {
        return None;
    };
    let valid = matches!(r, b'r' | b'-') && matches!(w, b'w' | b'-') && matches!(x, b'x' | b'-');
    let shared = match s {
        b's' => true,
        b'p' => false,
        _ => return None,
    };
    valid.then_some((x == b'x', shared))
}

fn backing(name: &[u8]) -> Backing {
    if name.is_empty() {
        return Backing::Anonymous;
    }
    if !name.starts_with(b"/") {
        return Backing::Pseudo(String::from_utf8_lossy(name).into_owned());
    }
    let (name, deleted) = match name.strip_suffix(b" (deleted)") {
        Some(stripped) => (stripped, true),
        None => (name, false),
    };
    Backing::File {
        path: PathBuf::from(OsStr::from_bytes(&unescape_newlines(name))),
        deleted,
    }
}

/// `name` with each `\012` (how the kernel prints a newline in a path) back to a newline.
fn unescape_newlines(name: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len());
    let mut rest = name;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix(b"\\012") {
            out.push(b'\n');
            rest = after;
        } else {
            out.push(rest[0]);
            rest = &rest[1..];
        }
    }
    out
}

/// Splits whitespace-separated fields off the front of a line, leaving the pathname.
struct Fields<'a> {
    line_no: usize,
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    /// The next field; every field before the pathname is ASCII, so anything else is bad.
    fn next(&mut self, field: &'static str) -> Result<&'a str, ParseError> {
        let trimmed = self.rest.trim_ascii_start();
        let end = trimmed
            .iter()
            .position(|b| b.is_ascii_whitespace())
            .unwrap_or(trimmed.len());
        let (value, rest) = trimmed.split_at(end);
        if value.is_empty() {
            return Err(ParseError::MissingField {
                line: self.line_no,
                field,
            });
        }
        self.rest = rest;
        std::str::from_utf8(value).map_err(|_| ParseError::BadField {
            line: self.line_no,
            field,
            value: String::from_utf8_lossy(value).into_owned(),
        })
    }
}

fn hex(text: &str) -> Option<u64> {
    // from_str_radix accepts a leading `+`; the kernel never prints one.
    text.bytes()
        .all(|b| b.is_ascii_hexdigit())
        .then(|| u64::from_str_radix(text, 16).ok())
        .flatten()
}

fn bad(line: usize, field: &'static str, value: &str) -> ParseError {
    ParseError::BadField {
        line,
        field,
        value: value.to_owned(),
    }
}

#[cfg(test)]
mod tests;
