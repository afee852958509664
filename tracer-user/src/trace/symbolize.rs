//! Frame names with blazesym, in one batch per object at output time: ELF symbols (and DWARF
//! when present) for user frames by object-relative address, kallsyms for kernel frames.
//! A frame without a symbol is named by its object and offset, never by a guessed neighbour.

use std::collections::{HashMap, HashSet};

use blazesym::symbolize::{
    Input, Symbolized, Symbolizer,
    source::{Elf, Kernel, Source},
};

use super::{objects::Catalog, profile::Frame};

/// A symbol name for people: Rust (`_R`, legacy `_ZN...E`) and Itanium C++ (`_Z`) names
/// demangled, anything else (C) as it is.
pub fn demangle(name: &str) -> String {
    if let Ok(rust) = rustc_demangle::try_demangle(name) {
        return format!("{rust:#}");
    }
    if name.starts_with("_Z")
        && let Ok(symbol) = cpp_demangle::Symbol::new(name)
        && let Ok(text) = symbol.demangle()
    {
        return text;
    }
    name.to_owned()
}

/// Names of every frame of a profile.
pub struct Names {
    names: HashMap<Frame, String>,
}

impl Names {
    /// Symbolize every distinct frame in `frames`.
    pub fn resolve<'a>(frames: impl Iterator<Item = &'a Frame>, catalog: &Catalog) -> Names {
        let unique: HashSet<Frame> = frames.copied().collect();
        let mut by_object: HashMap<usize, Vec<u64>> = HashMap::new();
        let mut kernel = Vec::new();
        for frame in &unique {
            match *frame {
                Frame::User { object, addr } => by_object.entry(object).or_default().push(addr),
                Frame::Kernel { addr } => kernel.push(addr),
                Frame::UserUnknown { .. } => {}
            }
        }
        // blazesym would demangle plain C names that happen to read as mangled types (`c` ->
        // `char`); names are demangled here, and only when they carry a mangling prefix.
        let symbolizer = Symbolizer::builder().enable_demangling(false).build();
        let mut names = HashMap::with_capacity(unique.len());
        for (object, addrs) in by_object {
            let Some(obj) = catalog.objects.get(object) else {
                continue;
            };
            let src = Source::Elf(Elf::new(&obj.path));
            let symbols = symbolizer
                .symbolize(&src, Input::VirtOffset(&addrs))
                .unwrap_or_default();
            for (i, &addr) in addrs.iter().enumerate() {
                let name = match symbols.get(i) {
                    Some(Symbolized::Sym(sym)) => demangle(&sym.name),
                    _ => format!("[{}+{addr:#x}]", obj.name),
                };
                names.insert(Frame::User { object, addr }, name);
            }
        }
        if !kernel.is_empty() {
            let src = Source::Kernel(Kernel::default());
            let symbols = symbolizer.symbolize(&src, Input::AbsAddr(&kernel)).unwrap_or_default();
            for (i, &addr) in kernel.iter().enumerate() {
                let name = match symbols.get(i) {
                    Some(Symbolized::Sym(sym)) => sym.name.to_string(),
                    _ => format!("[kernel {addr:#x}]"),
                };
                names.insert(Frame::Kernel { addr }, name);
            }
        }
        Names { names }
    }

    /// The name of a frame.
    pub fn get(&self, frame: &Frame) -> String {
        match (self.names.get(frame), frame) {
            (Some(name), _) => name.clone(),
            (None, Frame::UserUnknown { addr } | Frame::User { addr, .. } | Frame::Kernel { addr }) => {
                format!("[unknown {addr:#x}]")
            }
        }
    }
}

#[cfg(test)]
impl Names {
    /// Names given directly, for tests of the writers.
    pub(super) fn from_map(names: HashMap<Frame, String>) -> Names {
        Names { names }
    }
}
