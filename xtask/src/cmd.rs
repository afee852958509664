//! Running commands loudly (each printed before it runs) or quietly (its output returned), for
//! every task. Knows nothing of the tasks themselves.

use std::process::Command;

use anyhow::{Context as _, bail};

/// Print and run a command; fail with its status if it fails.
pub fn sh(cmd: &mut Command) -> anyhow::Result<()> {
    eprintln!("+ {}", show(cmd));
    let status = cmd.status().with_context(|| format!("cannot run {}", show(cmd)))?;
    if !status.success() {
        bail!("`{}` failed with {status}", show(cmd));
    }
    Ok(())
}

/// Run a command quietly and return its stdout, or None if it cannot run or fails.
pub fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn show(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        s.push(' ');
        s.push_str(&arg.to_string_lossy());
    }
    s
}

/// cargo, as the one running xtask (`$CARGO`), else from PATH.
pub fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
}

/// Whether this runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
