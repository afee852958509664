//! `sframe-trace generate DIR` (hidden): the man page and the shell completions, generated from
//! the clap definitions so that they never drift from `--help`. Packaging (`cargo xtask dist`)
//! calls it; nothing at run time depends on it.

use std::path::Path;

use anyhow::Context as _;
use clap::CommandFactory as _;
use clap_complete::Shell;

use crate::cli::Cli;

/// Write `DIR/sframe-trace.1` and `DIR/completions/{sframe-trace.bash,_sframe-trace,sframe-trace.fish}`.
pub fn write(dir: &Path) -> anyhow::Result<()> {
    let completions = dir.join("completions");
    std::fs::create_dir_all(&completions).with_context(|| format!("creating {}", completions.display()))?;
    let command = Cli::command();
    let mut page = Vec::new();
    clap_mangen::Man::new(command.clone())
        .render(&mut page)
        .context("rendering the man page")?;
    let man = dir.join("sframe-trace.1");
    std::fs::write(&man, page).with_context(|| format!("writing {}", man.display()))?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let mut command = command.clone();
        clap_complete::generate_to(shell, &mut command, "sframe-trace", &completions)
            .with_context(|| format!("writing the {shell} completions into {}", completions.display()))?;
    }
    Ok(())
}
