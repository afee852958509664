use super::*;
use crate::export::live::model::{FunctionRow, StackRow};

fn table() -> Table {
    let function = |name: &str, self_count, total_count| FunctionRow {
        name: name.to_owned(),
        object: Some("app".to_owned()),
        self_count,
        total_count,
    };
    let mut functions = vec![function("spin", 75, 75), function("main", 0, 100)];
    functions.extend((0..20).map(|i| function(&format!("f{i:02}"), 1, 1)));
    Table {
        samples: 100,
        functions,
        stacks: vec![
            StackRow {
                text: "app;_start;main;run;outer;middle;inner;spin".to_owned(),
                count: 75,
            },
            StackRow {
                text: "app;_start;main".to_owned(),
                count: 25,
            },
        ],
    }
}

fn status() -> Status {
    Status {
        elapsed: Duration::from_millis(12_345),
        rate: 498.4,
        lost: 3,
        processes: 1,
    }
}

fn text(lines: &[Line]) -> String {
    lines.iter().map(|l| l.text.as_str()).collect::<Vec<_>>().join("\n")
}

/// An 80 x 6 screen of functions: the status line, the heading (reverse video), three rows and
/// the key line, each within the width.
#[test]
fn functions_on_a_small_screen() {
    let lines = render(&table(), &status(), &View::default(), 80, 6);
    assert_eq!(
        text(&lines),
        "sframe-trace: 12.3 s, 498 samples/s, 3 lost, 1 process traced, 100 samples\n\
         \x20   SELF  SELF%    TOTAL TOTAL%  OBJECT           FUNCTION\n\
         \x20     75  75.0%       75  75.0%  app              spin\n\
         \x20      0   0.0%      100 100.0%  app              main\n\
         \x20      1   1.0%        1   1.0%  app              f00\n\
         functions by self, 1-3 of 22 | q quit  s/t/n sort by self/total/name  f stacks..",
    );
    let styles: Vec<Style> = lines.iter().map(|l| l.style).collect();
    assert_eq!(styles[1], Style::Heading);
    assert!(styles.iter().enumerate().all(|(i, s)| i == 1 || *s == Style::Plain));
}

/// Stacks keep their innermost end when the screen is too narrow for them, and a screen taller
/// than the rows is filled with empty lines up to the key line.
#[test]
fn stacks_lose_their_outermost_frames_first() {
    let view = View {
        mode: Mode::Stacks,
        ..View::default()
    };
    let lines = render(&table(), &status(), &view, 40, 7);
    assert_eq!(lines.len(), 7);
    assert_eq!(lines[2].text, "      75  75.0%  ..ter;middle;inner;spin");
    assert_eq!(lines[3].text, "      25  25.0%  app;_start;main");
    assert_eq!(lines[4].text, "");
    assert_eq!(lines[6].text, "stacks by self, 1-2 of 2 | q quit  s/t..");
    assert!(lines.iter().all(|l| l.text.chars().count() <= 40));
}

/// j/k, PgDn/PgUp and End/Home move within the rows and stop at either end; switching mode
/// or sort order starts from the top.
#[test]
fn keys_scroll_within_the_rows() {
    let table = table();
    let mut view = View::default();
    // 10 lines: 7 rows per page, 22 rows, so the last page starts at row 15.
    view.key(Key::Up, &table, 10);
    assert_eq!(view.scroll, 0);
    view.key(Key::Down, &table, 10);
    assert_eq!(view.scroll, 1);
    view.key(Key::PageDown, &table, 10);
    assert_eq!(view.scroll, 8);
    view.key(Key::PageDown, &table, 10);
    assert_eq!(view.scroll, 15);
    view.key(Key::Down, &table, 10);
    assert_eq!(view.scroll, 15);
    let lines = render(&table, &status(), &view, 100, 10);
    assert!(lines[2].text.ends_with(" f13"), "{}", text(&lines));
    assert!(lines[9].text.starts_with("functions by self, 16-22 of 22 |"));
    view.key(Key::PageUp, &table, 10);
    assert_eq!(view.scroll, 8);
    view.key(Key::Sort(SortKey::Name), &table, 10);
    assert_eq!((view.scroll, view.sort), (0, SortKey::Name));
    view.key(Key::Bottom, &table, 10);
    assert_eq!(view.scroll, 15);
    view.key(Key::Switch, &table, 10);
    assert_eq!((view.scroll, view.mode), (0, Mode::Stacks));
    view.key(Key::Bottom, &table, 10);
    assert_eq!(view.scroll, 0, "2 stacks fit on one page");
}

/// Before the first sample the view says so; tiny screens still get their line count.
#[test]
fn empty_and_tiny_screens() {
    let lines = render(&Table::default(), &Status::default(), &View::default(), 60, 5);
    assert_eq!(lines[2].text, "  (no samples yet)");
    assert_eq!(
        lines[4].text,
        "functions by self, 0 of 0 | q quit  s/t/n sort by self/tot.."
    );
    assert_eq!(render(&table(), &status(), &View::default(), 1, 1).len(), 1);
    assert_eq!(render(&table(), &status(), &View::default(), 0, 2).len(), 2);
}
