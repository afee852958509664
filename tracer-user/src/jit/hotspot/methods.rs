//! The methods a scan's compiled code runs (`scopes`: a compiled method's own, and those
//! inlined into it), read once per scan from the process's memory: `Class.method`, and the
//! compressed line number table after the method's bytecodes. Bounded: [`MAX_METHODS`] per
//! scan, [`MAX_TABLE`] bytes per table.

use std::collections::HashMap;

use super::vmstructs::{Layout, MAX_NAME, Memory, ScopeLayout};

/// Methods read per scan at most (the frames of others keep their compiled method's name,
/// without a line).
pub const MAX_METHODS: usize = 1 << 16;
/// The most bytes of one line table read.
pub const MAX_TABLE: usize = 4096;
/// Bit 0 of `ConstMethod`'s flags: it has a line table (17, 21 and 25).
const HAS_LINE_TABLE: u32 = 1;

/// One method as read: its name, and its line table (empty: none, or not readable).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Method {
    pub name: Option<String>,
    pub lines: Vec<u8>,
}

/// Every method of `methods` (those the Java scopes of a scan's blobs name), read through
/// `mem`; the names of those in `named` (read already: the compiled methods' own) are not
/// read again.
pub fn read(
    mem: &mut dyn Memory,
    layout: &Layout,
    l: &ScopeLayout,
    methods: impl Iterator<Item = u64>,
    mut named: HashMap<u64, Option<String>>,
) -> HashMap<u64, Method> {
    let mut out = HashMap::new();
    for method in methods {
        if out.contains_key(&method) {
            continue;
        }
        if out.len() >= MAX_METHODS {
            break;
        }
        let name = named
            .remove(&method)
            .unwrap_or_else(|| method_name(mem, layout, method));
        let lines = name
            .as_ref()
            .and_then(|_| line_table(mem, layout, l, method))
            .unwrap_or_default();
        out.insert(method, Method { name, lines });
    }
    out
}

/// The compressed line table of the method at `method`, if it has one: at most [`MAX_TABLE`]
/// bytes (fewer where its memory ends first).
pub fn line_table(mem: &mut dyn Memory, layout: &Layout, l: &ScopeLayout, method: u64) -> Option<Vec<u8>> {
    let constant = mem.u64(method.checked_add(layout.method_const)?)?;
    let flags = match l.const_flags_width {
        2 => u32::from(mem.u16(constant.checked_add(l.const_flags)?)?),
        _ => mem.i32(constant.checked_add(l.const_flags)?)? as u32,
    };
    if flags & HAS_LINE_TABLE == 0 {
        return None;
    }
    let code_size = mem.u16(constant.checked_add(l.const_code_size)?)?;
    let at = constant.checked_add(l.const_size)?.checked_add(u64::from(code_size))?;
    // Up to the end of its page first, then page by page, so that no read crosses into
    // memory not mapped.
    let mut table = Vec::new();
    while table.len() < MAX_TABLE {
        let from = at.checked_add(table.len() as u64)?;
        let room = ((4096 - from % 4096) as usize).min(MAX_TABLE - table.len());
        let mut chunk = vec![0u8; room];
        if !mem.read(from, &mut chunk) {
            break;
        }
        let done = chunk.contains(&0);
        table.extend_from_slice(&chunk);
        if done {
            break;
        }
    }
    (!table.is_empty()).then_some(table)
}

/// `Class.method` of the `Method` at `method` (a class name's `/` made `.`).
pub fn method_name(mem: &mut dyn Memory, layout: &Layout, method: u64) -> Option<String> {
    let constant_method = mem.u64(method.checked_add(layout.method_const)?)?;
    let pool = mem.u64(constant_method.checked_add(layout.const_constants)?)?;
    let index = mem.u16(constant_method.checked_add(layout.const_name_index)?)?;
    let holder = mem.u64(pool.checked_add(layout.pool_holder)?)?;
    let class_name = mem.u64(holder.checked_add(layout.klass_name)?)?;
    let class = symbol(mem, layout, class_name)?;
    let name_at = pool.checked_add(layout.pool_size)?.checked_add(u64::from(index) * 8)?;
    let method_name = mem.u64(name_at)?;
    let method = symbol(mem, layout, method_name)?;
    Some(format!("{}.{method}", class.replace('/', ".")))
}

/// The text of the `Symbol` at `at` (at most [`MAX_NAME`] bytes, UTF-8).
fn symbol(mem: &mut dyn Memory, layout: &Layout, at: u64) -> Option<String> {
    let len = mem.u16(at.checked_add(layout.symbol_length)?)? as usize;
    if len == 0 || len > MAX_NAME {
        return None;
    }
    let mut text = vec![0u8; len];
    mem.read(at.checked_add(layout.symbol_body)?, &mut text).then_some(())?;
    String::from_utf8(text).ok().filter(|t| !t.contains('\0'))
}
