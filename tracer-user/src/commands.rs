//! The body of each subcommand: read the file, call the library, print, pick the exit status.

use std::{io::Write as _, path::Path, process::ExitCode};

use anyhow::Context as _;
use tracer_unwind::{check, dump};
use tracer_unwind::{
    elf::{self, SframeData},
    sframe::Section,
};

use crate::cli::{Cli, Command, Source, TraceArgs};

/// Outcome of a command, as an exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Done, nothing wrong.
    Ok,
    /// Nothing to report, or findings: no `.sframe`, check found problems, no function at --pc.
    Findings,
    /// Could not do the job (unreadable or malformed input, host cannot trace).
    Error,
}

impl From<Status> for ExitCode {
    fn from(status: Status) -> Self {
        match status {
            Status::Ok => ExitCode::SUCCESS,
            Status::Findings => ExitCode::from(1),
            Status::Error => ExitCode::from(2),
        }
    }
}

pub fn run(cli: Cli) -> anyhow::Result<Status> {
    match cli.command {
        Some(Command::Dump {
            file,
            json,
            pc,
            source: Source::Sframe,
        }) => run_dump(&file, json, pc),
        Some(Command::Dump {
            file,
            json,
            pc,
            source: Source::EhFrame,
        }) => run_dump_cfi(&file, json, pc),
        Some(Command::Check { file }) => run_check(&file),
        Some(Command::Generate { dir }) => crate::generate::write(&dir).map(|()| Status::Ok),
        Some(Command::Docs { page }) => {
            let mut out = std::io::stdout().lock();
            write!(out, "{}", crate::cli::docs::page(page))?;
            out.flush()?;
            Ok(Status::Ok)
        }
        Some(Command::Symbolize {
            profile,
            output,
            format,
            max_frames,
            no_inline,
            symbols,
        }) => run_symbolize(profile, output, format, max_frames, !no_inline, symbols),
        Some(Command::Doctor {
            pid,
            frequency,
            duration,
        }) => run_doctor(pid, frequency, duration),
        None => run_trace(cli.trace),
    }
}

/// Validate the tracing flags (what clap cannot check alone) into a configuration.
fn trace_config(args: TraceArgs) -> anyhow::Result<sframe_trace::trace::TraceConfig> {
    use tracer_common::trace::MAX_USER_FRAMES;
    let stdout_is_terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    anyhow::ensure!(
        !args.live || stdout_is_terminal,
        "--live draws on the terminal, but stdout is not one (to save the stacks, use --output FILE without --live)"
    );
    let outputs = outputs(&args, stdout_is_terminal)?;
    anyhow::ensure!(
        args.pid.is_empty() || args.command.is_empty(),
        "give either --pid or a command after --, not both"
    );
    anyhow::ensure!(
        !args.all || args.command.is_empty(),
        "give either --all or a command after --, not both"
    );
    anyhow::ensure!(
        args.frequency > 0 && args.frequency <= 100_000,
        "--frequency must be between 1 and 100000 Hz"
    );
    anyhow::ensure!(
        (1..=MAX_USER_FRAMES as u32).contains(&args.max_depth),
        "--max-depth must be between 1 and {MAX_USER_FRAMES}"
    );
    let page = sframe_trace::sys::page_size();
    anyhow::ensure!(
        i64::from(args.ring_buffer_size) >= page as i64,
        "--ring-buffer-size must be at least the page size ({page} bytes)"
    );
    let otlp = otlp_config(&args)?;
    let euid = sframe_trace::sys::process::effective_uid();
    let sudo = |name| std::env::var(name).ok();
    let (access, refused) = sframe_trace::outfile::Access::for_sudo(
        euid,
        sudo("SUDO_UID").as_deref(),
        sudo("SUDO_GID").as_deref(),
        args.output_mode,
    );
    if let Some(refused) = refused {
        eprintln!("sframe-trace: {}", tracer_unwind::names::escaped(&refused.to_string()));
    }
    sframe_trace::symfiles::configure(
        symbol_config(args.symbolize == crate::cli::Symbolize::None, &args.symbols)?,
        true,
    );
    let mut events =
        sframe_trace::event::EventSet::parse(&args.event, args.min_block.map(std::time::Duration::from_micros))?;
    events.resolve_probes()?;
    Ok(sframe_trace::trace::TraceConfig {
        all: args.pid.is_empty() && args.command.is_empty(),
        pids: args.pid,
        command: args.command,
        max_table_memory: args.max_table_memory,
        ring_buffer_bytes: args.ring_buffer_size,
        frequency: args.frequency,
        duration: args.duration,
        max_depth: args.max_depth,
        kernel_stacks: !args.no_kernel,
        per_thread: args.per_thread,
        include_self: args.include_self,
        short_names: args.short_names,
        python: !args.no_python,
        javascript: !args.no_javascript,
        drain_priority: args.drain_priority,
        outputs,
        access,
        inline: !args.no_inline,
        max_symbol_memory: args.max_symbol_memory,
        max_jit_memory: args.max_jit_memory,
        max_memory: args.max_memory,
        otlp,
        events,
        live: args.live,
        health_listen: args.health_listen,
        record_snapshots: args.record_snapshots,
        summary: sframe_trace::trace::SummarySpec {
            format: match args.summary_format {
                crate::cli::SummaryFormat::Text => sframe_trace::trace::SummaryFormat::Text,
                crate::cli::SummaryFormat::Json => sframe_trace::trace::SummaryFormat::Json,
            },
            path: args.summary_output,
        },
    })
}

/// The files (or stdout) of the `-f` formats other than otlp: each paired with the `--output`
/// in the same position; one format without `--output` goes to stdout (or, with `--live` and
/// folded, nowhere). Refused in one sentence when they do not pair.
fn outputs(args: &TraceArgs, stdout_is_terminal: bool) -> anyhow::Result<Vec<sframe_trace::trace::OutputSpec>> {
    use sframe_trace::{export::Format, trace::OutputSpec};
    let name = |f: &crate::cli::Format| {
        clap::ValueEnum::to_possible_value(f).map_or_else(String::new, |v| v.get_name().to_owned())
    };
    let files: Vec<&crate::cli::Format> = args.format.iter().filter(|f| **f != crate::cli::Format::Otlp).collect();
    anyhow::ensure!(
        args.format.len() - files.len() <= 1,
        "-f otlp is given twice: one OTLP export per session"
    );
    anyhow::ensure!(
        !files.is_empty() || args.output.is_empty(),
        "-f otlp sends the profiles to --otlp-endpoint: --output does not apply (add -f FORMAT before --output for a file)"
    );
    let format = |f: &crate::cli::Format| match f {
        crate::cli::Format::Folded => Format::Folded,
        crate::cli::Format::Svg => Format::Svg,
        crate::cli::Format::Pprof => Format::Pprof,
        crate::cli::Format::Json => Format::Json,
        crate::cli::Format::PerfScript => Format::PerfScript,
        crate::cli::Format::Otlp => Format::Otlp,
    };
    if args.output.is_empty() {
        let Some(&only) = files.first() else {
            return Ok(Vec::new());
        };
        anyhow::ensure!(
            files.len() == 1,
            "{} file formats and no --output: give one --output per -f, in the same order",
            files.len()
        );
        if args.live {
            anyhow::ensure!(
                *only == crate::cli::Format::Folded,
                "--live has the terminal: give --output FILE for the -f {} output",
                name(only)
            );
            // The view has the terminal, and nothing asked for a file.
            return Ok(Vec::new());
        }
        anyhow::ensure!(
            *only != crate::cli::Format::Pprof || !stdout_is_terminal,
            "pprof output is binary: give --output FILE or redirect stdout"
        );
        return Ok(vec![OutputSpec {
            format: format(only),
            path: None,
        }]);
    }
    anyhow::ensure!(
        files.len() == args.output.len(),
        "{} file format(s) (-f) and {} --output: give one --output per -f, in the same order",
        files.len(),
        args.output.len()
    );
    for (i, path) in args.output.iter().enumerate() {
        anyhow::ensure!(
            !args.output[..i].contains(path),
            "--output {} is given twice",
            path.display()
        );
    }
    Ok(files
        .into_iter()
        .zip(&args.output)
        .map(|(f, path)| OutputSpec {
            format: format(f),
            path: Some(path.clone()),
        })
        .collect())
}

/// The `-f otlp` flags over the `OTEL_*` variables, validated (see `OtlpConfig::resolve`): the
/// flags with `-f otlp` only, the header files read here.
fn otlp_config(args: &TraceArgs) -> anyhow::Result<Option<sframe_trace::export::otlp::OtlpConfig>> {
    use sframe_trace::export::otlp::{Compression, HeaderArg, OtlpConfig, OtlpFlags, Protocol, TlsFiles};
    if !args.format.contains(&crate::cli::Format::Otlp) {
        anyhow::ensure!(
            args.otlp_endpoint.is_none()
                && args.otlp_protocol.is_none()
                && args.service_name.is_none()
                && args.otlp_header.is_empty()
                && args.otlp_header_file.is_empty()
                && args.otlp_ca.is_none()
                && args.otlp_cert.is_none()
                && args.otlp_key.is_none()
                && args.otlp_compression.is_none()
                && args.otlp_timeout.is_none(),
            "--otlp-endpoint, --otlp-* and --service-name go with -f otlp"
        );
        return Ok(None);
    }
    let mut headers: Vec<HeaderArg> = args
        .otlp_header
        .iter()
        .enumerate()
        .map(|(i, text)| HeaderArg {
            origin: format!("--otlp-header #{}", i + 1),
            text: text.clone(),
        })
        .collect();
    for path in &args.otlp_header_file {
        headers.extend(header_file(path)?);
    }
    let flags = OtlpFlags {
        endpoint: args.otlp_endpoint.clone(),
        protocol: args.otlp_protocol.map(|p| match p {
            crate::cli::OtlpProtocol::Grpc => Protocol::Grpc,
            crate::cli::OtlpProtocol::Http => Protocol::Http,
        }),
        headers,
        tls: TlsFiles {
            ca: args.otlp_ca.clone(),
            cert: args.otlp_cert.clone(),
            key: args.otlp_key.clone(),
        },
        compression: args.otlp_compression.map(|c| match c {
            crate::cli::OtlpCompression::Gzip => Compression::Gzip,
            crate::cli::OtlpCompression::None => Compression::None,
        }),
        timeout: args.otlp_timeout,
        service_name: args.service_name.clone(),
        interval: args.export_interval,
    };
    // Variables that are not UTF-8 are not OpenTelemetry's.
    let env = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| k.starts_with("OTEL_"))
        .collect();
    let config = OtlpConfig::resolve(&flags, &env)?;
    config.check_tls()?;
    Ok(Some(config))
}

/// The headers of an `--otlp-header-file` (at most 64 KiB), one `name=value` a line.
fn header_file(path: &Path) -> anyhow::Result<Vec<sframe_trace::export::otlp::HeaderArg>> {
    use std::io::Read as _;
    const MAX_BYTES: u64 = 64 << 10;
    let context = || format!("--otlp-header-file {}", path.display());
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_BYTES + 1).read_to_string(&mut text))
        .with_context(context)?;
    anyhow::ensure!(
        text.len() as u64 <= MAX_BYTES,
        "{}: larger than {MAX_BYTES} bytes",
        context()
    );
    Ok(text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
        .map(|(i, line)| sframe_trace::export::otlp::HeaderArg {
            origin: format!("{} line {}", context(), i + 1),
            text: line.to_owned(),
        })
        .collect())
}

/// The async runtime of a session: one thread, which reads the ring buffers itself. (A
/// multi-threaded runtime parks the session's thread and wakes it from a worker for every
/// ready ring buffer or timer: two threads scheduled per wakeup, for nothing.) Table builds
/// still run on the blocking pool.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn run_trace(args: TraceArgs) -> anyhow::Result<Status> {
    use sframe_trace::trace::Ended;
    let config = trace_config(args)?;
    sframe_trace::sys::session::prepare();
    let runtime = runtime()?;
    let traced = runtime.block_on(sframe_trace::trace::run(config));
    let stopping = std::time::Instant::now();
    // Tables still being built in the background are of no use any more: do not wait for them.
    runtime.shutdown_background();
    log::debug!(
        target: sframe_trace::trace::END_LOG,
        "runtime shut down: {:.3} s",
        stopping.elapsed().as_secs_f64()
    );
    Ok(match traced? {
        Ended::Complete => Status::Ok,
        Ended::NothingExported => Status::Findings,
        Ended::OutputFailed => Status::Error,
    })
}

/// The symbol sources of the `--debug-dir`, `--debuginfod` and `--offline` flags.
fn symbol_config(
    no_user_symbols: bool,
    args: &crate::cli::SymbolArgs,
) -> anyhow::Result<sframe_trace::symfiles::SymbolConfig> {
    sframe_trace::symfiles::SymbolConfig::from_flags(
        no_user_symbols,
        args.debug_dir.clone(),
        &args.debuginfod,
        args.offline,
    )
    .map_err(anyhow::Error::msg)
}

/// `symbolize`: name the frames of a `--symbolize none` pprof and write them, until done or
/// stopped by a signal (then no output file is left).
fn run_symbolize(
    input: std::path::PathBuf,
    output: std::path::PathBuf,
    format: crate::cli::FileFormat,
    max_frames: u64,
    inline: bool,
    symbols: crate::cli::SymbolArgs,
) -> anyhow::Result<Status> {
    use sframe_trace::offline::{FileFormat, Job, stop, symbolize_file};
    let format = match format {
        crate::cli::FileFormat::Folded => FileFormat::Folded,
        crate::cli::FileFormat::Svg => FileFormat::Svg,
        crate::cli::FileFormat::Pprof => FileFormat::Pprof,
        crate::cli::FileFormat::Json => FileFormat::Json,
        crate::cli::FileFormat::PerfScript => FileFormat::PerfScript,
    };
    let config = symbol_config(false, &symbols)?;
    let job = Job {
        input,
        output,
        format,
        inline,
        max_frames,
    };
    // Configured on the worker, so that any thread symbol lookups start has the signals
    // blocked too (see `stop`).
    stop::until_signal(move || {
        sframe_trace::symfiles::configure(config, false);
        symbolize_file(&job).map(drop)
    })?;
    let figures = sframe_trace::symfiles::figures();
    if !figures.is_empty() {
        eprintln!("sframe-trace: symbol files: {}", serde_json::to_string(&figures)?);
    }
    Ok(Status::Ok)
}

/// The parts of `file` that unwind information is read from, within the per-object limits
/// (a FIFO, a device or a huge sparse file is refused, not read).
fn read(file: &Path) -> anyhow::Result<sframe_trace::sys::objfile::ObjectImage> {
    sframe_trace::sys::objfile::open_regular(file)
        .and_then(|f| sframe_trace::sys::objfile::read_object(&f))
        .with_context(|| format!("cannot read {}", file.display()))
}

/// The file's `.sframe`, or `None` after saying so on stderr.
fn sframe_of<'a>(file: &Path, bytes: &'a [u8]) -> anyhow::Result<Option<SframeData<'a>>> {
    let found = elf::find_sframe(bytes).with_context(|| format!("{}", file.display()))?;
    if found.is_none() {
        eprintln!("sframe-trace: {}", no_sframe(file));
    }
    Ok(found)
}

fn no_sframe(file: &Path) -> String {
    format!("{} has no .sframe section (build with -Wa,--gsframe)", file.display())
}

fn run_dump(file: &Path, json: bool, pc: Option<u64>) -> anyhow::Result<Status> {
    let bytes = read(file)?;
    let Some(sframe) = sframe_of(file, &bytes)? else {
        return Ok(Status::Findings);
    };
    let section =
        Section::parse(&sframe.data, sframe.vaddr).with_context(|| format!("{}: malformed .sframe", file.display()))?;
    let mut out = std::io::stdout().lock();
    if let Some(pc) = pc {
        return dump_pc(&mut out, &section, pc, json, file);
    }
    let model = dump::model(&section).with_context(|| format!("{}: malformed .sframe", file.display()))?;
    if json {
        serde_json::to_writer(&mut out, &model)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", dump::render_text(&model, ".sframe"))?;
    }
    out.flush()?;
    Ok(Status::Ok)
}

/// `dump --source eh_frame`: the kernel rows converted from the file's call-frame information.
fn run_dump_cfi(file: &Path, json: bool, pc: Option<u64>) -> anyhow::Result<Status> {
    let bytes = read(file)?;
    let entry = elf::entry_point(&bytes).with_context(|| format!("{}", file.display()))?;
    let table = tracer_unwind::table::build_from_cfi(&bytes, entry)
        .with_context(|| format!("{}: malformed call-frame information", file.display()))?;
    let Some(table) = table else {
        eprintln!("sframe-trace: {} has no .eh_frame or .debug_frame", file.display());
        return Ok(Status::Findings);
    };
    let rows = match pc {
        Some(pc) => vec![dump::row_of(pc, &table.lookup(pc))],
        None => dump::table_rows(&table),
    };
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer(
            &mut out,
            &dump::TableDump {
                source: "eh_frame",
                rows,
            },
        )?;
        writeln!(out)?;
    } else {
        write!(out, "{}", dump::render_table(&rows))?;
    }
    out.flush()?;
    Ok(Status::Ok)
}

fn dump_pc(
    out: &mut impl std::io::Write,
    section: &Section<'_>,
    pc: u64,
    json: bool,
    file: &Path,
) -> anyhow::Result<Status> {
    let found = section
        .find_row(pc)
        .with_context(|| format!("{}: malformed .sframe", file.display()))?;
    let Some((function, row)) = found else {
        eprintln!("sframe-trace: no SFrame row covers {pc:#x} in {}", file.display());
        return Ok(Status::Findings);
    };
    let model = dump::function_model(&function, &[row]);
    if json {
        serde_json::to_writer(&mut *out, &dump::DumpPc { pc, function: model })?;
        writeln!(out)?;
    } else {
        let header = dump::model_header(section);
        let index = section
            .functions()
            .iter()
            .position(|f| f.start == function.start)
            .unwrap_or(0);
        writeln!(out, "pc {pc:#x}:")?;
        write!(out, "{}", dump::render_function(index, &model, &header))?;
    }
    out.flush()?;
    Ok(Status::Ok)
}

fn run_check(file: &Path) -> anyhow::Result<Status> {
    let bytes = read(file)?;
    let report = match check::check(&bytes) {
        Ok(report) => report,
        Err(check::CheckError::NoSframe) => {
            eprintln!("sframe-trace: {}", no_sframe(file));
            return Ok(Status::Findings);
        }
        Err(err) => return Err(err).with_context(|| format!("{}", file.display())),
    };
    let mut out = std::io::stdout().lock();
    for finding in &report.findings {
        writeln!(out, "{}: {finding}", file.display())?;
    }
    writeln!(out, "{}: {report}", file.display())?;
    out.flush()?;
    Ok(if report.is_clean() {
        Status::Ok
    } else {
        Status::Findings
    })
}

/// The error and its causes, `: `-joined like `{:#}`, leaving out a cause whose text the
/// message before it already ends with (an error that quotes its source, as
/// `cannot write PATH: No such file or directory` does, would otherwise say it twice).
pub fn sentence(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let part = cause.to_string();
        if text.ends_with(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

/// `doctor`: the verdict first (`this host can trace: yes`, or `no: ` what is missing and how
/// to fix it), on stdout, then the sample counters of the trial.
fn run_doctor(pid: Option<u32>, frequency: u64, duration: std::time::Duration) -> anyhow::Result<Status> {
    anyhow::ensure!(frequency > 0, "--frequency must be at least 1 Hz");
    let trial = doctor_trial(pid, frequency, duration);
    let mut out = std::io::stdout().lock();
    let lines = match trial {
        Err(err) => {
            writeln!(
                out,
                "this host can trace: no: {}",
                tracer_unwind::names::escaped(&sentence(&err))
            )?;
            out.flush()?;
            return Ok(Status::Error);
        }
        Ok(lines) => lines,
    };
    let status = if pid.is_none() && !perf_events_fired(&lines) {
        writeln!(
            out,
            "this host can trace: no: the eBPF program loaded and attached but took no cpu-clock sample in {} s \
             (a hypervisor or container that blocks perf events?): try `perf record -e cpu-clock -a sleep 1`",
            duration.as_secs_f64()
        )?;
        Status::Error
    } else {
        writeln!(out, "this host can trace: yes")?;
        Status::Ok
    };
    for line in lines {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(status)
}

/// Whether the trial's cpu-clock events reached the program: a sample that was walked and
/// received, or one the program counted and left (a process not traced, or a CPU that was in
/// the kernel with no user registers, as every sample of an idle host is).
fn perf_events_fired(lines: &[String]) -> bool {
    const FIRED: [&str; 4] = ["samples_received", "sampled", "not_traced", "no_user_regs"];
    lines.iter().any(|line| {
        line.split_once(": ")
            .is_some_and(|(name, value)| FIRED.contains(&name) && value.parse::<u64>().is_ok_and(|n| n > 0))
    })
}

/// Load the program, sample for `duration`, and the counters as `name: value` lines.
fn doctor_trial(pid: Option<u32>, frequency: u64, duration: std::time::Duration) -> anyhow::Result<Vec<String>> {
    use sframe_trace::bpf;
    use sframe_trace::tables::TableSet;
    use tracer_common::trace::DEFAULT_MAX_DEPTH;

    bpf::preflight()?;
    let runtime = runtime()?;
    sframe_trace::sys::session::prepare();
    runtime.block_on(async {
        let config = bpf::KernelConfig {
            frequency,
            max_depth: DEFAULT_MAX_DEPTH,
            kernel_stacks: true,
            all_processes: pid.is_none(),
            max_processes: 1,
            table_capacity: None,
            events: sframe_trace::event::EventSet::default(),
            ring_buffer_bytes: bpf::DEFAULT_RING_BUFFER_BYTES,
            copy_stacks: false,
        };
        let mut kernel = bpf::Kernel::load(&config, &mut TableSet::new())?;
        // Without mappings, the walk of a traced process stops at frame 0 (no_mapping); every
        // other process is walked with frame pointers.
        if let Some(pid) = pid {
            kernel.set_process(pid, &[])?;
        }
        let mut events = kernel.events()?;
        kernel.attach()?;
        let scope = pid.map_or_else(|| "every process".to_owned(), |p| format!("pid {p}"));
        eprintln!(
            "sampling {scope} at {frequency} Hz for {} s ...",
            duration.as_secs_f64()
        );
        let mut received = 0u64;
        let deadline = tokio::time::sleep(duration);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                () = &mut deadline => break,
                sample = events.next() => match sample {
                    Some(_) => received += 1,
                    None => break,
                },
            }
        }
        kernel.detach();
        while events.try_next().is_some() {
            received += 1;
        }
        let mut lines = Vec::new();
        for (counter, value) in kernel.counters()? {
            lines.push(format!("{}: {value}", counter.name()));
        }
        lines.push(format!("samples_received: {received}"));
        for (reason, value) in kernel.stop_reasons()? {
            lines.push(format!("stop_{}: {value}", reason.name()));
        }
        for (program, instructions) in kernel.program_sizes()? {
            lines.push(format!("verified_insns_{program}: {instructions}"));
        }
        lines.push(match kernel.vma_lookups() {
            Ok(()) => "vma_lookups: yes".to_owned(),
            Err(why) => format!("vma_lookups: no ({})", why.lines().next().unwrap_or_default()),
        });
        Ok(lines)
    })
}

#[cfg(test)]
mod tests {
    use super::perf_events_fired;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn an_idle_host_whose_samples_all_land_in_the_kernel_can_trace() {
        let idle = lines("sampled: 0\nnot_traced: 0\nno_user_regs: 99\nsamples_received: 0\nstop_no_info: 0");
        assert!(perf_events_fired(&idle));
    }

    #[test]
    fn a_host_whose_perf_events_never_fire_cannot() {
        let blocked = lines(
            "sampled: 0\nnot_traced: 0\nno_user_regs: 0\nsamples_received: 0\nstop_no_info: 7\nverified_insns_on_sample: 8792",
        );
        assert!(!perf_events_fired(&blocked));
        assert!(perf_events_fired(&lines("not_traced: 3")));
        assert!(perf_events_fired(&lines("samples_received: 1")));
    }
}
