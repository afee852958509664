//! The terminal of the live view, owned by a thread of its own: raw mode and the alternate
//! screen while it runs, plain ANSI sequences (crossterm), so it works in any terminal and over
//! ssh. The thread takes snapshots, folds them into the view's table, reads keys (sorting and
//! scrolling redraw at once from the last snapshot) and draws; the session only hands it a
//! snapshot at most once a second and is told when the user quits. Writing to a slow terminal
//! therefore never holds up the session.
//!
//! The terminal is put back on every way out: when the thread ends (the session is done or
//! dropped its handle on an error, or the thread failed), and from a panic hook, before the
//! panic message is printed, whatever thread panics.

use std::{
    io::{self, BufWriter},
    sync::{
        Arc, Once,
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc::{self, SyncSender, TryRecvError},
    },
    thread::JoinHandle,
    time::Duration,
};

use crossterm::{
    cursor, event,
    event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers},
    queue,
    style::{Attribute, Print, SetAttribute},
    terminal::{self, ClearType},
};

use super::{
    model::{SortKey, Table},
    screen::{self, Key, Line, Status, Style, View},
};
use crate::export::model::Resolved;

/// How long the thread waits for a key before looking for a snapshot again.
const POLL: Duration = Duration::from_millis(50);

/// Whether the terminal is in raw mode on the alternate screen (what [`restore`] undoes).
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// What the session hands over once a second.
pub struct Snapshot {
    pub resolved: Resolved,
    pub status: Status,
}

/// The running view.
pub struct Terminal {
    snapshots: Option<SyncSender<Snapshot>>,
    /// Snapshots sent, and taken by the thread.
    sent: u64,
    taken: Arc<AtomicU64>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl Terminal {
    /// Take over the terminal and start drawing; `on_quit` is called when the user presses `q`
    /// or Ctrl-C (raw mode turns Ctrl-C into a key). It is dropped when the thread ends.
    pub fn start(on_quit: impl FnMut() + Send + 'static) -> io::Result<Terminal> {
        install_panic_hook();
        terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        if let Err(err) = crossterm::execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide) {
            restore();
            return Err(err);
        }
        let (snapshots, received) = mpsc::sync_channel(1);
        let taken = Arc::new(AtomicU64::new(0));
        let thread = std::thread::Builder::new().name("live-view".to_owned()).spawn({
            let taken = Arc::clone(&taken);
            move || {
                let result = run(&received, &taken, on_quit);
                restore();
                result
            }
        });
        let thread = match thread {
            Ok(thread) => thread,
            Err(err) => {
                restore();
                return Err(err);
            }
        };
        Ok(Terminal {
            snapshots: Some(snapshots),
            sent: 0,
            taken,
            thread: Some(thread),
        })
    }

    /// Whether the thread has taken every snapshot sent (a new one is worth making).
    pub fn ready(&self) -> bool {
        self.taken.load(Ordering::Relaxed) >= self.sent
    }

    /// Hand over a snapshot (dropped if the thread has not taken the previous one yet).
    pub fn show(&mut self, snapshot: Snapshot) {
        if let Some(snapshots) = &self.snapshots
            && snapshots.try_send(snapshot).is_ok()
        {
            self.sent += 1;
        }
    }

    /// Stop drawing, put the terminal back and report how the thread ended.
    pub fn finish(mut self) -> io::Result<()> {
        self.stop()
    }

    fn stop(&mut self) -> io::Result<()> {
        self.snapshots = None;
        let result = match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(io::Error::other("the live view panicked")),
            None => Ok(()),
        };
        restore();
        result
    }
}

impl Drop for Terminal {
    /// On an early return of the session: the terminal is back before any error is printed.
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Put the terminal back (once): main screen, cursor shown, raw mode off.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = crossterm::execute!(
            io::stdout(),
            SetAttribute(Attribute::Reset),
            cursor::Show,
            terminal::LeaveAlternateScreen
        );
        let _ = terminal::disable_raw_mode();
    }
}

/// Restore the terminal before any panic message is printed, on whatever thread.
fn install_panic_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

/// The thread: keys, snapshots and drawing until the session drops its sender.
fn run(snapshots: &mpsc::Receiver<Snapshot>, taken: &AtomicU64, mut on_quit: impl FnMut()) -> io::Result<()> {
    let mut out = BufWriter::new(io::stdout());
    let mut view = View::default();
    let mut table = Table::default();
    let mut status = Status::default();
    let mut dirty = true;
    loop {
        if event::poll(POLL)? {
            match event::read()? {
                Event::Key(key) if key.kind != KeyEventKind::Release => match action(key) {
                    Some(Action::Quit) => on_quit(),
                    Some(Action::View(key)) => {
                        let sort = view.sort;
                        view.key(key, &table, size()?.1);
                        if view.sort != sort {
                            table.sort(view.sort);
                        }
                        dirty = true;
                    }
                    None => {}
                },
                Event::Resize(..) => dirty = true,
                _ => {}
            }
        }
        match snapshots.try_recv() {
            Ok(snapshot) => {
                table = Table::new(&snapshot.resolved, view.sort);
                status = snapshot.status;
                taken.fetch_add(1, Ordering::Relaxed);
                dirty = true;
            }
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => return Ok(()),
        }
        // A panic hook may have restored the terminal: draw no more on the main screen.
        if dirty && ACTIVE.load(Ordering::SeqCst) {
            let (width, height) = size()?;
            let lines = screen::render(&table, &status, &view, width, height);
            draw(&mut out, &lines, width)?;
            dirty = false;
        }
    }
}

/// The terminal's width and height; 80 x 24 when it does not say (a pseudo-terminal nobody
/// sized).
fn size() -> io::Result<(usize, usize)> {
    match terminal::size()? {
        (0, _) | (_, 0) => Ok((80, 24)),
        (width, height) => Ok((usize::from(width), usize::from(height))),
    }
}

/// What a key press does.
enum Action {
    Quit,
    View(Key),
}

fn action(key: KeyEvent) -> Option<Action> {
    let view = |key| Some(Action::View(key));
    match key.code {
        KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => Some(Action::Quit),
        KeyCode::Char('q' | 'Q') => Some(Action::Quit),
        KeyCode::Char('s') => view(Key::Sort(SortKey::SelfCount)),
        KeyCode::Char('t') => view(Key::Sort(SortKey::Total)),
        KeyCode::Char('n') => view(Key::Sort(SortKey::Name)),
        KeyCode::Char('f') | KeyCode::Tab => view(Key::Switch),
        KeyCode::Char('k') | KeyCode::Up => view(Key::Up),
        KeyCode::Char('j') | KeyCode::Down => view(Key::Down),
        KeyCode::PageUp | KeyCode::Char('b') => view(Key::PageUp),
        KeyCode::PageDown | KeyCode::Char(' ') => view(Key::PageDown),
        KeyCode::Home | KeyCode::Char('g') => view(Key::Top),
        KeyCode::End | KeyCode::Char('G') => view(Key::Bottom),
        _ => None,
    }
}

/// Draw every line in place (no full clear, so no flicker), then flush once.
fn draw(out: &mut impl io::Write, lines: &[Line], width: usize) -> io::Result<()> {
    for (y, line) in lines.iter().enumerate() {
        queue!(out, cursor::MoveTo(0, u16::try_from(y).unwrap_or(u16::MAX)))?;
        match line.style {
            Style::Plain => queue!(out, Print(&line.text), terminal::Clear(ClearType::UntilNewLine))?,
            Style::Heading => {
                let pad = width.saturating_sub(line.text.chars().count());
                queue!(
                    out,
                    SetAttribute(Attribute::Reverse),
                    Print(&line.text),
                    Print(" ".repeat(pad)),
                    SetAttribute(Attribute::Reset)
                )?;
            }
        }
    }
    out.flush()
}
