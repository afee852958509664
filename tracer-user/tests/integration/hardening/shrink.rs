//! A file shrunk under the tracer by its owner (fixtures/hardening/shrink.c): the symbolizer
//! maps the files it reads, and a mapped file that shrinks faults on the pages past its new
//! end. The tracer must survive, and name the file's frames from what it had read.

use std::{
    io::Read as _,
    process::{Command, Stdio},
};

use super::compile;
use crate::support::{Progress, SILENCE, SUMMARY_JSON, Summary, Tracer, json_frames, own_name, tracer_binary};

/// A library owned by another user than root, emptied (`ftruncate` to 0) by the process that
/// runs it while a frame of it is on the stack, after the tracer named it: the frames of the
/// library that were not named before the file was emptied (a new return address) are named
/// all the same, from the sealed copy the tracer read it through, and the tracer ends well.
#[test]
fn a_library_emptied_by_its_owner_is_still_named() {
    privileged_test!();
    let dir = tempfile::tempdir().expect("tempdir");
    let library = compile(dir.path(), "shrink", "libshrink.so", &["-DLIB", "-shared", "-fPIC"]);
    let program = compile(dir.path(), "shrink", &own_name(dir.path(), "shrink"), &["-ldl"]);
    // SAFETY: chown on a path this test made, with a NUL-terminated copy of it.
    let path = std::ffi::CString::new(library.to_str().expect("path")).expect("no NUL");
    sframe_trace::sys::fs::chown(&path, 65534, 65534).expect("chown to nobody");
    let go = dir.path().join("go");
    let out = dir.path().join("samples.json");
    let mut command = Command::new(tracer_binary());
    command
        .args(SUMMARY_JSON)
        .args(["-F", "499", "--no-kernel", "-f", "json", "--"])
        .arg(&program)
        .arg(&library)
        .arg(&go)
        .arg("1500")
        .stdout(Stdio::from(std::fs::File::create(&out).expect("create the output")));
    let tracer = Tracer::spawn(command);
    // The library is named once a sample through it is written; then it is emptied.
    let mut progress = Progress::new(tracer.pid());
    loop {
        let mut text = String::new();
        std::fs::File::open(&out)
            .and_then(|mut f| f.read_to_string(&mut text))
            .expect("read the output");
        if text.contains(r#""symbol":"shrink_outer""#) {
            break;
        }
        assert!(
            !progress.stuck(text.len()),
            "no sample named shrink_outer within {} s of silence",
            SILENCE.as_secs()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::fs::write(&go, b"").expect("create the go file");
    let stderr = tracer.finish();
    assert_eq!(
        std::fs::metadata(&library).expect("stat").len(),
        0,
        "the program emptied its library"
    );
    let text = std::fs::read_to_string(&out).expect("read the output");
    let samples: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|s| json_frames(s).iter().any(|f| f["symbol"] == "shrink_spin"))
        .collect();
    let in_library: Vec<&serde_json::Value> = samples
        .iter()
        .filter_map(|s| {
            json_frames(s)
                .iter()
                .find(|f| f["object"].as_str().is_some_and(|o| o.ends_with("libshrink.so")))
        })
        .collect();
    let named = in_library.iter().filter(|f| f["symbol"] == "shrink_outer").count();
    eprintln!(
        "{stderr}\n{} samples after the file was emptied, {} through the library, {named} of those named",
        samples.len(),
        in_library.len()
    );
    assert!(
        samples.len() >= 200,
        "too few samples after the library was emptied: {}",
        samples.len()
    );
    assert!(
        in_library.len() * 100 >= samples.len() * 99,
        "the walk goes through the library"
    );
    assert_eq!(named, in_library.len(), "every frame in the emptied library is named");
    assert!(Summary::of(&stderr).count("symbols.sealed_copies") >= 1, "{stderr}");
}
