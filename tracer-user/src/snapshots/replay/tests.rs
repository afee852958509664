//! The replay corpus (`fixtures/replay`): every recording replays to its recorded frames with
//! the rules rebuilt from the checked-in binaries, the frames are the workload's known chain
//! named from the binaries' symbol tables, and a changed rule or return address is reported.

use std::{borrow::Cow, collections::HashMap, path::PathBuf};

use object::{Object as _, ObjectSymbol as _};
use tracer_common::{unwind::FLAG_SIGNAL, walk::StopReason};

use super::*;
use crate::snapshots::recording::{Hex, RecordedMapping, words_hex};

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/replay")
}

/// The checked-in binaries by build-id (hex).
fn fixtures() -> HashMap<String, Vec<u8>> {
    let mut found = HashMap::new();
    let bin = corpus_dir().join("bin");
    for set in std::fs::read_dir(&bin).expect("fixtures/replay/bin") {
        for file in std::fs::read_dir(set.unwrap().path()).unwrap() {
            let bytes = std::fs::read(file.unwrap().path()).unwrap();
            let id = object::File::parse(&*bytes)
                .unwrap()
                .build_id()
                .unwrap()
                .expect("every fixture has a build-id");
            let id: String = id.iter().map(|b| format!("{b:02x}")).collect();
            found.insert(id, bytes);
        }
    }
    found
}

/// Every recording, by file stem (`SET-NAME-N`).
fn recordings() -> Vec<(String, Recording)> {
    let mut found: Vec<(String, Recording)> = std::fs::read_dir(corpus_dir().join("recordings"))
        .expect("fixtures/replay/recordings")
        .map(|entry| {
            let path = entry.unwrap().path();
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            let recording = serde_json::from_slice(&std::fs::read(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (stem, recording)
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

fn one(stem: &str) -> Recording {
    recordings()
        .into_iter()
        .find(|(s, _)| s == stem)
        .unwrap_or_else(|| panic!("no recording {stem}"))
        .1
}

fn from<'a>(fixtures: &'a HashMap<String, Vec<u8>>) -> impl FnMut(&RecordedMapping) -> Option<Cow<'a, [u8]>> {
    |m| {
        m.build_id
            .as_ref()
            .and_then(|id| fixtures.get(id))
            .map(|b| Cow::Borrowed(b.as_slice()))
    }
}

/// The name of each frame: the function of the fixture's symbol table that holds it (a return
/// address looked up minus one), else the file name of the object it is in.
fn names(recording: &Recording, fixtures: &HashMap<String, Vec<u8>>) -> Vec<String> {
    recording
        .frames
        .iter()
        .enumerate()
        .map(|(i, frame)| {
            let pc = frame.pc.0 - u64::from(i > 0);
            let m = recording
                .mappings
                .iter()
                .find(|m| (m.start.0..m.end.0).contains(&pc))
                .unwrap_or_else(|| panic!("frame {i} ({pc:#x}) in no mapping"));
            let Some(bytes) = m.build_id.as_ref().and_then(|id| fixtures.get(id)) else {
                return m.path.rsplit('/').next().unwrap_or_default().to_owned();
            };
            let file = object::File::parse(&**bytes).unwrap();
            let addr = pc - m.bias.0;
            file.symbols()
                .find(|s| s.size() > 0 && (s.address()..s.address() + s.size()).contains(&addr))
                .map(|s| s.name().unwrap().to_owned())
                .unwrap_or_else(|| format!("?{addr:#x}"))
        })
        .collect()
}

fn chain(names: &[&str]) -> Vec<String> {
    names.iter().map(|&n| n.to_owned()).collect()
}

/// Every recording of the corpus replays to exactly its recorded frames and stop reason, the
/// rules of the checked-in binaries rebuilt; the corpus covers each kind it is meant to.
#[test]
fn every_recording_replays() {
    let fixtures = fixtures();
    let all = recordings();
    assert!(all.len() >= 40, "{} recordings", all.len());
    // Each kind recorded on x86-64 (no prefix) and on arm64.
    for prefix in ["", "aarch64-"] {
        for kind in [
            "v1-deep",
            "v2-deep",
            "v3-deep",
            "ehframe-deep",
            "v3-deepest",
            "v3-plt",
            "v3-signal",
            "v3-vdso",
        ] {
            let kind = format!("{prefix}{kind}-");
            assert!(all.iter().any(|(s, _)| s.starts_with(&kind)), "no {kind} recording");
        }
    }
    for (stem, recording) in &all {
        let arch = if stem.starts_with("aarch64-") {
            "aarch64"
        } else {
            "x86_64"
        };
        assert_eq!(recording.arch, arch, "{stem}");
    }
    for (stem, recording) in &all {
        let fixture_mapped = recording
            .mappings
            .iter()
            .filter(|m| m.build_id.as_ref().is_some_and(|id| fixtures.contains_key(id)))
            .count();
        assert!(fixture_mapped >= 1, "{stem}: maps no checked-in binary");
        if let Err(e) = replay(recording, from(&fixtures)) {
            panic!("{stem}: {e}");
        }
    }
}

/// The recorded frames are each workload's known chain, named from the checked-in binaries'
/// symbol tables (not from the recorder): a recording of a wrong walk cannot pass.
#[test]
fn frames_are_the_workload_chain() {
    let fixtures = fixtures();
    let mut deep = chain(&["leaf"]);
    deep.extend(std::iter::repeat_n("recurse".to_owned(), 100));
    deep.extend(chain(&["run", "main", "_start"]));
    for (stem, recording) in recordings() {
        let names = names(&recording, &fixtures);
        let stop = recording.stop_reason().unwrap();
        // An aarch64 recording (`aarch64-SET-NAME-N`) shows the same chains.
        let kind = stem.rsplit_once('-').unwrap().0;
        let (aarch64, kind) = match kind.strip_prefix("aarch64-") {
            Some(kind) => (true, kind),
            None => (false, kind),
        };
        match kind {
            "v1-deep" | "v2-deep" | "v3-deep" | "ehframe-deep" => {
                assert_eq!(names, deep, "{stem}");
                assert_eq!(stop, StopReason::Outermost, "{stem}");
            }
            "v3-deepest" => {
                // 2000 levels, 16 bytes each: the copy (8 KiB when recorded) ends first.
                assert_eq!(stop, StopReason::SnapshotEnd, "{stem}");
                assert_eq!(names[0], "leaf", "{stem}");
                assert!(names.len() > 400, "{stem}: {} frames", names.len());
                assert!(names[1..].iter().all(|n| n == "recurse"), "{stem}: {names:?}");
            }
            "v3-plt" => {
                assert_eq!(
                    names,
                    chain(&["spin", "callback", "lib_entry", "main", "_start"]),
                    "{stem}"
                );
                assert_eq!(stop, StopReason::Outermost, "{stem}");
            }
            "v3-signal" => {
                // The handler returns into the signal trampoline, where the walk stops: libc's
                // on x86-64, the vDSO's on arm64 (which has no unwind information: its rule is
                // the one its code proves, `table::leaf`).
                let trampoline = if aarch64 { "[vdso]" } else { "libc.so.6" };
                assert_eq!(names, chain(&["spin", "handler", trampoline]), "{stem}");
                assert_eq!(stop, StopReason::Signal, "{stem}");
                let last = recording.frames[2].pc.0 - 1;
                let rule = recording.rules.iter().find(|r| r.pc.0 == last).unwrap();
                assert!(
                    matches!(rule.covering, Cover::Rule(r) if r.flags & FLAG_SIGNAL != 0),
                    "{stem}: {rule:?}"
                );
            }
            "v3-vdso" => {
                assert_eq!(
                    names,
                    chain(&["[vdso]", "libc.so.6", "tick", "run", "main", "_start"]),
                    "{stem}"
                );
                assert_eq!(stop, StopReason::Outermost, "{stem}");
            }
            other => panic!("{stem}: no expected chain for {other}"),
        }
    }
}

/// A recorded rule of a checked-in binary that its table no longer gives is reported with
/// its PC.
#[test]
fn changed_rule_is_reported() {
    let fixtures = fixtures();
    let mut recording = one("v3-deep-1");
    let changed = recording
        .rules
        .iter_mut()
        .find(|r| matches!(r.covering, Cover::Rule(_)))
        .unwrap();
    let Cover::Rule(rule) = &mut changed.covering else {
        unreachable!()
    };
    rule.cfa_offset += 8;
    let pc = changed.pc.0;
    match replay(&recording, from(&fixtures)) {
        Err(ReplayError::RuleDiffers { pc: at, .. }) => assert_eq!(at, pc),
        other => panic!("{other:?}"),
    }
}

/// A corrupted return address gives a different stack, and the replay names the first frame
/// that differs.
#[test]
fn corrupted_return_address_names_the_frame() {
    let fixtures = fixtures();
    let mut recording = one("v3-plt-1");
    let mut copy = recording.snapshot().unwrap();
    // lib_entry's return address into main: the first word above SP equal to frame 3's PC.
    let ra = recording.frames[3].pc.0;
    let at = copy.words[..copy.len as usize].iter().position(|&w| w == ra).unwrap();
    copy.words[at] = ra + 0x10;
    recording.stack.words = words_hex(&copy.words[..copy.len as usize]);
    match replay(&recording, from(&fixtures)) {
        Err(ReplayError::FrameDiffers { index, replayed, .. }) => {
            assert_eq!(index, 3);
            assert_eq!(replayed.unwrap().pc, Hex(ra + 0x10));
        }
        other => panic!("{other:?}"),
    }
}

/// The recorded rules of objects that are not checked in (here the vDSO's) are what the walk
/// uses: changing one changes the stack from the frame it covers.
#[test]
fn recorded_rule_of_the_vdso_is_used() {
    let fixtures = fixtures();
    let mut recording = one("v3-vdso-1");
    let frame0 = recording.frames[0].pc.0;
    let rule = recording.rules.iter_mut().find(|r| r.pc.0 == frame0).unwrap();
    let Cover::Rule(fields) = &mut rule.covering else {
        panic!("{rule:?}")
    };
    fields.cfa_offset += 8;
    match replay(&recording, from(&fixtures)) {
        Err(ReplayError::FrameDiffers { index, .. }) => assert_eq!(index, 1),
        other => panic!("{other:?}"),
    }
}

/// A recording of another format version is refused, not misread.
#[test]
fn other_version_is_refused() {
    let mut recording = one("v3-deep-1");
    recording.version += 1;
    assert!(matches!(
        replay(&recording, |_| None),
        Err(ReplayError::Format(FormatError::Version(_)))
    ));
}

/// The recorder's trimming keeps what the walk reads: the trimmed copy walks to the same
/// frames as the whole, and less stack is kept than was copied.
#[test]
fn trimmed_copy_walks_the_same() {
    let fixtures = fixtures();
    let recording = one("v3-plt-1");
    let full = replay(&recording, from(&fixtures)).unwrap();
    let copy = recording.snapshot().unwrap();
    // Pad the copy with words above it, as the kernel copied them, then trim again.
    let mut padded = copy.clone();
    padded.len = (copy.len + 64).min(tracer_common::snapshot::SNAPSHOT_WORDS as u32);
    let rules: HashMap<u64, Cover> = recording.rules.iter().map(|r| (r.pc.0, r.covering)).collect();
    let walk = |c: &tracer_common::snapshot::StackSnapshot| {
        crate::snapshots::walk::walk_copy(c, recording.max_depth, |pc| {
            rules.get(&pc).and_then(|&c| Covering::from(c))
        })
    };
    assert_eq!(walk(&padded), full);
    let (base, words) = crate::snapshots::recording::trim(&padded, &full, walk);
    assert_eq!(base, copy.base);
    assert_eq!(words.len(), copy.len as usize);
}
