//! Constructors of the typed SFrame data for tests, shared by the unit tests of every module
//! that consumes it (reader, check, table, and tracer-user's table set). Not used by the tracer.

use super::{Abi, CfaRule, FLAG_FDE_SORTED, FdeType, FreType, Function, Header, PauthKey, PcType, Reg, Row, Rule};

/// An INC DEFAULT function at `start` of `size` bytes, first in its section.
pub fn function(start: u64, size: u32) -> Function {
    Function {
        start,
        size,
        pc_type: PcType::Inc,
        rep_size: 0,
        fde_type: FdeType::Default,
        signal: false,
        pauth_key: PauthKey::A,
        fre_type: FreType::Addr4,
        num_fres: 1,
        fre_offset: 0,
        index: 0,
    }
}

/// A row at `start`: `CFA = base + cfa`, RA and FP as given.
pub fn row(start: u32, base: Reg, cfa: i64, ra: Rule, fp: Rule) -> Row {
    Row {
        start,
        cfa: CfaRule {
            base,
            offset: cfa,
            deref: false,
        },
        ra,
        fp,
        ra_undefined: false,
        mangled_ra: false,
        offset: 0,
    }
}

/// A sorted header of `abi` and `version`, RA at `CFA + fixed_ra`, no FP offset, no counts.
pub fn header(abi: Abi, version: u8, fixed_ra: i8) -> Header {
    Header {
        version,
        flags: FLAG_FDE_SORTED,
        abi,
        fixed_fp_offset: 0,
        fixed_ra_offset: fixed_ra,
        auxhdr_len: 0,
        num_fdes: 0,
        num_fres: 0,
        fre_len: 0,
        fdeoff: 0,
        freoff: 0,
    }
}
