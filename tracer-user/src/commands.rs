//! The body of each subcommand: read the file, call the library, print, pick the exit status.

use std::{io::Write as _, path::Path, process::ExitCode};

use anyhow::Context as _;
use sframe_trace::{
    check, dump,
    elf::{self, SframeData},
    sframe::Section,
};

use crate::cli::{Cli, Command};

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
        Command::Dump { file, json, pc } => run_dump(&file, json, pc),
        Command::Check { file } => run_check(&file),
        #[cfg(feature = "ebpf")]
        Command::Doctor {
            pid,
            frequency,
            duration,
        } => run_doctor(pid, frequency, duration),
    }
}

fn read(file: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))
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

#[cfg(feature = "ebpf")]
fn run_doctor(pid: Option<u32>, frequency: u64, duration: f64) -> anyhow::Result<Status> {
    use sframe_trace::bpf;

    bpf::preflight()?;
    anyhow::ensure!(
        duration > 0.0 && duration.is_finite(),
        "--duration must be a positive number of seconds"
    );
    anyhow::ensure!(frequency > 0, "--frequency must be at least 1 Hz");
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let tracer = bpf::Tracer::start(pid.unwrap_or(0), frequency)?;
        let scope = pid.map_or_else(|| "every process".to_owned(), |p| format!("pid {p}"));
        eprintln!("sampling {scope} at {frequency} Hz for {duration} s ...");
        tokio::time::sleep(std::time::Duration::from_secs_f64(duration)).await;
        let mut out = std::io::stdout().lock();
        for (counter, value) in tracer.counters()? {
            writeln!(out, "{}: {value}", counter.name())?;
        }
        out.flush()?;
        Ok(Status::Ok)
    })
}
