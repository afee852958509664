//! The `--summary-output` file: created like every output file of the session (`outfile`: no
//! link or FIFO followed, mode 0600, written beside the path and renamed into place once
//! complete), and written whole or not at all.

use std::{
    fs::File,
    io::Write as _,
    path::{Path, PathBuf},
};

use anyhow::Context as _;

use crate::outfile::{self, OutputFileError, Placement};

/// The summary file, open from before tracing starts (a bad path fails early) until the
/// summary is written.
pub(super) struct SummaryFile {
    path: PathBuf,
    file: File,
    placement: Placement,
}

impl SummaryFile {
    pub(super) fn create(path: &Path, access: &outfile::Access) -> Result<SummaryFile, OutputFileError> {
        let (file, placement) = outfile::create_for(path, access)?;
        Ok(SummaryFile {
            path: path.to_owned(),
            file,
            placement,
        })
    }

    /// Write `text` and put the file in place.
    pub(super) fn write(mut self, text: &str) -> anyhow::Result<()> {
        let path = self.path.display().to_string();
        self.file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.sync_all())
            .and_then(|()| self.placement.commit())
            .with_context(|| format!("writing the summary to {path}"))
    }
}
