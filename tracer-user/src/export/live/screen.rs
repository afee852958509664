//! The live view laid out as lines of text for a terminal of a given size, and what the keys do
//! to it. Pure: the terminal module draws the lines (with their style) and reads the keys.
//!
//! ```text
//! sframe-trace: 12.3 s, 498 samples/s, 0 lost, 1 process traced, 6123 samples
//!     SELF  SELF%    TOTAL TOTAL%  OBJECT           FUNCTION                  (reverse video)
//!     6090  99.5%     6090  99.5%  bigframe         spin
//! ...
//! functions by self, 1-20 of 31 | q quit  s/t/n sort by self/total/name  f stacks  j/k ...
//! ```

use std::{fmt::Write as _, time::Duration};

use super::model::{SortKey, Table};

/// Lines above the rows (status, column heading) and below them (the key line).
const CHROME_LINES: usize = 3;
/// Width of the OBJECT column.
const OBJECT_WIDTH: usize = 16;

/// What the rows are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    #[default]
    Functions,
    Stacks,
}

/// The session's numbers for the status line.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Status {
    pub elapsed: Duration,
    /// Samples per second since the previous snapshot.
    pub rate: f64,
    /// Samples lost (the ring buffer was full).
    pub lost: u64,
    pub processes: usize,
}

/// What a key asks of the view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Sort(SortKey),
    /// Functions to stacks and back.
    Switch,
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
}

/// What is shown, in which order, from which row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct View {
    pub mode: Mode,
    pub sort: SortKey,
    /// The first row shown.
    pub scroll: usize,
}

/// How a line is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    Plain,
    /// Reverse video across the whole width.
    Heading,
}

/// One line of the screen, at most the screen's width in characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub text: String,
    pub style: Style,
}

impl View {
    /// Apply `key` to a view of `table` on a screen `height` lines high. A new sort order or
    /// mode starts from the top; the caller re-sorts the table when `sort` changed.
    pub fn key(&mut self, key: Key, table: &Table, height: usize) {
        let page = height.saturating_sub(CHROME_LINES).max(1);
        let last = self.rows(table).saturating_sub(page);
        self.scroll = match key {
            Key::Sort(sort) => {
                self.sort = sort;
                0
            }
            Key::Switch => {
                self.mode = match self.mode {
                    Mode::Functions => Mode::Stacks,
                    Mode::Stacks => Mode::Functions,
                };
                0
            }
            Key::Up => self.scroll.saturating_sub(1),
            Key::Down => self.scroll + 1,
            Key::PageUp => self.scroll.saturating_sub(page),
            Key::PageDown => self.scroll + page,
            Key::Top => 0,
            Key::Bottom => last,
        }
        .min(last);
    }

    fn rows(&self, table: &Table) -> usize {
        match self.mode {
            Mode::Functions => table.functions.len(),
            Mode::Stacks => table.stacks.len(),
        }
    }
}

/// The screen: exactly `height` lines of at most `width` characters (nothing below 1 x 1).
pub fn render(table: &Table, status: &Status, view: &View, width: usize, height: usize) -> Vec<Line> {
    let (width, height) = (width.max(1), height.max(1));
    let page = height.saturating_sub(CHROME_LINES);
    let rows = view.rows(table);
    let first = view.scroll.min(rows.saturating_sub(page));
    // Names come from other users: no control character reaches the terminal.
    let plain = |text: String| Line {
        text: fit(&tracer_unwind::names::escaped(&text), width),
        style: Style::Plain,
    };
    let mut lines = vec![plain(status_line(status, table.samples))];
    let heading = match view.mode {
        Mode::Functions => format!(
            "{:>8} {:>6} {:>8} {:>6}  {:<OBJECT_WIDTH$} FUNCTION",
            "SELF", "SELF%", "TOTAL", "TOTAL%", "OBJECT"
        ),
        Mode::Stacks => format!("{:>8} {:>6}  STACK (command;outermost;...;innermost)", "SAMPLES", "%"),
    };
    lines.push(Line {
        text: fit(&heading, width),
        style: Style::Heading,
    });
    let shown = first..(first + page).min(rows);
    match view.mode {
        Mode::Functions => lines.extend(table.functions[shown.clone()].iter().map(|f| {
            plain(format!(
                "{:>8} {:>5.1}% {:>8} {:>5.1}%  {:<OBJECT_WIDTH$} {}",
                f.self_count,
                table.percent(f.self_count),
                f.total_count,
                table.percent(f.total_count),
                fit(
                    &tracer_unwind::names::escaped(f.object.as_deref().unwrap_or("[unknown]")),
                    OBJECT_WIDTH
                ),
                f.name
            ))
        })),
        Mode::Stacks => lines.extend(table.stacks[shown.clone()].iter().map(|s| {
            let prefix = format!("{:>8} {:>5.1}%  ", s.count, table.percent(s.count));
            // The innermost frames matter most: a long stack loses its outermost ones.
            let text = fit_left(&s.text, width.saturating_sub(prefix.len()));
            plain(prefix + &text)
        })),
    }
    if rows == 0 && page > 0 {
        lines.push(plain("  (no samples yet)".to_owned()));
    }
    lines.resize(height - 1, plain(String::new()));
    lines.truncate(height - 1);
    lines.push(plain(key_line(view, &shown, rows)));
    lines
}

/// `sframe-trace: 12.3 s, 498 samples/s, 0 lost, 1 process traced, 6123 samples`.
fn status_line(status: &Status, samples: u64) -> String {
    let secs = status.elapsed.as_secs_f64();
    let elapsed = if secs < 60.0 {
        format!("{secs:.1} s")
    } else {
        let secs = status.elapsed.as_secs();
        format!("{}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
    };
    format!(
        "sframe-trace: {elapsed}, {:.0} samples/s, {} lost, {} process{} traced, {samples} samples",
        status.rate,
        status.lost,
        status.processes,
        if status.processes == 1 { "" } else { "es" },
    )
}

/// `functions by self, 1-20 of 31 | q quit  s/t/n sort by self/total/name  f stacks  j/k ...`.
fn key_line(view: &View, shown: &std::ops::Range<usize>, rows: usize) -> String {
    let (mode, other) = match view.mode {
        Mode::Functions => ("functions", "stacks"),
        Mode::Stacks => ("stacks", "functions"),
    };
    let mut line = format!("{mode} by {}, ", view.sort.name());
    if shown.is_empty() {
        let _ = write!(line, "0 of {rows}");
    } else {
        let _ = write!(line, "{}-{} of {rows}", shown.start + 1, shown.end);
    }
    let _ = write!(
        line,
        " | q quit  s/t/n sort by self/total/name  f {other}  j/k PgUp/PgDn scroll"
    );
    line
}

/// `text` cut to `width` characters, its end replaced by `..` when cut.
fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let kept: String = text.chars().take(width.saturating_sub(2)).collect();
    (kept + "..").chars().take(width).collect()
}

/// `text` cut to `width` characters, its start replaced by `..` when cut.
fn fit_left(text: &str, width: usize) -> String {
    let count = text.chars().count();
    if count <= width {
        return text.to_owned();
    }
    let kept: String = text.chars().skip(count - width.saturating_sub(2)).collect();
    let text = "..".to_owned() + &kept;
    text.chars().take(width).collect()
}

#[cfg(test)]
mod tests;
