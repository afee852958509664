use super::*;
use crate::export::model::FrameSource;
use crate::python::PyFrame;

/// Every runtime is registered once, under a name of its own (the summary's sections).
#[test]
fn each_runtime_once_by_name() {
    let runtimes = Runtimes::default();
    let names: Vec<&str> = runtimes.each().into_iter().map(Runtime::name).collect();
    assert_eq!(names, ["jit", "python", "v8"]);
    let mut runtimes = runtimes;
    assert_eq!(runtimes.each_mut().len(), names.len());
}

/// A frame is named by the runtime it belongs to, in that runtime's pseudo-object: JIT code
/// a perf map names, a Python function; native code and JIT code no map names are no
/// runtime's.
#[test]
fn frames_are_named_by_their_runtime() {
    let mut runtimes = Runtimes::default();
    runtimes.jit.names.set_map(7, 0, b"a000 100 JS:*fib /srv/fib.js:1:13\n");
    let process = runtimes.jit.names.want(7, 0xa010, 0);
    let jit = runtimes
        .resolve(&Frame::UserUnknown { addr: 0xa010, process })
        .expect("named");
    assert_eq!(
        (jit.object, jit.symbol.as_deref(), jit.source, jit.offset),
        ("[jit]", Some("JS:*fib /srv/fib.js:1:13"), FrameSource::Jit, 0xa010)
    );
    assert_eq!(runtimes.resolve(&Frame::UserUnknown { addr: 0xb000, process }), None);
    assert_eq!(
        runtimes.resolve(&Frame::User {
            object: 0,
            offset: 0x10,
            addr: 0x1010
        }),
        None
    );
    // A Python frame whose function could not be read: its code object's address.
    let python = runtimes
        .resolve(&Frame::Python(PyFrame {
            function: PyFrame::UNNAMED,
            line: 0,
            code: 0x7f00,
        }))
        .expect("a Python frame");
    assert_eq!(
        (python.object, python.symbol, python.source, python.addr),
        ("[python]", None, FrameSource::Python, 0x7f00)
    );
}

/// The hooks reach the runtimes: an exit ends the JIT incarnation of its pid (samples taken
/// after it belong to another process), and every runtime's sizes are told.
#[test]
fn exits_and_sizes_reach_every_runtime() {
    let mut runtimes = Runtimes::default();
    let before = runtimes.jit.names.want(9, 0x9000, 10);
    runtimes.exited(9, 20);
    assert_eq!(runtimes.jit.names.want(9, 0x9000, 15), before, "taken before the exit");
    assert_ne!(
        runtimes.jit.names.want(9, 0x9000, 25),
        before,
        "taken after it: another process"
    );
    let mut sizes = Vec::new();
    runtimes.sizes(&mut |name, _| sizes.push(name));
    for prefix in ["jit.", "jitdump.", "python."] {
        assert!(sizes.iter().any(|s| s.starts_with(prefix)), "{prefix} in {sizes:?}");
    }
}
