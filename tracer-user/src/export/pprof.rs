//! pprof: a gzipped `profile.proto` (github.com/google/pprof, proto/profile.proto), which
//! `go tool pprof` and the services built on it read. Each distinct stack is a sample with two
//! values, `samples/count` and `cpu/nanoseconds`, and labels `pid`, `tid`, `comm`, `event`,
//! `sources` (how each location was found, one letter each: see `FrameSource::letter`) and,
//! for a stack whose user frames end before the outermost one, `truncated` (why, the stop
//! reason's name as the summary counts it);
//! each symbolized address is a location with one line per function (inlined ones first, as the
//! format orders them); every object a mapping with its build-id. Locations carry
//! object-relative addresses, so every process mapping an object shares its locations (JIT
//! code, named per process, has a location per address and name); the
//! mappings are already symbolized (`has_functions`) and pprof does not look up the files again.
//! Frames without a symbol get a function named like `[libfoo.so+0x1234]`.

use std::{
    collections::HashMap,
    io::{self, Write},
};

use flate2::{Compression, write::GzEncoder};
use prost::Message as _;

use super::model::{FrameSource, Resolved, ResolvedFrame, Weights};

/// The messages of profile.proto that are written, with the field numbers of the format.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// Leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// Inlined functions first, the function they are inlined into last.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
}

/// Write `resolved` as a gzipped profile.proto.
pub fn write(out: &mut impl Write, resolved: &Resolved) -> io::Result<()> {
    write_profile(out, &build(resolved))
}

/// Write `resolved`, whose user frames were not symbolized (`--symbolize none`), as a gzipped
/// profile.proto for symbolization elsewhere: user locations carry their object-relative
/// address and no lines, their mappings the object's path and build-id and
/// `has_functions: false`.
pub fn write_unsymbolized(out: &mut impl Write, resolved: &Resolved) -> io::Result<()> {
    write_profile(out, &build_with(resolved, true))
}

fn write_profile(out: &mut impl Write, profile: &Profile) -> io::Result<()> {
    let mut gzip = GzEncoder::new(&mut *out, Compression::default());
    gzip.write_all(&profile.encode_to_vec())?;
    gzip.finish()?;
    out.flush()
}

/// The profile message of `resolved`.
pub fn build(resolved: &Resolved) -> Profile {
    build_with(resolved, false)
}

/// [`build`]; `addresses_only`: unnamed user frames get no lines (see [`write_unsymbolized`]).
pub fn build_with(resolved: &Resolved, addresses_only: bool) -> Profile {
    let mut b = Builder {
        addresses_only,
        ..Builder::default()
    };
    b.string("");
    let samples = b.value_type("samples", "count");
    let cpu = b.value_type("cpu", "nanoseconds");
    // The second value is CPU time for cpu-clock, the time blocked for offcpu (as OTLP names it).
    let weight = match resolved.weights() {
        Weights::Cpu => cpu.clone(),
        Weights::OffCpu => b.value_type("off_cpu", "nanoseconds"),
        Weights::Mixed => b.value_type("time", "nanoseconds"),
    };
    let labels = ["pid", "tid", "comm", "event", "sources", "truncated"].map(|k| b.string(k));
    for stack in &resolved.stacks {
        let mut location_id = Vec::new();
        let mut sources = String::new();
        // Frames of one address (inlined ones, then their function) make one location.
        let mut start = 0;
        for (i, frame) in stack.frames.iter().enumerate() {
            let last_of_address = stack
                .frames
                .get(i + 1)
                .is_none_or(|next| !(frame.inlined && next.addr == frame.addr));
            if last_of_address {
                location_id.push(b.location(&stack.frames[start..=i], resolved));
                sources.push(frame.source.letter());
                start = i + 1;
            }
        }
        let mut label = vec![
            Label {
                key: labels[0],
                num: i64::from(stack.pid),
                ..Label::default()
            },
            Label {
                key: labels[1],
                num: i64::from(stack.tid),
                ..Label::default()
            },
            Label {
                key: labels[2],
                str: b.string(&stack.comm),
                ..Label::default()
            },
            Label {
                key: labels[3],
                str: b.string(&stack.event),
                ..Label::default()
            },
            Label {
                key: labels[4],
                str: b.string(&sources),
                ..Label::default()
            },
        ];
        if let Some(why) = stack.truncation() {
            label.push(Label {
                key: labels[5],
                str: b.string(why),
                ..Label::default()
            });
        }
        b.profile.sample.push(Sample {
            location_id,
            value: vec![saturating_i64(stack.count), saturating_i64(stack.weight_ns)],
            label,
        });
    }
    let mut profile = b.finish(resolved);
    profile.sample_type = vec![samples, weight];
    profile.period_type = Some(cpu);
    profile.period = saturating_i64(resolved.period_ns);
    profile.time_nanos = saturating_i64(resolved.start_unix_ns);
    profile.duration_nanos = saturating_i64(resolved.duration_ns);
    profile
}

/// The tables of the profile under construction, each entry interned once.
#[derive(Default)]
struct Builder {
    profile: Profile,
    strings: HashMap<String, i64>,
    functions: HashMap<(i64, i64), u64>,
    /// Locations by (object, object-relative address); frames in no object by address.
    /// JIT code is named per process: its locations by address and name.
    locations: HashMap<(Option<usize>, u64), u64>,
    jit_locations: HashMap<(u64, String), u64>,
    /// Per object: the mapping id, the addresses seen, what its locations carry.
    mappings: HashMap<usize, MappingFacts>,
    /// Unnamed user frames get no lines.
    addresses_only: bool,
}

#[derive(Default)]
struct MappingFacts {
    id: u64,
    lowest: u64,
    highest: u64,
    kernel: bool,
    /// Some location has lines (functions).
    named: bool,
    files: bool,
    lines: bool,
    inlined: bool,
}

impl Builder {
    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.profile.string_table.len() as i64;
        self.profile.string_table.push(s.to_owned());
        self.strings.insert(s.to_owned(), i);
        i
    }

    fn value_type(&mut self, kind: &str, unit: &str) -> ValueType {
        ValueType {
            r#type: self.string(kind),
            unit: self.string(unit),
        }
    }

    fn function(&mut self, name: &str, file: Option<&str>) -> u64 {
        let key = (self.string(name), file.map_or(0, |f| self.string(f)));
        if let Some(&id) = self.functions.get(&key) {
            return id;
        }
        let id = self.profile.function.len() as u64 + 1;
        self.profile.function.push(Function {
            id,
            name: key.0,
            system_name: key.0,
            filename: key.1,
        });
        self.functions.insert(key, id);
        id
    }

    /// The location of the frames of one address (inlined functions first).
    fn location(&mut self, frames: &[ResolvedFrame], resolved: &Resolved) -> u64 {
        let outer = &frames[frames.len() - 1];
        let key = (outer.object, outer.offset);
        let jit_key =
            (outer.source == FrameSource::Jit).then(|| (outer.offset, outer.symbol.clone().unwrap_or_default()));
        let known = match &jit_key {
            Some(jit_key) => self.jit_locations.get(jit_key),
            None => self.locations.get(&key),
        };
        if let Some(&id) = known {
            return id;
        }
        let unnamed = outer.source != FrameSource::Kernel && frames.iter().all(|f| f.symbol.is_none());
        let line: Vec<Line> = if self.addresses_only && unnamed {
            Vec::new()
        } else {
            frames
                .iter()
                .map(|f| Line {
                    function_id: self.function(&f.name(&resolved.objects), f.file.as_deref()),
                    line: f.line.map_or(0, i64::from),
                })
                .collect()
        };
        let mapping_id = match outer.object {
            Some(object) => {
                let next_id = self.mappings.len() as u64 + 1;
                let facts = self.mappings.entry(object).or_insert_with(|| MappingFacts {
                    id: next_id,
                    lowest: u64::MAX,
                    ..MappingFacts::default()
                });
                facts.lowest = facts.lowest.min(outer.offset);
                facts.highest = facts.highest.max(outer.offset);
                facts.kernel |= outer.source == FrameSource::Kernel;
                facts.named |= !line.is_empty();
                facts.files |= frames.iter().any(|f| f.file.is_some());
                facts.lines |= frames.iter().any(|f| f.line.is_some());
                facts.inlined |= frames.iter().any(|f| f.inlined);
                facts.id
            }
            None => 0,
        };
        let id = self.profile.location.len() as u64 + 1;
        self.profile.location.push(Location {
            id,
            mapping_id,
            address: outer.offset,
            line,
        });
        match jit_key {
            Some(jit_key) => self.jit_locations.insert(jit_key, id),
            None => self.locations.insert(key, id),
        };
        id
    }

    /// The profile with its mappings: user objects from address 0 (locations hold
    /// object-relative addresses, which are then their file's own addresses), the kernel from
    /// the lowest address seen in it.
    fn finish(mut self, resolved: &Resolved) -> Profile {
        let mut mappings: Vec<(usize, MappingFacts)> = std::mem::take(&mut self.mappings).into_iter().collect();
        mappings.sort_by_key(|(_, facts)| facts.id);
        for (object, facts) in mappings {
            let info = &resolved.objects[object];
            let build_id = info.build_id.as_ref().map_or(0, |id| {
                self.string(&id.iter().map(|b| format!("{b:02x}")).collect::<String>())
            });
            let filename = self.string(&info.path);
            self.profile.mapping.push(Mapping {
                id: facts.id,
                memory_start: if facts.kernel { facts.lowest } else { 0 },
                memory_limit: facts.highest.saturating_add(1),
                file_offset: 0,
                filename,
                build_id,
                has_functions: facts.named,
                has_filenames: facts.files,
                has_line_numbers: facts.lines,
                has_inline_frames: facts.inlined,
            });
        }
        self.profile
    }
}

fn saturating_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;
