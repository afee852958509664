//! The kernel matrix as text: one result per kernel (from the guest's exit status and libtest's
//! summary line), the table written to target/vm-test/report.md, and the same table rewritten in
//! place between the marker comments of docs/kernels.md. Pure: strings in, strings out; the caller reads
//! and writes the files.

use std::fmt::Write as _;

/// The document that holds the kernel table, relative to the repository's root.
pub const KERNELS_DOC: &str = "docs/kernels.md";

/// The comments of [`KERNELS_DOC`] the generated table sits between.
pub const BEGIN: &str = "<!-- vm-test table: written by `cargo xtask vm-test` -->";
pub const END: &str = "<!-- vm-test table end -->";

const HEADER: &str = "| kernel | result | tests | date | commit |\n|---|---|---|---|---|\n";

/// How one guest run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The test binary exited with this status (0: every selected test passed).
    Exited(i32),
    /// The guest ran past the time limit and was stopped.
    Timeout,
    /// The guest printed nothing for the watchdog's time and was stopped: what it was stuck in.
    Stuck(String),
    /// The guest never reported a status: the kernel did not boot, or the guest's set-up failed.
    BootFailure,
}

/// One kernel's line of the matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The Debian suite (or kernel ABI name) asked for: the row's identity.
    pub kernel: String,
    /// The kernel release the guest booted, e.g. `6.1.0-41-amd64`.
    pub release: String,
    pub result: String,
    pub tests: String,
    pub date: String,
    pub commit: String,
}

impl Row {
    pub fn new(kernel: &str, release: &str, outcome: &Outcome, output: &str, date: &str, commit: &str) -> Self {
        let result = match outcome {
            Outcome::Exited(0) => "pass".to_owned(),
            Outcome::Exited(code) => format!("fail (exit status {code})"),
            Outcome::Timeout => "timeout".to_owned(),
            Outcome::Stuck(what) => format!("stuck: {what}"),
            Outcome::BootFailure => "boot or guest set-up failure".to_owned(),
        };
        Row {
            kernel: kernel.to_owned(),
            release: release.to_owned(),
            result,
            tests: test_counts(output).unwrap_or_else(|| "-".to_owned()),
            date: date.to_owned(),
            commit: commit.to_owned(),
        }
    }

    /// The first cell: `6.1 (bookworm)`, with the release's major.minor.
    fn first_cell(&self) -> String {
        match major_minor(&self.release) {
            Some((major, minor)) => format!("{major}.{minor} ({})", self.kernel),
            None => self.kernel.clone(),
        }
    }

    fn line(&self) -> String {
        format!(
            "| {} | {} | {} | {} | {} |\n",
            self.first_cell(),
            self.result,
            self.tests,
            self.date,
            self.commit
        )
    }

    /// Read a line this module wrote back (the release is kept as its major.minor only).
    pub(super) fn parse(line: &str) -> Option<Row> {
        let cells: Vec<&str> = line
            .trim()
            .strip_prefix('|')?
            .strip_suffix('|')?
            .split('|')
            .map(str::trim)
            .collect();
        let [first, result, tests, date, commit] = cells[..] else {
            return None;
        };
        let (release, kernel) = match first.split_once(" (") {
            Some((version, rest)) => (version.to_owned(), rest.strip_suffix(')')?.to_owned()),
            None => (String::new(), first.to_owned()),
        };
        if kernel.is_empty() || kernel == "kernel" || kernel.starts_with("---") {
            return None;
        }
        Some(Row {
            kernel,
            release,
            result: result.to_owned(),
            tests: tests.to_owned(),
            date: date.to_owned(),
            commit: commit.to_owned(),
        })
    }
}

/// `major.minor` of a kernel release such as `5.10.0-35-amd64` or `6.12.57+deb13-amd64`.
pub fn major_minor(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The counts of libtest's last `test result:` line, e.g. `16 passed` or `12 passed, 1 failed`.
pub fn test_counts(output: &str) -> Option<String> {
    let line = output.lines().rev().find(|l| l.starts_with("test result:"))?;
    let count = |what: &str| -> Option<u32> {
        let before = line.split(&format!(" {what}")).next()?;
        before.rsplit([' ', '.', ';']).find(|w| !w.is_empty())?.parse().ok()
    };
    let passed = count("passed")?;
    let failed = count("failed")?;
    Some(if failed == 0 {
        format!("{passed} passed")
    } else {
        format!("{passed} passed, {failed} failed")
    })
}

/// The table of `rows`, oldest kernel first.
pub fn table(rows: &[Row]) -> String {
    let mut rows = rows.to_vec();
    rows.sort_by_key(|r| (major_minor(&r.release).unwrap_or((u32::MAX, 0)), r.kernel.clone()));
    let mut out = String::from(HEADER);
    for row in &rows {
        out.push_str(&row.line());
    }
    out
}

/// target/vm-test/report.md: the table of this run.
pub fn report(rows: &[Row]) -> String {
    let mut out = String::from("# Kernel matrix\n\n");
    let _ = write!(out, "{}", table(rows));
    out
}

/// `doc` ([`KERNELS_DOC`]) with the table between the markers replaced: the rows of this run replace those
/// of the same kernels, the others stay as they were (with their own date and commit). None if
/// the markers are missing or out of order.
pub fn rewrite_table(doc: &str, rows: &[Row]) -> Option<String> {
    let start = doc.find(BEGIN)? + BEGIN.len();
    let end = start + doc[start..].find(END)?;
    let mut merged: Vec<Row> = doc[start..end]
        .lines()
        .filter_map(Row::parse)
        .filter(|old| rows.iter().all(|new| new.kernel != old.kernel))
        .collect();
    merged.extend(rows.iter().cloned());
    Some(format!("{}\n{}{}", &doc[..start], table(&merged), &doc[end..]))
}

/// `YYYY-MM-DD` (UTC) of a time in seconds since the Unix epoch.
pub fn date(unix_seconds: u64) -> String {
    // Days to civil date, after Howard Hinnant's `civil_from_days`.
    let days = (unix_seconds / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
