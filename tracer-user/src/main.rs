//! `sframe-trace`: parse flags, run the chosen command, map its outcome to an exit status.
//! All the work is in the library; this file is glue. A closed stdout (`| head`) is success.

mod cli;
mod commands;

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    // aya warns when it cannot lift the memlock limit; where that matters, the error says so in
    // one sentence (`bpf::runtime`).
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn,aya::sys::bpf=error")).init();
    let cli = cli::Cli::parse();
    match commands::run(cli) {
        Ok(status) => status.into(),
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("sframe-trace: {err:#}");
            commands::Status::Error.into()
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
