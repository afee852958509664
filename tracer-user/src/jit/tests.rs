//! The process side of perf maps: ids from `/proc/PID/status`, the trust checks on real files,
//! a map read as it grows, and names kept apart for two processes with the same pid.

use std::{
    io::Write as _,
    os::unix::fs::{MetadataExt as _, PermissionsExt as _},
};

use super::{maps::ProcessMaps, process::*, *};

#[test]
fn stat_gives_the_start_time_whatever_the_command_name() {
    let stat = b"42 (a) b) (c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 200";
    assert_eq!(stat_start_time(stat), Some(987_654));
    assert_eq!(stat_start_time(b"42 (x"), None);
    let own = crate::sys::process::pid();
    assert!(start_time(own).is_some());
    let view = view(own).expect("our own view");
    assert_eq!(view.nspid, own, "no pid namespace of our own");
    // This process started before now, and after the machine booted.
    let now = std::time::UNIX_EPOCH.elapsed().unwrap().as_nanos() as u64;
    assert!(view.started_unix_ns <= now && view.started_unix_ns > now - 86_400_000_000_000 * 365);
    let mono = crate::sys::monotonic_ns();
    assert!(view.started_mono_ns > 0 && view.started_mono_ns <= mono);
}

#[test]
fn status_gives_the_innermost_pid_and_the_effective_uid() {
    let status = b"Name:\tnode\nUid:\t1000\t1001\t1001\t1001\nNSpid:\t4242\t17\n";
    assert_eq!(status_ids(status, 4242), Some((17, 1001)));
    let old_kernel = b"Uid:\t0\t0\t0\t0\n";
    assert_eq!(status_ids(old_kernel, 99), Some((99, 0)));
    assert_eq!(status_ids(b"Name:\tx\n", 1), None, "no Uid line");
    assert_eq!(status_ids(b"Uid:\tx\ty\nNSpid:\t1\n", 1), None, "garbage");
}

/// A private directory (random name, mode 0700) for the files of one test.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

#[test]
fn trusted_files_only() {
    let scratch = scratch();
    let dir = scratch.path();
    let view = own_view(dir, 1);
    std::fs::write(dir.join("plain"), b"1000 10 f\n").unwrap();
    assert!(matches!(
        open_trusted(&view, std::path::Path::new("/plain")),
        Ok(Some((_, 10)))
    ));
    assert!(matches!(open_trusted(&view, std::path::Path::new("/absent")), Ok(None)));
    std::os::unix::fs::symlink("plain", dir.join("link")).unwrap();
    assert_eq!(
        open_trusted(&view, std::path::Path::new("/link")).err(),
        Some(Refusal::NotRegular)
    );
    // An absolute symlink resolves inside the root, never to the host's file.
    std::os::unix::fs::symlink("/etc/passwd", dir.join("escape")).unwrap();
    assert_eq!(
        open_trusted(&view, std::path::Path::new("/escape")).err(),
        Some(Refusal::NotRegular)
    );
    let fifo = std::ffi::CString::new(dir.join("fifo").to_str().unwrap()).unwrap();
    crate::sys::fs::mkfifo(&fifo, 0o600).expect("mkfifo");
    assert_eq!(
        open_trusted(&view, std::path::Path::new("/fifo")).err(),
        Some(Refusal::NotRegular)
    );
    let other = ProcessView {
        uid: view.uid.wrapping_add(1),
        ..own_view(dir, 1)
    };
    let owner = std::fs::metadata(dir.join("plain")).unwrap().uid();
    let expected = if owner == 0 { None } else { Some(Refusal::OtherOwner) };
    assert_eq!(open_trusted(&other, std::path::Path::new("/plain")).err(), expected);
    // Written before the process started (by an earlier one with its pid): not its map.
    let now = std::time::SystemTime::now();
    let started = now.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let later = ProcessView {
        started_unix_ns: started,
        ..own_view(dir, 1)
    };
    let plain = std::fs::File::options().write(true).open(dir.join("plain")).unwrap();
    plain.set_modified(now - std::time::Duration::from_secs(5)).unwrap();
    assert_eq!(
        open_trusted(&later, std::path::Path::new("/plain")).err(),
        Some(Refusal::Stale)
    );
    plain.set_modified(now).unwrap();
    assert!(matches!(
        open_trusted(&later, std::path::Path::new("/plain")),
        Ok(Some(_))
    ));
}

#[test]
fn a_growing_map_is_read_in_steps_and_again_when_replaced() {
    let scratch = scratch();
    let dir = scratch.path();
    std::fs::create_dir(dir.join("tmp")).unwrap();
    let path = dir.join("tmp/perf-7.map");
    let mut file = std::fs::File::create(&path).unwrap();
    file.write_all(b"1000 10 one\n2000 10 tw").unwrap();
    let mut process = ProcessMaps::new(7, 1, Some(own_view(dir, 7)));
    let budget = &mut JitBudget::default();
    process.refresh(false, budget);
    assert_eq!(process.map.name(0x1000), Some("one"));
    assert_eq!(process.map.name(0x2000), None);
    file.write_all(b"o\n").unwrap();
    process.refresh(false, budget);
    assert_eq!(process.map.name(0x2000), Some("two"));
    // Replaced by another, shorter file: read from its start, but not again and again.
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, b"3000 10 new\n").unwrap();
    process.refresh(false, budget);
    assert_eq!(
        process.map.name(0x1000),
        Some("one"),
        "read from its start at most every 5 s"
    );
    process.restarted_at = None;
    process.refresh(false, budget);
    assert_eq!(process.map.name(0x1000), None);
    assert_eq!(process.map.name(0x3000), Some("new"));
    assert!(process.refused.is_empty());
}

/// A process exits and another gets its pid: samples taken before the exit keep the first
/// one's names, later ones get the second's, whatever order they are resolved in.
#[test]
fn a_reused_pid_does_not_take_the_earlier_process_names() {
    let mut names = JitNames::default();
    let first = names.want(7, 0x1000, 100);
    assert_ne!(first, 0);
    assert!(names.is_wanted(), "no map yet");
    names.set_map(7, 100, b"1000 10 first\n");
    assert_eq!(names.want(7, 0x1000, 150), first, "the same process");
    names.exited(7, 200);
    let second = names.want(7, 0x1000, 250);
    assert_ne!(second, first, "a new process with the same pid");
    assert_eq!(names.name(second, 0x1000), None, "not the earlier process's name");
    names.set_map(7, 250, b"1000 10 second\n");
    // A sample of the first process resolved after the second's came.
    assert_eq!(names.want(7, 0x1000, 199), first);
    assert_eq!(names.name(first, 0x1000), Some("first"));
    assert_eq!(names.name(second, 0x1000), Some("second"));
    // A sample resolved after the pid went to a process that started later (its exit was not
    // heard of): not that process's, whose view says when it started.
    let mut names = JitNames::default();
    names.set_map(9, 0, b"1000 10 later_process\n");
    let own = names.want(9, 0x1000, 0);
    names.processes.get_mut(&own).unwrap().view = Some(ProcessView {
        started_mono_ns: 500,
        ..own_view(std::path::Path::new("/"), 9)
    });
    let early = names.want(9, 0x1000, 400);
    assert_ne!(early, own, "taken before that process started");
    assert_eq!(names.name(early, 0x1000), None);
    assert_eq!(names.want(9, 0x1000, 600), own);
    assert_eq!(names.want(9, 0x1000, 450), early);
    // A process first seen in JIT code by a sample resolved after its exit (samples queued):
    // its samples are its own, not those of the next process with its pid.
    names.exited(8, 300);
    let late = names.want(8, 0x1000, 250);
    assert_ne!(late, names.want(8, 0x1000, 350));
    assert_eq!(late, names.want(8, 0x1000, 260));
}

/// A sample is named when it is taken in: one taken after the map was last read, in code
/// compiled since, has the map read again at once (not [`REREAD`] later); one taken before the
/// last read does not make it read again before [`REREAD`].
#[test]
fn a_sample_newer_than_the_last_read_has_the_map_read_again() {
    let scratch = scratch();
    let dir = scratch.path();
    std::fs::create_dir(dir.join("tmp")).unwrap();
    let mut file = std::fs::File::create(dir.join("tmp/perf-7.map")).unwrap();
    file.write_all(b"1000 10 one\n").unwrap();
    let mut names = JitNames::default();
    let id = names.next_id();
    names.current.get_mut().insert(7, id);
    names
        .processes
        .insert(id, ProcessMaps::new(7, id, Some(own_view(dir, 7))));
    let before = crate::sys::monotonic_ns();
    assert_eq!(names.want(7, 0x1000, before), id);
    names.refresh_wanted();
    assert_eq!(names.name(id, 0x1000), Some("one"));
    // Lines written after that read, for code compiled after it.
    file.write_all(b"2000 10 two\n3000 10 three\n").unwrap();
    // The last read as if it were `by` earlier.
    fn backdate(names: &mut JitNames, id: u32, by: Duration) {
        let process = names.processes.get_mut(&id).unwrap();
        process.read_at = process.read_at.map(|at| at - by);
    }
    // A sample taken before the read: the map is not read again yet.
    backdate(&mut names, id, NEWER);
    names.want(7, 0x3000, before);
    names.refresh_wanted();
    assert_eq!(names.name(id, 0x3000), None, "read again only after REREAD");
    assert!(!names.is_wanted());
    // A sample taken after it: read now, and named.
    let after = crate::sys::monotonic_ns();
    assert!(after > names.processes[&id].read_mono_ns);
    names.want(7, 0x2000, after);
    names.refresh_wanted();
    assert_eq!(names.name(id, 0x2000), Some("two"));
    assert_eq!(names.name(id, 0x3000), Some("three"));
    // Not more often than every NEWER: kept for the next call.
    file.write_all(b"4000 10 four\n").unwrap();
    names.want(7, 0x4000, crate::sys::monotonic_ns());
    names.refresh_wanted();
    assert_eq!(names.name(id, 0x4000), None);
    assert!(names.is_wanted(), "still wanted");
    backdate(&mut names, id, NEWER);
    names.refresh_wanted();
    assert_eq!(names.name(id, 0x4000), Some("four"));
}

/// Regression (pid reuse under load, `jitsecond` named from `first_incarnation`'s map): a
/// process found gone at a housekeeping tick seconds after it exited (the tracer behind, its
/// exit notice still queued) was dated as ended then, so the samples of the next process with
/// its pid, taken before that tick, took its names. It is dated no later than the next
/// process's start, and the exit notice, when it comes, moves its end back without ending
/// the next process.
#[test]
fn a_process_found_gone_late_does_not_name_the_next_one_with_its_pid() {
    let mut names = JitNames::default();
    let first = names.want(7, 0x1000, 100);
    names.set_map(7, 100, b"1000 10 first\n");
    names.processes.get_mut(&first).unwrap().started_mono_ns = 50;
    // The first exited at 200 and the second started at 300; the tracer finds the first gone
    // at 900 (the second runs), the exit notice still queued.
    let (exit, next_start, found) = (200, 300, 900);
    let at = next_start.min(found);
    names.exited(7, at);
    let second = names.want(7, 0x1000, 400);
    assert_ne!(second, first, "a sample of the second process, taken before the tick");
    assert_eq!(names.name(second, 0x1000), None, "never the first's name");
    names.set_map(7, 400, b"1000 10 second\n");
    names.processes.get_mut(&second).unwrap().started_mono_ns = next_start;
    // The first's exit notice comes now: its end moves back, the second goes on.
    names.exited(7, exit);
    assert_eq!(names.ended.get_mut()[&7], vec![(exit, first)]);
    assert_eq!(names.current.get_mut().get(&7), Some(&second));
    assert_eq!(names.want(7, 0x1000, 150), first);
    assert_eq!(names.name(first, 0x1000), Some("first"));
    assert_eq!(names.want(7, 0x1000, 450), second);
    assert_eq!(names.name(second, 0x1000), Some("second"));
    // A notice of an exit before the second started ends nothing of the second's.
    names.exited(7, 250);
    assert_eq!(names.current.get_mut().get(&7), Some(&second));
    assert_eq!(names.want(7, 0x1000, 500), second);
}

/// The rule [`JitNames::gone`] follows, on this very process: a process found gone is dated
/// no later than the start of the process holding its pid now.
#[test]
fn a_gone_process_ends_before_the_one_that_holds_its_pid() {
    let own = crate::sys::process::pid();
    let start = process::started_mono(own).expect("our own start");
    let mut names = JitNames::default();
    let old = names.next_id();
    names.current.get_mut().insert(own, old);
    names.processes.insert(old, ProcessMaps::new(own, old, None));
    names.gone(own, start + 5_000_000_000);
    // (The start is worked out from the clocks at each call: a few microseconds apart.)
    let [(at, id)] = names.ended.get_mut()[&own][..] else {
        panic!("one end: {:?}", names.ended.get_mut()[&own]);
    };
    assert_eq!(id, old);
    assert!(
        at.abs_diff(start) < 1_000_000,
        "ended at {at}, the next started at {start}"
    );
}
