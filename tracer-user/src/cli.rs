//! Command-line flags, as clap derives them. Raw flags only: validation that needs more than
//! the flag itself happens in `commands`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// A system-wide stack tracer that walks SFrame unwind tables in eBPF.
///
/// Binaries built with `-Wa,--gsframe` carry `.sframe`, a compact unwind format. sframe-trace
/// reads it (and `.eh_frame` where it is missing) and unwinds user stacks in the kernel without
/// frame pointers and without copying stacks to userspace.
///
/// Exit status: 0 success, 1 nothing to report or findings (no `.sframe`, check found problems,
/// no function at --pc), 2 error (unreadable or malformed input, cannot trace on this host).
#[derive(Debug, Parser)]
#[command(name = "sframe-trace", version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a file's SFrame section, like `readelf --sframe`, or as JSON.
    ///
    /// Examples:
    ///   sframe-trace dump ./app
    ///   sframe-trace dump --pc 0x401136 ./app
    ///   sframe-trace dump --json ./libfoo.so | jq '.functions | length'
    #[command(verbatim_doc_comment)]
    Dump {
        /// ELF file (executable, shared object or relocatable object).
        file: PathBuf,
        /// One JSON object (the stable, documented contract) instead of text.
        #[arg(long)]
        json: bool,
        /// Only the function and row that cover this address (hex with 0x, or decimal), as the
        /// ELF file places it.
        #[arg(long, value_name = "ADDR", value_parser = parse_address)]
        pc: Option<u64>,
    },
    /// Validate a file's SFrame section and compare it with the file's `.eh_frame`.
    ///
    /// Checks that functions are sorted and do not overlap, that rows lie inside their function
    /// and ascend, that offsets are sane, and, where the file has `.eh_frame` (or
    /// `.debug_frame`), that every row's CFA rule agrees with it. Exit status 0 when clean,
    /// 1 with findings: suitable for a toolchain's CI.
    Check {
        /// ELF file to check.
        file: PathBuf,
    },
    /// Check that this host can trace: privileges, BTF, loading the eBPF program and taking
    /// cpu-clock samples. Prints the sample counters.
    #[cfg(feature = "ebpf")]
    Doctor {
        /// Count samples of this process only (default: every process).
        #[arg(short, long)]
        pid: Option<u32>,
        /// Sampling frequency in Hz.
        #[arg(short = 'F', long, default_value_t = 99)]
        frequency: u64,
        /// How long to sample, in seconds.
        #[arg(short, long, default_value_t = 1.0)]
        duration: f64,
    },
}

/// Parse `0x`-prefixed hex or decimal.
fn parse_address(s: &str) -> Result<u64, String> {
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    parsed.map_err(|_| format!("`{s}` is not an address (use 0x-prefixed hex or decimal)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Addresses parse as hex with a 0x prefix or as decimal, and garbage is refused.
    #[test]
    fn addresses_parse() {
        assert_eq!(parse_address("0x401000"), Ok(0x401000));
        assert_eq!(parse_address("4198400"), Ok(0x401000));
        assert!(parse_address("0xzz").is_err());
        assert!(parse_address("").is_err());
    }
}
