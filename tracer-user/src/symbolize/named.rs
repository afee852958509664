//! What a function at an address is called: a symbol demangled and bounded, with its file
//! and line, whichever reader found it (blazesym, a Go table, a PLT stub).

use tracer_unwind::names::{capped, capped_str};

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

/// A symbol as the outputs name it: demangled, cut to the bound of every name
/// ([`tracer_unwind::names::MAX_NAME_BYTES`]); a name past the bound is cut before it is demangled
/// (then it no longer demangles and is kept as it is: the demangler never sees a long input).
pub(super) fn symbol_name(raw: &str) -> String {
    capped(demangle(&capped_str(raw)))
}

/// One function at an address: the function itself, or one inlined into it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Named {
    pub(crate) symbol: Option<String>,
    pub(crate) file: Option<String>,
    pub(crate) line: Option<u32>,
    pub(crate) inlined: bool,
}
