//! The independent side of the golden tests: a parser of `readelf --sframe` text as binutils
//! 2.40, 2.44 and the 2.47.50 snapshot print it, into the model both sides are compared in.
//! It must not use the crate's SFrame reader (it is the oracle the reader is checked against).
//!
//! The readelf notation: CFA `sp+8`, `fp+16`, `r10+0` (FLEX: another register), `(fp-8)` (FLEX:
//! dereference); FP/RA `u` (not tracked), `f` (RA at the header's fixed offset, 2.41+), `U`
//! (FLEX padding: not tracked), `c-16` (saved at CFA - 16), `r8+0` / `(fp+0)` (FLEX register
//! rules), RA suffix `[s]` (mangled/signed RA); rows `… RA undefined` (outermost frame);
//! `STARTPC[m]` (PCMASK: row starts are offsets in the repeating block); function suffixes
//! `attr = "SF"` (v3 SIGNAL, FLEX) and `pauth = B key`.

/// A function as both sides are compared: readelf's fields, nothing more.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Func {
    pub(crate) start: u64,
    pub(crate) size: u64,
    pub(crate) mask: bool,
    pub(crate) flex: bool,
    pub(crate) signal: bool,
    pub(crate) key_b: bool,
    pub(crate) rows: Vec<Row>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Row {
    /// Outermost frame: readelf prints only the start and "RA undefined".
    RaUndefined { start: u64 },
    Rules {
        start: u64,
        cfa: Loc,
        fp: Val,
        ra: Val,
        mangled_ra: bool,
    },
}

/// `deref ? *(base + offset) : base + offset`; `base` is `sp`, `fp` or `r<N>`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Loc {
    pub(crate) base: String,
    pub(crate) offset: i64,
    pub(crate) deref: bool,
}

/// Where FP or RA is recovered from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Val {
    /// readelf `u`, `U` (FLEX padding) or `f` (RA at the header's fixed offset).
    Untracked,
    /// readelf `c+N`: saved at CFA + N.
    Cfa(i64),
    /// readelf `rN+M` / `(rN+M)`: a register rule (FLEX).
    Reg(Loc),
}

/// One `readelf --sframe` listing.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    pub(crate) version: u8,
    pub(crate) flags: u8,
    /// `None` when readelf did not print the line and the value cannot be inferred (2.40 never
    /// prints the fixed offsets).
    pub(crate) fixed_fp_offset: Option<i8>,
    pub(crate) fixed_ra_offset: Option<i8>,
    pub(crate) num_fdes: usize,
    pub(crate) num_fres: usize,
    pub(crate) functions: Vec<Func>,
}

/// Parse the text of `readelf --sframe` as binutils 2.40, 2.44 and the 2.47.50 snapshot print it.
pub(crate) fn parse_readelf(text: &str) -> Result<Listing, String> {
    let mut l = Listing::default();
    let (mut fixed_fp, mut fixed_ra) = (None, None);
    let mut lines = text.lines().enumerate().peekable();
    while let Some((n, raw)) = lines.next() {
        let line = raw.trim();
        let err = |what: &str| format!("line {}: {what}: {raw:?}", n + 1);
        if let Some(v) = line.strip_prefix("Version: SFRAME_VERSION_") {
            l.version = v.parse().map_err(|_| err("version"))?;
        } else if let Some(first) = line.strip_prefix("Flags:") {
            let mut names = first.to_owned();
            // v3 prints one flag per line: "Flags: A,\n           B".
            while names.trim_end().ends_with(',') {
                let (_, next) = lines.next().ok_or_else(|| err("flags continue"))?;
                names.push_str(next);
            }
            for name in names.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                l.flags |= match name {
                    "NONE" => 0,
                    "SFRAME_F_FDE_SORTED" => 1,
                    "SFRAME_F_FRAME_POINTER" => 2,
                    "SFRAME_F_FDE_FUNC_START_PCREL" => 4,
                    _ => return Err(err("unknown flag")),
                };
            }
        } else if let Some(v) = line.strip_prefix("CFA fixed FP offset:") {
            fixed_fp = Some(v.trim().parse().map_err(|_| err("fixed FP offset"))?);
        } else if let Some(v) = line.strip_prefix("CFA fixed RA offset:") {
            fixed_ra = Some(v.trim().parse().map_err(|_| err("fixed RA offset"))?);
        } else if let Some(v) = line.strip_prefix("Num FDEs:") {
            l.num_fdes = v.trim().parse().map_err(|_| err("num FDEs"))?;
        } else if let Some(v) = line.strip_prefix("Num FREs:") {
            l.num_fres = v.trim().parse().map_err(|_| err("num FREs"))?;
        } else if line.starts_with("func idx") {
            l.functions
                .push(parse_func_line(line).ok_or_else(|| err("function line"))?);
        } else if line.starts_with("STARTPC") {
            let f = l.functions.last_mut().ok_or_else(|| err("rows before a function"))?;
            f.mask = line.starts_with("STARTPC[m]");
        } else if line
            .split_whitespace()
            .next()
            .is_some_and(|w| w.len() == 16 && w.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            let f = l.functions.last_mut().ok_or_else(|| err("row before a function"))?;
            f.rows.push(parse_row(line).ok_or_else(|| err("row"))?);
        } else if !(line.is_empty()
            || line.starts_with("Contents of the SFrame section")
            || line == "Header :"
            || line == "Function Index :")
        {
            return Err(err("unexpected line"));
        }
    }
    if l.version == 0 {
        return Err("no SFrame header in the listing".to_owned());
    }
    // From 2.41 on readelf prints the fixed offsets whenever they are non-zero; 2.40 (the only
    // readelf that writes v1 here) never does, so an absent line means 0 only from v2 on.
    let known = |v: Option<i8>| {
        if l.version >= 2 { Some(v.unwrap_or(0)) } else { v }
    };
    l.fixed_fp_offset = known(fixed_fp);
    l.fixed_ra_offset = known(fixed_ra);
    Ok(l)
}

/// `func idx [3]: pc = 0x401062, size = 40 bytes, attr = "SF", pauth = B key`
fn parse_func_line(line: &str) -> Option<Func> {
    let (_, rest) = line.split_once("pc = 0x")?;
    let (pc, rest) = rest.split_once(", size = ")?;
    let (size, rest) = rest.split_once(" bytes")?;
    let attr = rest
        .split_once("attr = \"")
        .and_then(|(_, a)| a.split_once('"'))
        .map_or("", |(a, _)| a);
    Some(Func {
        start: u64::from_str_radix(pc, 16).ok()?,
        size: size.parse().ok()?,
        mask: false,
        flex: attr.contains('F'),
        signal: attr.contains('S'),
        key_b: rest.contains("pauth = B key"),
        rows: Vec::new(),
    })
}

/// `0000000000401075  (fp-8)    (fp+0)    U` or `00000000004000e8  RA undefined`
fn parse_row(line: &str) -> Option<Row> {
    let mut words = line.split_whitespace();
    let start = u64::from_str_radix(words.next()?, 16).ok()?;
    let cols: Vec<&str> = words.collect();
    match cols.as_slice() {
        ["RA", "undefined"] => Some(Row::RaUndefined { start }),
        [cfa, fp, ra] => {
            let (ra, mangled_ra) = match ra.strip_suffix("[s]") {
                Some(r) => (r, true),
                None => (*ra, false),
            };
            Some(Row::Rules {
                start,
                cfa: parse_loc(cfa)?,
                fp: parse_val(fp)?,
                ra: parse_val(ra)?,
                mangled_ra,
            })
        }
        _ => None,
    }
}

/// `sp+8`, `r10+0`, `(fp-8)` (parentheses: dereference).
fn parse_loc(s: &str) -> Option<Loc> {
    let (inner, deref) = match s.strip_prefix('(').and_then(|t| t.strip_suffix(')')) {
        Some(t) => (t, true),
        None => (s, false),
    };
    let split = inner.find(['+', '-'])?;
    let (base, off) = inner.split_at(split);
    // "+8", "-8", and "+-8" should a readelf ever print `+%d` with a negative value.
    let offset = off.strip_prefix('+').unwrap_or(off).parse().ok()?;
    (!base.is_empty()).then(|| Loc {
        base: base.to_owned(),
        offset,
        deref,
    })
}

/// `u`, `U`, `f`, `c-16`, or a register rule.
fn parse_val(s: &str) -> Option<Val> {
    match s {
        "u" | "U" | "f" => Some(Val::Untracked),
        _ => match s.strip_prefix('c') {
            Some(off) => Some(Val::Cfa(off.strip_prefix('+').unwrap_or(off).parse().ok()?)),
            None => parse_loc(s).map(Val::Reg),
        },
    }
}

#[cfg(test)]
mod tests;
