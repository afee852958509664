//! `sframe-trace`: parse flags, run the chosen command, map its outcome to an exit status.
//! All the work is in the library; this file is glue. A closed stdout (`| head`) is success.
//! Messages go to stderr without ever failing (the terminal may be gone after a hangup) and
//! with control characters escaped (they can quote names other users control).
//! No `unsafe` here: system calls go through `sframe_trace::sys`.

#![deny(unsafe_code)]

mod cli;
mod commands;
mod generate;

use std::{io::Write as _, process::ExitCode};

use clap::Parser as _;
use tracer_unwind::names;

fn main() -> ExitCode {
    // aya warns when it cannot lift the memlock limit; where that matters, the error says so in
    // one sentence (`bpf::runtime`).
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn,aya::sys::bpf=error"))
        .format(|out, record| {
            writeln!(
                out,
                "[{} {:<5} {}] {}",
                out.timestamp(),
                record.level(),
                record.target(),
                names::escaped(&record.args().to_string())
            )
        })
        .init();
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        // A value our parsers refused: their one sentence, status 2.
        Err(err) if err.kind() == clap::error::ErrorKind::ValueValidation => {
            let text = err.render().to_string();
            let first = text.lines().next().unwrap_or_default();
            say(first.strip_prefix("error: ").unwrap_or(first));
            return commands::Status::Error.into();
        }
        Err(err) => err.exit(),
    };
    match commands::run(cli) {
        Ok(status) => status.into(),
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            say(&commands::sentence(&err));
            commands::Status::Error.into()
        }
    }
}

/// `sframe-trace: MESSAGE` on stderr, escaped, never failing.
fn say(message: &str) {
    let _ = writeln!(std::io::stderr(), "sframe-trace: {}", names::escaped(message));
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
