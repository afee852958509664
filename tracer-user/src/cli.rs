//! Command-line flags, as clap derives them. Raw flags only: validation that needs more than
//! the flag itself happens in `commands`.

use std::{ffi::OsString, path::PathBuf, time::Duration};

use clap::{Parser, Subcommand};

/// A system-wide stack tracer that walks SFrame unwind tables in eBPF.
///
/// Binaries built with `-Wa,--gsframe` carry `.sframe`, a compact unwind format. sframe-trace
/// reads it (and `.eh_frame` where it is missing) and unwinds user stacks in the kernel without
/// frame pointers and without copying stacks to userspace.
///
/// Without a subcommand it traces: `sframe-trace --pid PID`, `sframe-trace -- COMMAND ARGS...`,
/// or, with neither (or `--all`), every process on the host, including processes started later
/// and code they load later (dlopen). It writes the stacks when the processes exit, at
/// --duration or on Ctrl-C (or SIGTERM, SIGHUP, SIGUSR1, SIGPIPE), and a summary on stderr.
///
/// Exit status: 0 success, 1 nothing to report or findings (no `.sframe`, check found problems,
/// no function at --pc, every OTLP export failed), 2 error (unreadable or malformed input, a
/// bad value, cannot trace on this host, an output could not be written).
#[derive(Debug, Parser)]
#[command(
    name = "sframe-trace",
    version,
    long_version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("SFRAME_TRACE_COMMIT"), ")"),
    propagate_version = true,
    args_conflicts_with_subcommands = true,
    after_help = "Examples:\n  \
        sudo sframe-trace --pid 1234 -d 10 > stacks.folded\n  \
        sudo sframe-trace -d 30 -o host.folded          (every process)\n  \
        sudo sframe-trace -F 999 --no-kernel -- ./my-app --its-flags\n  \
        sudo sframe-trace -e uprobe:./my-app:parse -e offcpu -- ./my-app\n  \
        sudo sframe-trace --live --pid 1234 -o stacks.folded   (a view in the terminal)\n  \
        sframe-trace dump --pc 0x401136 ./my-app"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub trace: TraceArgs,
}

/// The `--help` sections of the tracing flags (and the CLI reference's, `docs/cli.md`).
pub const TARGETS: &str = "Targets";
pub const SAMPLING: &str = "Sampling";
pub const OUTPUT: &str = "Output";
pub const SYMBOLS: &str = "Symbols";
pub const EXPORT: &str = "Export";

/// Tracing (the default mode): sample the user and kernel stacks of processes on CPU.
#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    /// Trace these running processes (and all their threads): PID[,PID...].
    #[arg(
        help_heading = TARGETS,
        short,
        long,
        value_name = "PID",
        value_delimiter = ',',
        allow_negative_numbers = true
    )]
    pub pid: Vec<u32>,
    /// Trace every process on the host, including those started later (the default when
    /// neither --pid nor a command is given).
    #[arg(help_heading = TARGETS, short, long, conflicts_with = "pid")]
    pub all: bool,
    /// Kernel memory the unwind tables may use at most (K, M or G suffix). Objects that do not
    /// fit are reported in the summary and unwound with frame pointers only.
    #[arg(help_heading = SAMPLING, long, default_value = "256M", value_name = "SIZE", value_parser = parse_size)]
    pub max_table_memory: u64,
    /// Size of the ring buffer that carries samples to userspace (K or M suffix; a power of
    /// two, at least the page size). Samples that find it full are lost and counted in the
    /// summary: raise it for high frequencies on many CPUs.
    #[arg(help_heading = SAMPLING, long, default_value = "8M", value_name = "SIZE", value_parser = parse_ring_buffer_size)]
    pub ring_buffer_size: u32,
    /// Sampling frequency per CPU, in Hz (the cpu-clock event).
    #[arg(
        help_heading = SAMPLING,
        short = 'F',
        long,
        default_value_t = 99,
        value_name = "HZ",
        allow_negative_numbers = true
    )]
    pub frequency: u64,
    /// Take stacks on this event (repeatable; default cpu-clock): `cpu-clock` (sampling at
    /// -F), `offcpu` (where threads block, weighted by the time blocked),
    /// `uprobe:PATH:SYMBOL[+OFFSET]`, `uretprobe:PATH:SYMBOL`, `kprobe:SYMBOL`,
    /// `tracepoint:CATEGORY:NAME`. Every event records user and kernel stacks of the traced
    /// processes.
    #[arg(help_heading = SAMPLING, short, long = "event", value_name = "EVENT")]
    pub event: Vec<String>,
    /// `-e offcpu`: record blocks of at least this many microseconds [default: 1000].
    #[arg(help_heading = SAMPLING, long, value_name = "USECS", allow_negative_numbers = true)]
    pub min_block: Option<u64>,
    /// Stop after this long: seconds, or a number with `ms`, `s`, `m` or `h` (`30`, `500ms`,
    /// `1m`; default: when the traced processes exit, or on Ctrl-C).
    #[arg(help_heading = SAMPLING, short, long, value_name = "DURATION", value_parser = parse_secs, allow_negative_numbers = true)]
    pub duration: Option<Duration>,
    /// Output format (repeatable: each -f writes the same stacks to its own --output, paired
    /// in the order given; one file format may go to stdout).
    ///
    /// At the end: `folded`, one line per distinct stack, `comm;outer;...;inner COUNT`
    /// (flamegraph.pl, inferno, speedscope read it); `svg`, an interactive flame graph; `pprof`,
    /// gzipped profile.proto for `go tool pprof` (binary: needs --output or a redirected stdout).
    /// Streamed, one record per sample as it arrives: `json`, one JSON object per line;
    /// `perf-script`, the text of `perf script` with call chains (stackcollapse-perf,
    /// speedscope, the Firefox profiler read it).
    /// Sent, not written: `otlp`, OpenTelemetry profiles to the collector at --otlp-endpoint,
    /// every --export-interval and once more at the end (takes no --output).
    ///
    /// Example: `-f folded -o stacks.folded -f pprof -o profile.pb.gz -f otlp --otlp-endpoint
    /// http://collector:4317`.
    #[arg(help_heading = OUTPUT, short, long, value_enum, default_values_t = [Format::Folded], value_name = "FORMAT")]
    pub format: Vec<Format>,
    /// Write the stacks here instead of stdout (repeatable: one per file format given with -f,
    /// in the same order). The file is created mode 0600 beside the path and renamed over it
    /// when complete; a link, FIFO or directory at the path is refused.
    #[arg(help_heading = OUTPUT, short, long, value_name = "PATH")]
    pub output: Vec<PathBuf>,
    /// The permission bits of the --output and --summary-output files, in octal (at most
    /// 666). Under sudo, the files belong to the user who ran it (`SUDO_UID`, `SUDO_GID`).
    #[arg(help_heading = OUTPUT, long, default_value = "600", value_name = "MODE", value_parser = parse_mode)]
    pub output_mode: u32,
    /// Show the hottest functions (self and total samples) and stacks in the terminal,
    /// refreshed every second, instead of writing the stacks to stdout.
    ///
    /// Keys: `s`, `t`, `n` sort by self, total or name; `f` switches between functions and
    /// stacks; arrows, j/k and PgUp/PgDn scroll; `q` or Ctrl-C stops tracing. Stdout must be a
    /// terminal (plain ANSI, so ssh works). The stacks are still written to --output, in any
    /// --format, when tracing ends (without --output, nothing is written), and the summary is
    /// printed once the terminal is back.
    #[arg(help_heading = OUTPUT, long)]
    pub live: bool,
    /// The summary printed at the end: `text` for people, or `json`, one JSON object with the
    /// same figures for scripts (its fields are listed in docs/guide.md and docs/schemas/summary.json).
    #[arg(help_heading = OUTPUT, long, value_enum, default_value_t = SummaryFormat::Text, value_name = "FORMAT")]
    pub summary_format: SummaryFormat,
    /// Write the summary to this file instead of stderr (created like --output files: mode
    /// 0600, put in place when complete; a symbolic link or a FIFO there is refused).
    #[arg(help_heading = OUTPUT, long, value_name = "PATH")]
    pub summary_output: Option<PathBuf>,
    /// The deepest user stack to walk, in frames (1-2048; default: 2048, the most). A sample
    /// costs time and ring-buffer bytes per frame it actually has, so a lower limit only
    /// matters for very deep recursion; stacks cut at the limit are counted as `max_depth`.
    #[arg(
        help_heading = SAMPLING,
        long,
        default_value_t = tracer_common::trace::DEFAULT_MAX_DEPTH,
        value_name = "N",
        allow_negative_numbers = true
    )]
    pub max_depth: u32,
    /// Do not record kernel stacks.
    #[arg(help_heading = SAMPLING, long)]
    pub no_kernel: bool,
    /// Whole host: root each stack of the folded and SVG outputs at its thread's name instead
    /// of its process's executable name.
    #[arg(help_heading = OUTPUT, long)]
    pub per_thread: bool,
    /// Whole host: keep the samples of sframe-trace's own threads (left out by default).
    #[arg(help_heading = TARGETS, long)]
    pub include_self: bool,
    /// Folded and SVG outputs: C++ and Rust names without parameter lists, template
    /// arguments and hashes (`std::vector::push_back`); pprof and json keep full names.
    #[arg(help_heading = OUTPUT, long)]
    pub short_names: bool,
    /// Do not walk the frames of CPython interpreters (3.6 to 3.13): by default a process
    /// running one shows its Python functions in place of the interpreter's evaluation loop.
    #[arg(help_heading = SAMPLING, long)]
    pub no_python: bool,
    /// Do not name the JavaScript frames of Node.js processes (V8 11 and 13: Node.js 20 and
    /// 24) from V8's memory: by default their functions are read from the running process,
    /// with no flag of its own; without, only a perf map (`--perf-basic-prof`) names them.
    #[arg(help_heading = SAMPLING, long)]
    pub no_javascript: bool,
    /// How the thread that drains the samples is scheduled: `fifo:N` (SCHED_FIFO at priority
    /// N, 1-99), `nice:N` (-20 to 19) or `none`. The default, `fifo:1`, the lowest real-time
    /// priority, keeps the session on time however many threads other users keep busy; the
    /// threads it starts and the command it launches run at normal priority.
    #[arg(long, default_value = "fifo:1", value_name = "PRIORITY", value_parser = sframe_trace::priority::parse)]
    pub drain_priority: sframe_trace::priority::DrainPriority,
    /// Do not show functions inlined by the compiler as frames of their own (by default they
    /// are, where debug information records them).
    #[arg(help_heading = SYMBOLS, long)]
    pub no_inline: bool,
    /// Memory naming frames may hold at most (K, M or G suffix): the names found so far and
    /// what was parsed from objects and debug files to find them. Past it, all of it is
    /// dropped and parsed again as frames ask: lower it on a small host, at the cost of
    /// reading debug information again on a host that keeps running new code.
    #[arg(help_heading = SYMBOLS, long, default_value = "128M", value_name = "SIZE", value_parser = parse_size)]
    pub max_symbol_memory: u64,
    /// Memory the names of JIT code may hold at most, all processes' perf maps and jitdumps
    /// together (K, M or G suffix; apart from --max-symbol-memory): one process holds at most
    /// a quarter of it, and names past it are dropped, counted in the summary.
    #[arg(long, default_value = "256M", value_name = "SIZE", value_parser = parse_size)]
    pub max_jit_memory: u64,
    /// The tracer's own resident memory at most (K, M or G suffix). Past it in all (VmRSS, as a
    /// cgroup counts it), the pages of the files it maps to read symbols are handed back to
    /// the kernel, at most once every 10 s (read again as needed); past it in its anonymous
    /// pages (RssAnon), the names of frames and what was parsed to find them are dropped and
    /// found again as frames ask, at most once every 10 s, said in the log and counted in
    /// /metrics (sframe_trace_memory_sheds_total). The session never stops for it: the
    /// profile, the kernel tables and the samples are kept.
    #[arg(long, default_value = "150M", value_name = "SIZE", value_parser = parse_size)]
    pub max_memory: u64,
    /// `-f otlp`: the OpenTelemetry collector, `http://HOST:PORT[/PATH]` (clear text) or
    /// `https://HOST[:PORT][/PATH]` (TLS only, never clear text). Port 4318 or a path ending in
    /// /v1development/profiles means OTLP/HTTP, else OTLP/gRPC. Default:
    /// OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT.
    #[arg(help_heading = EXPORT, long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// `-f otlp`: the transport, overriding the guess from --otlp-endpoint (and
    /// OTEL_EXPORTER_OTLP_PROTOCOL: grpc or http/protobuf).
    #[arg(help_heading = EXPORT, long, value_enum, value_name = "PROTOCOL")]
    pub otlp_protocol: Option<OtlpProtocol>,
    /// `-f otlp`: a header sent with every export, `name=value` (repeatable; over those of
    /// OTEL_EXPORTER_OTLP_HEADERS). Visible to `ps`: give secrets with --otlp-header-file.
    #[arg(help_heading = EXPORT, long, value_name = "NAME=VALUE")]
    pub otlp_header: Vec<String>,
    /// `-f otlp`: headers from a file, one `name=value` a line (`#` comments and blank lines
    /// skipped; repeatable), e.g. a mounted secret holding `authorization=Bearer TOKEN`.
    #[arg(help_heading = EXPORT, long, value_name = "FILE")]
    pub otlp_header_file: Vec<PathBuf>,
    /// `-f otlp`, https:// only: PEM certificates to trust besides the system's (default:
    /// OTEL_EXPORTER_OTLP_CERTIFICATE).
    #[arg(help_heading = EXPORT, long, value_name = "FILE")]
    pub otlp_ca: Option<PathBuf>,
    /// `-f otlp`, https:// only: the client certificate for mutual TLS, PEM, with --otlp-key
    /// (default: OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE).
    #[arg(help_heading = EXPORT, long, value_name = "FILE")]
    pub otlp_cert: Option<PathBuf>,
    /// `-f otlp`, https:// only: the client certificate's private key, PEM (default:
    /// OTEL_EXPORTER_OTLP_CLIENT_KEY).
    #[arg(help_heading = EXPORT, long, value_name = "FILE")]
    pub otlp_key: Option<PathBuf>,
    /// `-f otlp`: compress the exports (default: OTEL_EXPORTER_OTLP_COMPRESSION, else none).
    #[arg(help_heading = EXPORT, long, value_enum, value_name = "WHAT")]
    pub otlp_compression: Option<OtlpCompression>,
    /// `-f otlp`: how long one export may take, connecting included (default:
    /// OTEL_EXPORTER_OTLP_TIMEOUT in milliseconds, else 10 s; at most 60 s).
    #[arg(help_heading = EXPORT, long, value_name = "SECS", value_parser = parse_secs)]
    pub otlp_timeout: Option<Duration>,
    /// Serve `/healthz` (200 while sampling) and `/metrics` (Prometheus text) on this address,
    /// e.g. 127.0.0.1:9464, for a DaemonSet's probes.
    #[arg(help_heading = EXPORT, long, value_name = "ADDR")]
    pub health_listen: Option<std::net::SocketAddr>,
    /// `-f otlp`: the `service.name` of every traced process (default: OTEL_SERVICE_NAME, else
    /// `service.name` in OTEL_RESOURCE_ATTRIBUTES, else its executable name).
    #[arg(help_heading = EXPORT, long, value_name = "NAME")]
    pub service_name: Option<String>,
    /// `-f otlp`: seconds between exports; what the collector cannot take in time is dropped
    /// and counted, never waited for.
    #[arg(help_heading = EXPORT, long, default_value = "10", value_name = "SECS", value_parser = parse_secs, allow_negative_numbers = true)]
    pub export_interval: Duration,
    /// `all` (the default): name every frame on this host. `none`: name kernel frames only;
    /// user frames keep their object, object-relative address and build-id (cheap on the host,
    /// what profiling backends take), to be named later by `sframe-trace symbolize` (pprof) or
    /// the backend.
    #[arg(help_heading = SYMBOLS, long, value_enum, default_value_t = Symbolize::All, value_name = "WHAT")]
    pub symbolize: Symbolize,
    #[command(flatten)]
    pub symbols: SymbolArgs,
    /// Debug: ship every sample of the traced processes as a stack copy, walk it in userspace
    /// and record it (registers, stack, mappings, rules, frames) into this directory, created
    /// 0700 (docs/testing.md, "Replay corpus").
    #[arg(long, value_name = "DIR", hide = true)]
    pub record_snapshots: Option<PathBuf>,
    /// Launch this command and trace it: `sframe-trace [OPTIONS] -- COMMAND ARGS...`.
    #[arg(help_heading = TARGETS, last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// Where symbols come from besides the objects themselves (tracing and `symbolize`).
#[derive(Debug, clap::Args)]
pub struct SymbolArgs {
    /// Look for separate debug files by build-id here (`DIR/.build-id/xx/yyyy.debug`) before
    /// /usr/lib/debug and /lib/debug (repeatable).
    #[arg(help_heading = SYMBOLS, long, value_name = "DIR")]
    pub debug_dir: Vec<PathBuf>,
    /// Fetch the debug files of objects without symbols from this debuginfod server
    /// (`http://HOST:PORT`, repeatable; default: the servers of `DEBUGINFOD_URLS`), into the
    /// client cache gdb and perf share (`$XDG_CACHE_HOME/debuginfod_client`). Never while
    /// sampling: at the end, before the stacks are written.
    #[arg(help_heading = SYMBOLS, long, value_name = "URL")]
    pub debuginfod: Vec<String>,
    /// No network for symbols: debuginfod is not asked (its cache is still read).
    #[arg(help_heading = SYMBOLS, long)]
    pub offline: bool,
}

/// `--symbolize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Symbolize {
    All,
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Source {
    Sframe,
    #[value(name = "eh_frame")]
    EhFrame,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Folded,
    Svg,
    Pprof,
    Json,
    PerfScript,
    Otlp,
}

/// The formats `symbolize` writes (files: no `otlp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FileFormat {
    Folded,
    Svg,
    Pprof,
    Json,
    PerfScript,
}

/// The form of the summary (`--summary-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SummaryFormat {
    /// Lines for people.
    Text,
    /// One JSON object for scripts.
    Json,
}

/// The OTLP compression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OtlpCompression {
    /// Gzip request bodies (gRPC message compression, or HTTP `Content-Encoding: gzip`).
    Gzip,
    /// Send them as they are.
    None,
}

/// The OTLP transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OtlpProtocol {
    /// OTLP/gRPC (collector port 4317).
    Grpc,
    /// OTLP/HTTP with protobuf bodies (collector port 4318).
    Http,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a file's SFrame section, like `readelf --sframe`, or as JSON.
    ///
    /// Examples:
    ///   sframe-trace dump ./app
    ///   sframe-trace dump --pc 0x401136 ./app
    ///   sframe-trace dump --json ./libfoo.so | jq '.functions | length'
    ///   sframe-trace dump --source eh_frame /lib/x86_64-linux-gnu/libc.so.6
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
        /// What to dump: the `.sframe` section, or the rows sframe-trace converts the file's
        /// call-frame information (`.eh_frame`, else `.debug_frame`) into, as the kernel gets them.
        #[arg(long, value_enum, default_value_t = Source::Sframe)]
        source: Source,
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
    /// Name the frames of a profile written with `--symbolize none` (pprof), here or on
    /// another machine: from the objects at their paths (when their build-id matches), debug
    /// directories or debuginfod; writes the same stacks an on-host run would.
    ///
    /// The profile is not trusted: counts add up saturating, and json and perf-script (one
    /// record per sample counted) refuse a profile whose records would hold more than
    /// --max-frames frames, before writing anything. SIGINT, SIGTERM or SIGHUP stop it at once
    /// with status 2: no output file is written (its temporary file is removed, what was at
    /// the path stays).
    ///
    /// Examples:
    ///   sframe-trace symbolize host.pb.gz -o named.pb.gz
    ///   sframe-trace symbolize host.pb.gz -f folded -o host.folded --debug-dir ./debug
    ///   sframe-trace symbolize host.pb.gz -f perf-script -o - | less
    #[command(verbatim_doc_comment)]
    Symbolize {
        /// The pprof file (gzipped or not).
        profile: PathBuf,
        /// Where to write (created like tracing's --output files); `-` is stdout.
        #[arg(short, long, value_name = "PATH")]
        output: PathBuf,
        /// The format written: folded, svg, pprof, json or perf-script (one record per sample
        /// counted; times, CPUs and absolute addresses are not in a profile).
        #[arg(short, long, value_enum, default_value_t = FileFormat::Pprof, value_name = "FORMAT")]
        format: FileFormat,
        /// The most frames json and perf-script may write in all, over the records of every
        /// sample counted (a record without frames counts as one).
        #[arg(long, default_value_t = 50_000_000, value_name = "N")]
        max_frames: u64,
        /// Do not show inlined functions as frames of their own.
        #[arg(long)]
        no_inline: bool,
        #[command(flatten)]
        symbols: SymbolArgs,
    },
    /// Write the man page (sframe-trace.1) and the bash, zsh and fish completions, generated
    /// from these flags, into DIR: what packagers install, always in step with --help.
    #[command(hide = true)]
    Generate {
        /// Directory to write into (created if missing).
        dir: PathBuf,
    },
    /// Check that this host can trace: privileges, BTF, loading the eBPF program and taking
    /// cpu-clock samples. Prints the verdict first (`this host can trace: yes`, or what is
    /// missing and how to fix it), then the sample counters.
    /// The generated pages of docs/ (`cli`, `summary-schema`, `dump-schema`), on stdout.
    #[command(name = "__docs", hide = true)]
    Docs {
        #[arg(value_enum)]
        page: docs::Page,
    },
    Doctor {
        /// Count samples of this process only (default: every process).
        #[arg(short, long, allow_negative_numbers = true)]
        pid: Option<u32>,
        /// Sampling frequency in Hz.
        #[arg(short = 'F', long, default_value_t = 99, allow_negative_numbers = true)]
        frequency: u64,
        /// How long to sample, in seconds.
        #[arg(short, long, default_value = "1", value_name = "SECS", value_parser = parse_secs, allow_negative_numbers = true)]
        duration: Duration,
    },
}

/// Parse a byte count of at least 64K, with an optional K, M or G suffix (powers of 1024).
fn parse_size(s: &str) -> Result<u64, String> {
    parse_bytes(s)?
        .filter(|&bytes| bytes >= 64 << 10)
        .ok_or_else(|| format!("`{s}`: give at least 64K and less than 16 EiB"))
}

/// Parse a ring buffer size: a power of two from 4K to 1G, with an optional K, M or G suffix.
fn parse_ring_buffer_size(s: &str) -> Result<u32, String> {
    parse_bytes(s)?
        .filter(|&bytes| bytes.is_power_of_two() && (4 << 10..=1 << 30).contains(&bytes))
        .and_then(|bytes| u32::try_from(bytes).ok())
        .ok_or_else(|| format!("`{s}`: give a power of two from 4K to 1G"))
}

/// A byte count: ASCII digits with an optional K, M or G suffix (powers of 1024), nothing else
/// (no sign, no space); `None` when it overflows.
fn parse_bytes(s: &str) -> Result<Option<u64>, String> {
    let (digits, shift) = match s.as_bytes().last().map(u8::to_ascii_uppercase) {
        Some(b'K') => (&s[..s.len() - 1], 10),
        Some(b'M') => (&s[..s.len() - 1], 20),
        Some(b'G') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "`{s}` is not a size: give digits with an optional K, M or G suffix (e.g. 512M)"
        ));
    }
    Ok(digits.parse::<u64>().ok().and_then(|n| n.checked_mul(1 << shift)))
}

/// The longest duration or interval accepted, in seconds (about 31 years).
pub const MAX_SECS: u64 = 1_000_000_000;

/// Parse a duration: a positive, finite number with an optional unit, `ms`, `s` (the
/// default), `m` or `h` (`30`, `30s`, `500ms`, `1m`, `1.5h`), at most [`MAX_SECS`] seconds.
fn parse_secs(s: &str) -> Result<Duration, String> {
    let not_a_duration =
        || format!("`{s}` is not a duration: give seconds, or a number with ms, s, m or h (e.g. 30, 500ms, 1m)");
    let unit = [("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)]
        .into_iter()
        .find_map(|(suffix, unit)| Some((s.strip_suffix(suffix)?, unit)));
    let secs = match unit {
        // With a unit: plain digits and a point (no sign, exponent or space).
        Some((number, unit)) => {
            if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
                return Err(not_a_duration());
            }
            number.parse::<f64>().map_err(|_| not_a_duration())? * unit
        }
        None => s.parse::<f64>().map_err(|_| not_a_duration())?,
    };
    if secs.is_nan() || secs <= 0.0 {
        return Err(format!("`{s}`: give a positive number of seconds"));
    }
    if secs > MAX_SECS as f64 {
        return Err(format!("`{s}`: give at most {MAX_SECS} seconds"));
    }
    Duration::try_from_secs_f64(secs).map_err(|_| format!("`{s}`: give at most {MAX_SECS} seconds"))
}

/// Parse file permission bits in octal (`644`, `0640`), at most 666: no execute or set-id bits.
fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s, 8)
        .ok()
        .filter(|&mode| {
            !s.is_empty() && s.len() <= 4 && s.bytes().all(|b| (b'0'..=b'7').contains(&b)) && mode & !0o666 == 0
        })
        .ok_or_else(|| format!("`{s}` is not an output mode: give octal permission bits of at most 666 (e.g. 644)"))
}

/// Parse `0x`-prefixed hex or decimal.
fn parse_address(s: &str) -> Result<u64, String> {
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    parsed.map_err(|_| format!("`{s}` is not an address (use 0x-prefixed hex or decimal)"))
}

pub mod docs;

#[cfg(test)]
mod tests;
