//! The events of `-e/--event`: what each spec means ([`EventSpec`], parsed without touching
//! the system), the validated set of a session ([`EventSet`]: defaults, duplicates, limits, the
//! uprobe targets resolved to file offsets) and the kernel's event ids with the names given on
//! the command line ([`EventNames`]). Loading and attaching the programs is `bpf::probes`'s job.
//!
//! Specs: `cpu-clock` (sampling at `-F`), `offcpu` (time blocked, from `sched_switch`),
//! `uprobe:PATH:SYMBOL[+OFFSET]`, `uretprobe:PATH:SYMBOL`, `kprobe:SYMBOL`,
//! `tracepoint:CATEGORY:NAME`.

mod symbol;

use std::{collections::HashMap, path::PathBuf, str::FromStr, sync::Arc, time::Duration};

use tracer_common::event::{EventKind, PROBE_SLOTS, event_id};

pub use symbol::{SymbolError, file_offset, file_offset_in};

/// The name of cpu-clock sampling, the default event.
pub const CPU_CLOCK: &str = "cpu-clock";
/// The name of off-CPU time.
pub const OFFCPU: &str = "offcpu";
/// The default of `--min-block`.
pub const DEFAULT_MIN_BLOCK: Duration = Duration::from_millis(1);

/// One `-e` spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventSpec {
    CpuClock,
    Offcpu,
    /// A function entry (plus `offset` bytes) in an executable or library.
    Uprobe {
        path: PathBuf,
        symbol: String,
        offset: u64,
    },
    /// A function's returns: the stack is taken in its caller, just after the call.
    Uretprobe {
        path: PathBuf,
        symbol: String,
    },
    Kprobe {
        symbol: String,
    },
    Tracepoint {
        category: String,
        name: String,
    },
}

/// Why a spec is not an event, each a sentence naming the spec.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpecError {
    #[error(
        "`{0}` is not an event: use cpu-clock, offcpu, uprobe:PATH:SYMBOL[+OFFSET], uretprobe:PATH:SYMBOL, kprobe:SYMBOL or tracepoint:CATEGORY:NAME"
    )]
    Unknown(String),
    #[error("`{spec}` lacks its {what} (the form is {form})")]
    Missing {
        spec: String,
        what: &'static str,
        form: &'static str,
    },
    #[error("`{spec}`: `{text}` is not a {what} (letters, digits, `_` and `.` only)")]
    BadName {
        spec: String,
        text: String,
        what: &'static str,
    },
    #[error("`{spec}`: `{text}` is not an offset (use decimal or 0x-prefixed hex)")]
    BadOffset { spec: String, text: String },
}

impl FromStr for EventSpec {
    type Err = SpecError;

    fn from_str(spec: &str) -> Result<EventSpec, SpecError> {
        let missing = |what, form| SpecError::Missing {
            spec: spec.to_owned(),
            what,
            form,
        };
        let (kind, rest) = spec.split_once(':').unwrap_or((spec, ""));
        match kind {
            CPU_CLOCK | OFFCPU if !rest.is_empty() => Err(SpecError::Unknown(spec.to_owned())),
            CPU_CLOCK => Ok(EventSpec::CpuClock),
            OFFCPU => Ok(EventSpec::Offcpu),
            "uprobe" => {
                const FORM: &str = "uprobe:PATH:SYMBOL[+OFFSET]";
                let (path, target) = path_and_symbol(rest).ok_or_else(|| missing("PATH:SYMBOL", FORM))?;
                let (symbol, offset) = match target.split_once('+') {
                    Some((symbol, offset)) => (symbol, parse_offset(spec, offset)?),
                    None => (target, 0),
                };
                Ok(EventSpec::Uprobe {
                    path: path.into(),
                    symbol: checked_name(spec, symbol, "symbol")?,
                    offset,
                })
            }
            "uretprobe" => {
                let (path, symbol) =
                    path_and_symbol(rest).ok_or_else(|| missing("PATH:SYMBOL", "uretprobe:PATH:SYMBOL"))?;
                Ok(EventSpec::Uretprobe {
                    path: path.into(),
                    symbol: checked_name(spec, symbol, "symbol")?,
                })
            }
            "kprobe" if rest.is_empty() => Err(missing("SYMBOL", "kprobe:SYMBOL")),
            "kprobe" => Ok(EventSpec::Kprobe {
                symbol: checked_name(spec, rest, "kernel symbol")?,
            }),
            "tracepoint" => {
                const FORM: &str = "tracepoint:CATEGORY:NAME";
                let (category, name) = rest
                    .split_once(':')
                    .filter(|(c, n)| !c.is_empty() && !n.is_empty())
                    .ok_or_else(|| missing("CATEGORY:NAME", FORM))?;
                Ok(EventSpec::Tracepoint {
                    category: checked_name(spec, category, "tracepoint category")?,
                    name: checked_name(spec, name, "tracepoint name")?,
                })
            }
            _ => Err(SpecError::Unknown(spec.to_owned())),
        }
    }
}

/// `PATH:SYMBOL`, split at the last colon (a path may hold colons, a symbol does not).
fn path_and_symbol(rest: &str) -> Option<(&str, &str)> {
    rest.rsplit_once(':').filter(|(p, s)| !p.is_empty() && !s.is_empty())
}

/// A symbol or tracepoint name: letters, digits, `_`, `.` (as in `foo.cold`); nothing that
/// could walk out of a tracefs directory.
fn checked_name(spec: &str, text: &str, what: &'static str) -> Result<String, SpecError> {
    let valid = !text.is_empty()
        && text != "."
        && text != ".."
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    if valid {
        Ok(text.to_owned())
    } else {
        Err(SpecError::BadName {
            spec: spec.to_owned(),
            text: text.to_owned(),
            what,
        })
    }
}

fn parse_offset(spec: &str, text: &str) -> Result<u64, SpecError> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| SpecError::BadOffset {
        spec: spec.to_owned(),
        text: text.to_owned(),
    })
}

impl EventSpec {
    /// The kind of its entry programs.
    pub fn kind(&self) -> EventKind {
        match self {
            EventSpec::CpuClock => EventKind::CpuClock,
            EventSpec::Offcpu => EventKind::Offcpu,
            EventSpec::Uprobe { .. } => EventKind::Uprobe,
            EventSpec::Uretprobe { .. } => EventKind::Uretprobe,
            EventSpec::Kprobe { .. } => EventKind::Kprobe,
            EventSpec::Tracepoint { .. } => EventKind::Tracepoint,
        }
    }
}

/// One event of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// As given on the command line: what outputs call it.
    pub name: String,
    pub spec: EventSpec,
    /// Its id in the kernel's samples (`tracer_common::event::event_id`).
    pub id: u32,
    /// Its entry program's slot within its kind.
    pub slot: usize,
    /// uprobe, uretprobe: where the probe goes (after [`EventSet::resolve_probes`]).
    pub site: Option<ProbeSite>,
}

/// A probed instruction: the file (canonical path) and its offset in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSite {
    pub path: PathBuf,
    pub file_offset: u64,
}

/// Why the events of a session cannot be traced together.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EventSetError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("`{0}` is given twice")]
    Duplicate(String),
    #[error("at most {PROBE_SLOTS} {0} events can be traced at once")]
    TooMany(&'static str),
    #[error("--min-block applies to -e offcpu only")]
    MinBlockWithoutOffcpu,
    #[error("`{spec}`: {source}")]
    Symbol { spec: String, source: SymbolError },
}

/// The validated events of a session, in command-line order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventSet {
    events: Vec<Event>,
    /// offcpu: shorter blocks are not recorded.
    pub min_block: Duration,
}

impl Default for EventSet {
    /// cpu-clock sampling only.
    fn default() -> EventSet {
        EventSet::parse(&[], None).expect("cpu-clock alone is valid")
    }
}

impl EventSet {
    /// Parse and check `specs` (none: cpu-clock), without reading any file: uprobe targets are
    /// resolved by [`EventSet::resolve_probes`].
    pub fn parse(specs: &[String], min_block: Option<Duration>) -> Result<EventSet, EventSetError> {
        let default = [CPU_CLOCK.to_owned()];
        let specs = if specs.is_empty() { &default[..] } else { specs };
        let mut events: Vec<Event> = Vec::with_capacity(specs.len());
        for text in specs {
            let name = text.trim().to_owned();
            let spec: EventSpec = name.parse()?;
            if events.iter().any(|e| e.spec == spec) {
                return Err(EventSetError::Duplicate(name));
            }
            let kind = spec.kind();
            let slot = events.iter().filter(|e| e.spec.kind() == kind).count();
            if slot >= PROBE_SLOTS || (slot >= 1 && matches!(kind, EventKind::CpuClock | EventKind::Offcpu)) {
                return Err(EventSetError::TooMany(kind_name(kind)));
            }
            events.push(Event {
                name,
                spec,
                id: event_id(kind, slot as u32),
                slot,
                site: None,
            });
        }
        let set = EventSet {
            events,
            min_block: min_block.unwrap_or(DEFAULT_MIN_BLOCK),
        };
        if min_block.is_some() && !set.has(EventKind::Offcpu) {
            return Err(EventSetError::MinBlockWithoutOffcpu);
        }
        Ok(set)
    }

    /// Find the probed instruction of every uprobe and uretprobe in its file.
    pub fn resolve_probes(&mut self) -> Result<(), EventSetError> {
        for event in &mut self.events {
            let (path, symbol, offset) = match &event.spec {
                EventSpec::Uprobe { path, symbol, offset } => (path, symbol, *offset),
                EventSpec::Uretprobe { path, symbol } => (path, symbol, 0),
                _ => continue,
            };
            let symbol_error = |source| EventSetError::Symbol {
                spec: event.name.clone(),
                source,
            };
            // Absolute: the kernel resolves nothing, and aya would take a bare file name for a
            // library to look up.
            let path = std::fs::canonicalize(path).map_err(|error| {
                symbol_error(SymbolError::Unreadable {
                    path: path.display().to_string(),
                    error: error.to_string(),
                })
            })?;
            let file_offset = file_offset(&path, symbol, offset).map_err(symbol_error)?;
            event.site = Some(ProbeSite { path, file_offset });
        }
        Ok(())
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Whether an event of `kind` is traced.
    pub fn has(&self, kind: EventKind) -> bool {
        self.events.iter().any(|e| e.spec.kind() == kind)
    }

    /// The names of the events by kernel id.
    pub fn names(&self) -> EventNames {
        EventNames(self.events.iter().map(|e| (e.id, Arc::from(e.name.as_str()))).collect())
    }

    /// What the session records, for its first line: `at 99 Hz` for cpu-clock alone, else the
    /// events, e.g. `on cpu-clock at 99 Hz, offcpu (blocks of 1000 us or more)`.
    pub fn describe(&self, frequency: u64) -> String {
        if let [only] = &self.events[..]
            && only.spec == EventSpec::CpuClock
        {
            return format!("at {frequency} Hz");
        }
        let parts: Vec<String> = self
            .events
            .iter()
            .map(|e| match e.spec {
                EventSpec::CpuClock => format!("{} at {frequency} Hz", e.name),
                EventSpec::Offcpu => format!("{} (blocks of {} us or more)", e.name, self.min_block.as_micros()),
                _ => e.name.clone(),
            })
            .collect();
        format!("on {}", parts.join(", "))
    }
}

fn kind_name(kind: EventKind) -> &'static str {
    match kind {
        EventKind::CpuClock => CPU_CLOCK,
        EventKind::Offcpu => OFFCPU,
        EventKind::Kprobe => "kprobe",
        EventKind::Uprobe => "uprobe",
        EventKind::Uretprobe => "uretprobe",
        EventKind::Tracepoint => "tracepoint",
    }
}

/// The name of each kernel event id of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventNames(HashMap<u32, Arc<str>>);

impl Default for EventNames {
    /// cpu-clock only.
    fn default() -> EventNames {
        EventSet::default().names()
    }
}

impl EventNames {
    /// The name of `id`; an id the session does not know (which the kernel never sends) is
    /// named by its number.
    pub fn name(&self, id: u32) -> Arc<str> {
        match self.0.get(&id) {
            Some(name) => Arc::clone(name),
            None => Arc::from(format!("event-{id:#x}")),
        }
    }
}

/// Whether the event named `name` measures time blocked (its weight is its value).
pub fn is_offcpu(name: &str) -> bool {
    name == OFFCPU
}

#[cfg(test)]
mod tests;
