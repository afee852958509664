//! A JavaScript function named from its `SharedFunctionInfo` in a V8 process's memory: its
//! name, its script's name, and the line it starts on. Every byte is the process's, read
//! through bounded reads, and every object's instance type is checked before its fields are
//! trusted: what does not check out is an error, never a guessed name.
//!
//! The name is the shared info's own when it holds a string; once the function is compiled it
//! holds the function's scope description (`ScopeInfo`) instead, whose slots V8 describes only
//! in part (`v8dbg_scopeinfo_idx_*`: the count of context locals and the first of their
//! names). After the locals' names and their properties come the function's own name and its
//! slot index (a Smi), then the name V8 inferred for an anonymous function (a string or
//! `undefined`); the start and end of the function in its script (Smis) follow in V8 11, and
//! in V8 13 are the two header slots just before the first local's name (which is why that
//! one is 5 there, 3 in 11). That order is V8's for the versions of
//! [`super::layout::KNOWN_MAJORS`]; each slot is checked to be of its kind, so a layout that
//! differs is refused (`scope_info`), not misread.

use super::{V8Error, layout::Layout};

/// Characters of a name kept at most.
pub const MAX_NAME: u64 = 256;
/// Bytes of a script's source read at most to find a function's line.
pub const MAX_SOURCE: u64 = 1 << 20;
/// Context locals a scope description may have (more: refused).
const MAX_LOCALS: u64 = 1 << 16;
/// Context locals V8 keeps the names of inline (more: in a hash table, one slot).
const INLINE_LOCALS: u64 = 75;
/// Parts of a string made of parts followed at most.
const MAX_PARTS: u32 = 8;

/// A JavaScript function, as a frame is named with it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JsFunction {
    /// Its name, or the name V8 inferred for it, or `(anonymous)`.
    pub name: String,
    /// Its script's name (a path, `node:internal/...`), empty when it has none.
    pub file: String,
    /// The line it starts on (1-based), 0 when not known.
    pub line: u32,
}

/// What tells a shared info apart from another made at its address: its name-or-scope and
/// script words.
pub type Identity = [u64; 2];

/// Reads the process's memory: false when any of `buf` cannot be read.
pub type Read<'a> = &'a mut dyn FnMut(u64, &mut [u8]) -> bool;

/// Reads V8's objects in a process's memory, each checked as it is read.
pub(super) struct Reader<'a, 'b> {
    pub(super) layout: &'a Layout,
    pub(super) read: Read<'b>,
}

impl Reader<'_, '_> {
    pub(super) fn u64(&mut self, addr: u64) -> Result<u64, V8Error> {
        let mut b = [0; 8];
        if (self.read)(addr, &mut b) {
            Ok(u64::from_le_bytes(b))
        } else {
            Err(V8Error::Unreadable)
        }
    }

    /// The field at byte `offset` of heap object `object` (a tagged pointer).
    pub(super) fn field(&mut self, object: u64, offset: u64) -> Result<u64, V8Error> {
        self.u64(object.wrapping_sub(1).wrapping_add(offset))
    }

    /// The instance type of `object`, `None` when it is no heap object.
    pub(super) fn kind(&mut self, object: u64) -> Result<Option<u16>, V8Error> {
        if object & 3 != 1 || object >> 48 != 0 {
            return Ok(None);
        }
        let map = self.field(object, 0)?;
        if map & 3 != 1 || map >> 48 != 0 {
            return Err(V8Error::NotAnObject);
        }
        let mut b = [0; 2];
        let at = map.wrapping_sub(1).wrapping_add(self.layout.map_instance_type);
        if !(self.read)(at, &mut b) {
            return Err(V8Error::Unreadable);
        }
        Ok(Some(u16::from_le_bytes(b)))
    }

    pub(super) fn is_string(&mut self, object: u64) -> Result<bool, V8Error> {
        Ok(self.kind(object)?.is_some_and(|t| t < self.layout.first_nonstring_type))
    }

    pub(super) fn smi(&self, word: u64) -> Option<i64> {
        (word & 1 == 0).then_some((word as i64) >> self.layout.smi_shift)
    }

    /// The string `object`, at most [`MAX_NAME`] characters (a longer one is cut).
    fn string(&mut self, object: u64) -> Result<String, V8Error> {
        let mut out = String::new();
        self.append(object, &mut out, 0)?;
        Ok(out)
    }

    fn append(&mut self, object: u64, out: &mut String, depth: u32) -> Result<(), V8Error> {
        let l = self.layout;
        let kind = self
            .kind(object)?
            .filter(|&t| t < l.first_nonstring_type)
            .ok_or(V8Error::NotAString)?;
        let representation = kind & l.string_representation_mask;
        if representation == l.cons_tag || representation == l.thin_tag {
            if depth >= MAX_PARTS {
                return Err(V8Error::NotAString);
            }
            let parts = if representation == l.cons_tag {
                [self.field(object, l.cons_first)?, self.field(object, l.cons_second)?]
            } else {
                [self.field(object, l.thin_actual)?, 0]
            };
            for part in parts.into_iter().filter(|&p| p != 0) {
                self.append(part, out, depth + 1)?;
            }
            return Ok(());
        }
        if representation != l.seq_tag {
            return Err(V8Error::NotAString);
        }
        let mut b = [0; 4];
        if !(self.read)(object.wrapping_sub(1).wrapping_add(l.string_length), &mut b) {
            return Err(V8Error::Unreadable);
        }
        let length = u64::try_from(i32::from_le_bytes(b)).map_err(|_| V8Error::NotAString)?;
        let room = MAX_NAME.saturating_sub(out.chars().count() as u64);
        let take = length.min(room);
        let one_byte = kind & l.string_encoding_mask == l.one_byte_tag;
        let mut bytes = vec![0u8; (if one_byte { take } else { 2 * take }) as usize];
        if !(self.read)(object.wrapping_sub(1).wrapping_add(l.seq_chars), &mut bytes) {
            return Err(V8Error::Unreadable);
        }
        if one_byte {
            out.extend(bytes.iter().map(|&b| char::from(b)));
        } else {
            let units = bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]));
            out.extend(char::decode_utf16(units).map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER)));
        }
        Ok(())
    }

    /// Slot `i` of scope description `scope` (after its map).
    fn slot(&mut self, scope: u64, i: u64) -> Result<u64, V8Error> {
        self.field(scope, 8 + 8 * i)
    }

    /// The function's name (its own, else the inferred one, else empty) and its start in its
    /// script, from its scope description (module docs).
    fn scope(&mut self, scope: u64) -> Result<(String, Option<u64>), V8Error> {
        let locals = self.slot(scope, self.layout.scope_context_locals)?;
        let locals = self
            .smi(locals)
            .and_then(|n| u64::try_from(n).ok())
            .filter(|&n| n <= MAX_LOCALS)
            .ok_or(V8Error::ScopeInfo)?;
        let names = if locals < INLINE_LOCALS { locals } else { 1 };
        let at = self.layout.scope_first_vars + names + locals;
        // Name, its slot, the inferred name, and (V8 11) the start and end.
        let header = self.layout.scope_first_vars >= 5;
        let mut slots = [0u64; 5];
        for (i, slot) in slots.iter_mut().enumerate().take(if header { 3 } else { 5 }) {
            *slot = self.slot(scope, at + i as u64)?;
        }
        if !self.is_string(slots[0])? || self.smi(slots[1]).is_none() {
            return Err(V8Error::ScopeInfo);
        }
        let mut name = self.string(slots[0])?;
        // The inferred name, when there is one (a string, or `undefined`), then (V8 11) the
        // positions; in V8 13 the positions are in the header.
        let positions = if self.smi(slots[2]).is_some() {
            [slots[2], slots[3]]
        } else {
            if name.is_empty() && self.is_string(slots[2])? {
                name = self.string(slots[2])?;
            }
            [slots[3], slots[4]]
        };
        let positions = if header {
            let first = self.layout.scope_first_vars;
            [self.slot(scope, first - 2)?, self.slot(scope, first - 1)?]
        } else {
            positions
        };
        let start = match (self.smi(positions[0]), self.smi(positions[1])) {
            (Some(start), Some(end)) if 0 <= start && start <= end => Some(start as u64),
            _ => None,
        };
        Ok((name, start))
    }

    /// The line of character `position` in the source `source` (1-based), `None` when the
    /// source is not one whose characters are read ([`Reader::flat_source`]) or the position
    /// is past [`MAX_SOURCE`].
    fn line(&mut self, source: u64, position: u64) -> Result<Option<u32>, V8Error> {
        let Some(chars) = self.source_prefix(source, Some(position))? else {
            return Ok(None);
        };
        let lines = chars.iter().filter(|&&b| b == b'\n').count();
        Ok(u32::try_from(lines + 1).ok())
    }

    /// The characters of source `source`, all of them (at most [`MAX_SOURCE`]), as far as
    /// lines go (a character that is no newline may stand as another): `None` when it is
    /// not a sequential string (one- or two-byte) or an external one-byte string whose
    /// characters V8 keeps a pointer to (Node's own modules), or is longer.
    pub(super) fn flat_source(&mut self, source: u64) -> Result<Option<Vec<u8>>, V8Error> {
        self.source_prefix(source, None)
    }

    /// The first `upto` characters of source `source` (all when `None`), as
    /// [`Reader::flat_source`] gives them; `None` when it has fewer, or they are past
    /// [`MAX_SOURCE`].
    fn source_prefix(&mut self, source: u64, upto: Option<u64>) -> Result<Option<Vec<u8>>, V8Error> {
        let l = self.layout;
        let Some(kind) = self.kind(source)?.filter(|&t| t < l.first_nonstring_type) else {
            return Ok(None);
        };
        let one_byte = kind & l.string_encoding_mask == l.one_byte_tag;
        let chars = if kind & l.string_representation_mask == l.seq_tag {
            source.wrapping_sub(1).wrapping_add(l.seq_chars)
        } else if kind == l.external_one_byte_type {
            // The characters' address, kept after the resource's.
            match self.field(source, l.external_resource + 8)? {
                0 => return Ok(None),
                at => at,
            }
        } else {
            return Ok(None);
        };
        let mut b = [0; 4];
        if !(self.read)(source.wrapping_sub(1).wrapping_add(l.string_length), &mut b) {
            return Err(V8Error::Unreadable);
        }
        let length = u64::try_from(i32::from_le_bytes(b)).unwrap_or(0);
        let take = upto.unwrap_or(length);
        if take > length || take > MAX_SOURCE {
            return Ok(None);
        }
        let width = if one_byte { 1 } else { 2 };
        let mut bytes = vec![0u8; (take * width) as usize];
        if !(self.read)(chars, &mut bytes) {
            return Err(V8Error::Unreadable);
        }
        if !one_byte {
            let units = bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]));
            bytes = units
                .map(|u| if u == u16::from(b'\n') { b'\n' } else { b' ' })
                .collect();
        }
        Ok(Some(bytes))
    }
}

/// The function of shared info `shared` (a tagged pointer), and what tells it apart.
pub fn function(layout: &Layout, shared: u64, read: Read<'_>) -> Result<(JsFunction, Identity), V8Error> {
    let mut r = Reader { layout, read };
    if r.kind(shared)? != Some(layout.shared_type) {
        return Err(V8Error::NotShared);
    }
    let name_or_scope = r.field(shared, layout.shared_name_or_scope_info)?;
    let script = r.field(shared, layout.shared_script)?;
    let (mut name, start) = match r.kind(name_or_scope)? {
        Some(t) if t < layout.first_nonstring_type => (r.string(name_or_scope)?, None),
        Some(t) if t == layout.scope_info_type => r.scope(name_or_scope)?,
        // No name (a Smi: the empty scope description).
        _ => (String::new(), None),
    };
    if name.is_empty() {
        name = "(anonymous)".into();
    }
    let (mut file, mut line) = (String::new(), 0);
    if r.kind(script)? == Some(layout.script_type) {
        let script_name = r.field(script, layout.script_name)?;
        if r.is_string(script_name)? {
            file = r.string(script_name)?;
        }
        if let Some(start) = start {
            let source = r.field(script, layout.script_source)?;
            line = r.line(source, start)?.unwrap_or(0);
        }
    }
    Ok((JsFunction { name, file, line }, [name_or_scope, script]))
}

/// What tells shared info `shared` apart now (see [`function`]), if it still is one.
pub fn identity(layout: &Layout, shared: u64, read: Read<'_>) -> Result<Identity, V8Error> {
    let mut r = Reader { layout, read };
    if r.kind(shared)? != Some(layout.shared_type) {
        return Err(V8Error::NotShared);
    }
    Ok([
        r.field(shared, layout.shared_name_or_scope_info)?,
        r.field(shared, layout.shared_script)?,
    ])
}
