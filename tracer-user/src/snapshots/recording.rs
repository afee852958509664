//! The recording format of a walked stack copy (`--record-snapshots`, replayed by `replay`):
//! one JSON object per sample, versioned ([`FORMAT_VERSION`]), addresses as `0x` hex strings,
//! the stack as the hex of its little-endian bytes, trimmed to the words the walk needs.
//!
//! ```json
//! { "version": 1, "arch": "x86_64", "comm": "deep", "max_depth": 2048,
//!   "regs": { "pc": "0x…", "sp": "0x…", "fp": "0x…", "lr": "0x0" },
//!   "stack": { "base": "0x7ffd…", "words": "f0ff…" },
//!   "mappings": [ { "start": "0x…", "end": "0x…", "bias": "0x…", "path": "/tmp/w/v3/deep",
//!                   "build_id": "ab12…" } ],
//!   "rules": [ { "pc": "0x…", "covering": { "rule": { "kind": 0, "cfa_reg": 0, … } } } ],
//!   "frames": [ "0x… table", "0x… fp" ],
//!   "stop": "outermost" }
//! ```
//!
//! `bias` is what the tracer subtracts from a PC to look it up in the object's table. `rules`
//! holds every PC the walk looked up (`walk::lookup_pc`: a return address minus one) with
//! what covered it: `no_mapping`, `no_table` (frame pointers) or the table's `rule`.
//! Pure: no I/O here; the writer is `record`.

use serde::{Deserialize, Serialize};
use tracer_common::{
    snapshot::{SNAPSHOT_WORDS, StackSnapshot},
    trace::{SOURCE_FP, SOURCE_TABLE, WalkRegs},
    unwind::UnwindRule,
    walk::StopReason,
};

use super::walk::{Covering, Walked};

/// The version written; a reader refuses others.
pub const FORMAT_VERSION: u32 = 1;

/// A `u64` written as a `0x` hex string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Hex(pub u64);

impl Serialize for Hex {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{:#x}", self.0))
    }
}

impl<'de> Deserialize<'de> for Hex {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Hex, D::Error> {
        let text = String::deserialize(d)?;
        let digits = text
            .strip_prefix("0x")
            .ok_or_else(|| serde::de::Error::custom(format!("{text:?}: not 0x hex")))?;
        u64::from_str_radix(digits, 16)
            .map(Hex)
            .map_err(|e| serde::de::Error::custom(format!("{text:?}: {e}")))
    }
}

/// One recorded sample (module docs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recording {
    pub version: u32,
    /// `std::env::consts::ARCH` of the recording host (the walk's rules are per architecture).
    pub arch: String,
    pub comm: String,
    pub max_depth: u32,
    pub regs: Registers,
    pub stack: Stack,
    pub mappings: Vec<RecordedMapping>,
    pub rules: Vec<RecordedRule>,
    pub frames: Vec<RecordedFrame>,
    /// `StopReason::name` of how the walk ended.
    pub stop: String,
}

/// The registers the walk starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registers {
    pub pc: Hex,
    pub sp: Hex,
    pub fp: Hex,
    pub lr: Hex,
}

/// The copied stack: 8-byte words from `base`, hex of their little-endian bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stack {
    pub base: Hex,
    pub words: String,
}

/// One executable mapping of the process when the sample was taken.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedMapping {
    pub start: Hex,
    pub end: Hex,
    pub bias: Hex,
    /// The object's path as the process saw it (`[vdso]`; empty for anonymous code).
    pub path: String,
    /// Its GNU build-id in hex, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
}

/// What covered one looked-up PC (see [`Covering`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cover {
    NoMapping,
    NoTable,
    Rule(RuleFields),
}

/// An [`UnwindRule`]'s fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleFields {
    pub kind: u8,
    pub cfa_reg: u8,
    pub flags: u8,
    pub cfa_offset: i32,
    pub fp_offset: i32,
    pub ra_offset: i32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedRule {
    pub pc: Hex,
    pub covering: Cover,
}

/// A walked frame and how it was found (`table` or `fp`), written as one string: `"0x… table"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedFrame {
    pub pc: Hex,
    pub source: String,
}

impl Serialize for RecordedFrame {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{:#x} {}", self.pc.0, self.source))
    }
}

impl<'de> Deserialize<'de> for RecordedFrame {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RecordedFrame, D::Error> {
        let text = String::deserialize(d)?;
        let (pc, source) = text
            .split_once(' ')
            .ok_or_else(|| serde::de::Error::custom(format!("{text:?}: not \"PC SOURCE\"")))?;
        let pc = Hex::deserialize(serde::de::value::StrDeserializer::<D::Error>::new(pc))?;
        Ok(RecordedFrame {
            pc,
            source: source.to_owned(),
        })
    }
}

impl From<UnwindRule> for RuleFields {
    fn from(r: UnwindRule) -> RuleFields {
        RuleFields {
            kind: r.kind,
            cfa_reg: r.cfa_reg,
            flags: r.flags,
            cfa_offset: r.cfa_offset,
            fp_offset: r.fp_offset,
            ra_offset: r.ra_offset,
        }
    }
}

impl From<RuleFields> for UnwindRule {
    fn from(r: RuleFields) -> UnwindRule {
        UnwindRule {
            kind: r.kind,
            cfa_reg: r.cfa_reg,
            flags: r.flags,
            _pad: 0,
            cfa_offset: r.cfa_offset,
            fp_offset: r.fp_offset,
            ra_offset: r.ra_offset,
        }
    }
}

impl From<Covering> for Cover {
    fn from(c: Covering) -> Cover {
        match c {
            None => Cover::NoMapping,
            Some(None) => Cover::NoTable,
            Some(Some(rule)) => Cover::Rule(rule.into()),
        }
    }
}

impl From<Cover> for Covering {
    fn from(c: Cover) -> Covering {
        match c {
            Cover::NoMapping => None,
            Cover::NoTable => Some(None),
            Cover::Rule(rule) => Some(Some(rule.into())),
        }
    }
}

/// The name a frame's source is written as.
pub fn source_name(source: u8) -> &'static str {
    match source {
        SOURCE_TABLE => "table",
        SOURCE_FP => "fp",
        _ => "unknown",
    }
}

/// The frames and stop reason of `walked` as recorded.
pub fn frames_of(walked: &Walked) -> (Vec<RecordedFrame>, String) {
    let frames = walked
        .frames
        .iter()
        .map(|&(pc, source)| RecordedFrame {
            pc: Hex(pc),
            source: source_name(source).to_owned(),
        })
        .collect();
    (frames, walked.stop.name().to_owned())
}

/// Why a recording cannot be turned back into a stack copy.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum FormatError {
    #[error("format version {0}, this reader knows {FORMAT_VERSION}")]
    Version(u32),
    #[error("stack words: {0}")]
    Stack(String),
    #[error("unknown stop reason {0:?}")]
    Stop(String),
}

impl Recording {
    /// The stack copy the walk starts from.
    pub fn snapshot(&self) -> Result<Box<StackSnapshot>, FormatError> {
        if self.version != FORMAT_VERSION {
            return Err(FormatError::Version(self.version));
        }
        let text = self.stack.words.as_bytes();
        if !text.len().is_multiple_of(16) {
            return Err(FormatError::Stack(format!(
                "{} hex digits, not whole words",
                text.len()
            )));
        }
        let len = text.len() / 16;
        if len > SNAPSHOT_WORDS {
            return Err(FormatError::Stack(format!("{len} words, at most {SNAPSHOT_WORDS}")));
        }
        let mut copy = Box::new(StackSnapshot::EMPTY);
        for (i, digits) in text.chunks_exact(16).enumerate() {
            let mut bytes = [0u8; 8];
            for (b, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
                let pair = std::str::from_utf8(pair).map_err(|e| FormatError::Stack(e.to_string()))?;
                *b = u8::from_str_radix(pair, 16).map_err(|e| FormatError::Stack(format!("{pair:?}: {e}")))?;
            }
            copy.words[i] = u64::from_le_bytes(bytes);
        }
        copy.len = len as u32;
        copy.base = self.stack.base.0;
        copy.regs = WalkRegs {
            pc: self.regs.pc.0,
            sp: self.regs.sp.0,
            fp: self.regs.fp.0,
            lr: self.regs.lr.0,
        };
        Ok(copy)
    }

    /// The recorded stop reason.
    pub fn stop_reason(&self) -> Result<StopReason, FormatError> {
        StopReason::ALL
            .into_iter()
            .find(|r| r.name() == self.stop)
            .ok_or_else(|| FormatError::Stop(self.stop.clone()))
    }
}

/// `words` as the hex of their little-endian bytes.
pub fn words_hex(words: &[u64]) -> String {
    let mut out = String::with_capacity(words.len() * 16);
    for word in words {
        for b in word.to_le_bytes() {
            out.push_str(&format!("{b:02x}"));
        }
    }
    out
}

/// The shortest window of `copy` (start at SP or above the copy's base, words up to some end)
/// that the walk reads all of: `walk` on the trimmed copy must give exactly `full` (else the
/// whole copy is kept). Returns the base and words.
pub fn trim(copy: &StackSnapshot, full: &Walked, mut walk: impl FnMut(&StackSnapshot) -> Walked) -> (u64, Vec<u64>) {
    let whole = (copy.base, copy.words[..copy.len as usize].to_vec());
    let skip = usize::try_from(copy.regs.sp.saturating_sub(copy.base) / 8)
        .unwrap_or(0)
        .min(copy.len as usize);
    let mut trimmed = Box::new(*copy);
    let window = |trimmed: &mut StackSnapshot, skip: usize, end: usize| {
        trimmed.base = copy.base.wrapping_add(8 * skip as u64);
        trimmed.words = [0; SNAPSHOT_WORDS];
        trimmed.words[..end - skip].copy_from_slice(&copy.words[skip..end]);
        trimmed.len = (end - skip) as u32;
    };
    // The least end that still walks the same: the walk reads words at growing addresses
    // only as it goes outwards, so fewer words can only end it sooner.
    let (mut lo, mut hi) = (skip, copy.len as usize);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        window(&mut trimmed, skip, mid);
        if walk(&trimmed) == *full {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    window(&mut trimmed, skip, hi);
    if walk(&trimmed) != *full {
        return whole;
    }
    (trimmed.base, trimmed.words[..trimmed.len as usize].to_vec())
}
