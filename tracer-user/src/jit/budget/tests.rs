//! The JIT-name budget's accounting: the bytes held across processes and per process, the
//! room it leaves each part, and the time it grants per period.

use super::*;

#[test]
fn one_process_holds_at_most_its_share_and_all_at_most_the_limit() {
    let mut budget = JitBudget::new(4000);
    assert_eq!(budget.share(), 1000);
    assert_eq!(budget.room(1, Part::PerfMap(1)), 1000);
    budget.set(1, Part::PerfMap(1), 700);
    // Another part of the same process shares what is left of its share.
    assert_eq!(budget.room(1, Part::Dump), 300);
    // The part itself may keep what it holds, and the rest of the share.
    assert_eq!(budget.room(1, Part::PerfMap(1)), 1000);
    budget.set(1, Part::Dump, 300);
    assert_eq!(budget.room(1, Part::Images), 0);
    // Three more processes at their share fill the budget: a fifth gets nothing.
    for pid in 2..=4 {
        assert_eq!(budget.room(pid, Part::PerfMap(pid)), 1000);
        budget.set(pid, Part::PerfMap(pid), 1000);
    }
    assert_eq!(budget.total(), 4000);
    assert_eq!(budget.room(5, Part::PerfMap(5)), 0);
    // Given back (a map read again from its start): room again, and the peak kept.
    budget.set(2, Part::PerfMap(2), 0);
    assert_eq!(budget.room(5, Part::PerfMap(5)), 1000);
    assert_eq!(budget.total(), 3000);
    assert_eq!(budget.stats.peak_bytes, 4000);
}

#[test]
fn time_is_granted_per_process_and_period_in_steps() {
    let mut budget = JitBudget::new(1 << 20);
    let now = Instant::now();
    let until = budget.grant(1, false).expect("time at first");
    assert!(until <= Instant::now() + STEP);
    // One process having used its time for the period: none more for it, some for another.
    *budget.spent.entry(1).or_default() = PROCESS_TIME;
    budget.spent_total = PROCESS_TIME;
    assert!(!budget.has_time(1));
    assert_eq!(budget.grant(1, false), None);
    assert_eq!(budget.stats.reads_behind, 1, "counted");
    assert!(budget.has_time(2));
    assert!(budget.grant(2, false).is_some());
    // A process's last read gets a step whatever was used.
    assert!(budget.grant(1, true).is_some());
    // All together past theirs: a process that had less than its floor gets the rest of it,
    // one that had it gets nothing, and once the floors are used, nobody.
    budget.spent_total = TOTAL_TIME;
    let until = budget.grant(3, false).expect("a floor");
    assert!(until <= Instant::now() + FLOOR);
    *budget.spent.entry(3).or_default() = FLOOR;
    assert_eq!(budget.grant(3, false), None);
    budget.floors = FLOORS_TIME;
    assert_eq!(budget.grant(4, false), None);
    // The next period starts afresh, but for what a step overran: a process that spent three
    // periods' worth in one waits two.
    budget.period_start = Some(now - PERIOD);
    assert!(budget.grant(1, false).is_some());
    *budget.spent.entry(1).or_default() = 3 * PROCESS_TIME;
    budget.period_start = Some(now - PERIOD);
    assert_eq!(budget.grant(1, false), None, "owes a period");
    assert!(!budget.has_time(1));
    budget.period_start = Some(now - PERIOD);
    assert_eq!(budget.grant(1, false), None, "owes none now, but has had its time");
    budget.period_start = Some(now - PERIOD);
    assert!(budget.grant(1, false).is_some(), "paid off");
    // At the end of the session, nothing past its deadline, not even a last read.
    budget.ending(Duration::ZERO);
    assert_eq!(budget.grant(1, true), None);
}

#[test]
fn spent_time_is_counted_for_the_process_and_all() {
    let mut budget = JitBudget::new(1 << 20);
    budget.grant(1, false);
    budget.spend(1, Instant::now() - Duration::from_millis(30));
    assert!(budget.spent[&1] >= Duration::from_millis(30));
    assert!(budget.spent_total >= Duration::from_millis(30));
    assert!(!budget.spent.contains_key(&2));
}

/// Reads timed without a grant (a JVM's code heaps) start periods too: what they spent is
/// paid off as periods pass, and the process has time again.
#[test]
fn time_spent_without_grants_is_paid_off() {
    let mut budget = JitBudget::new(1 << 20);
    budget.spend(1, Instant::now() - 3 * PROCESS_TIME);
    assert!(!budget.has_time(1), "spent three periods' time");
    for owed in [2, 1] {
        budget.period_start = Some(Instant::now() - PERIOD);
        budget.spend(1, Instant::now());
        assert!(!budget.has_time(1), "still owes {owed}");
    }
    budget.period_start = Some(Instant::now() - PERIOD);
    budget.spend(1, Instant::now());
    assert!(budget.has_time(1), "paid off");
}
