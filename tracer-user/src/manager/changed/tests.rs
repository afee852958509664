//! Unit tests of `manager::changed`.

use std::collections::HashMap;

use super::{Changed, MAX_CHANGED};

/// Issue 29's pid reuse under the whole-host grouping: a pid whose process exited or exec'd
/// during the session has its executable name left out (its stacks are rooted at their own
/// command name), the others keep theirs, and past the bound no name is trusted.
#[test]
fn names_of_pids_that_changed_are_not_trusted() {
    let names: HashMap<u32, String> = [(10, "first".to_owned()), (11, "steady".to_owned())].into();
    let mut changed = Changed::default();
    changed.note(10);
    let trusted = changed.trusted(&names);
    assert_eq!(trusted.get(&10), None, "an exited pid's name may be another process's");
    assert_eq!(trusted.get(&11).map(String::as_str), Some("steady"));
    let mut many = Changed::default();
    for pid in 0..=MAX_CHANGED as u32 {
        many.note(pid + 100);
    }
    assert!(many.trusted(&names).is_empty(), "past the bound no name is trusted");
}
