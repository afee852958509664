//! `--health-listen`: while a session samples, `/healthz` answers 200 and `/metrics` counts its
//! samples in the Prometheus text format; other paths are 404. A session over its
//! `--max-memory` sheds its caches, says so in its log and counts it in `/metrics`, and goes on.
//! Privileged, like every tracing test.

use std::{
    io::{Read as _, Write as _},
    net::TcpStream,
    thread::sleep,
    time::{Duration, Instant},
};

use crate::support::{Tracer, Workloads, build_workloads};

/// `GET PATH` on `port`: the status code and the body (`None` while nothing answers).
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nhost: localhost\r\n\r\n").ok()?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).ok()?;
    let (head, body) = reply.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_owned()))
}

/// The value of the sample `name` in a Prometheus text.
fn metric(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Poll `what` every 100 ms until it gives a value, for at most `limit`.
fn poll<T>(limit: Duration, mut what: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(value) = what() {
            return Some(value);
        }
        if start.elapsed() > limit {
            return None;
        }
        sleep(Duration::from_millis(100));
    }
}

/// Waits here are for the tracer's progress: it samples a workload that runs far longer than
/// any of them, and each ends the test with a message at [`PATIENCE`] (a busy machine).
const PATIENCE: Duration = Duration::from_secs(120);

/// `sframe-trace --health-listen 127.0.0.1:PORT ARGS -- plt 600` (a free port), sampling; the
/// port, and the directory of the workload (kept while it runs).
fn serving(args: &[&str]) -> (Tracer, u16, Workloads) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let workloads = build_workloads(&["v1"]);
    let plt = workloads.path().join("v1/plt");
    let listen = format!("127.0.0.1:{port}");
    let plt = plt.to_str().expect("utf-8 path");
    let full = [&["--health-listen", &listen, "--no-kernel"], args, &["--", plt, "600"]].concat();
    (Tracer::start(&full), port, workloads)
}

/// Stop the session with Ctrl-C: it must end well, its summary saying so.
fn interrupt(tracer: Tracer) -> String {
    let (status, stderr) = tracer.stop(libc::SIGINT);
    assert!(status.success(), "sframe-trace exited with {status}: {stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    stderr
}

/// While a launched workload is sampled, `/healthz` is 200 `ok`, `/metrics` has every figure
/// with its type and a growing sample count, and an unknown path is 404.
#[test]
fn healthz_and_metrics_are_served_while_sampling() {
    privileged_test!(shared);
    let (mut tracer, port, _workloads) = serving(&[]);
    let healthy = poll(PATIENCE, || get(port, "/healthz").filter(|(code, _)| *code == 200));
    tracer.drain();
    assert_eq!(healthy, Some((200, "ok\n".to_owned())), "{}", tracer.stderr.join("\n"));
    let first = poll(PATIENCE, || {
        let (code, text) = get(port, "/metrics")?;
        assert_eq!(code, 200, "{text}");
        metric(&text, "sframe_trace_samples_total")
            .filter(|&n| n > 0)
            .map(|n| (n, text))
    });
    let (first, text) = first.unwrap_or_else(|| panic!("no samples counted in {PATIENCE:?}"));
    for name in [
        "sframe_trace_lost_samples_total",
        "sframe_trace_otlp_exports_sent_total",
        "sframe_trace_otlp_exports_failed_total",
        "sframe_trace_otlp_exports_queued",
        "sframe_trace_resident_bytes",
        "sframe_trace_table_bytes",
        "sframe_trace_memory_sheds_total",
        "sframe_trace_max_memory_bytes",
    ] {
        assert!(metric(&text, name).is_some(), "{name} in {text}");
        assert!(text.contains(&format!("# TYPE {name} ")), "{name}'s type in {text}");
    }
    assert!(metric(&text, "sframe_trace_resident_bytes") > Some(1 << 20), "{text}");
    assert_eq!(
        metric(&text, "sframe_trace_max_memory_bytes"),
        Some(150 << 20),
        "the default bound"
    );
    let grew = poll(PATIENCE, || {
        metric(&get(port, "/metrics")?.1, "sframe_trace_samples_total").filter(|&n| n > first)
    });
    assert!(grew.is_some(), "the sample count stayed at {first} for {PATIENCE:?}");
    assert_eq!(get(port, "/nope").map(|r| r.0), Some(404));
    interrupt(tracer);
}

/// A bound below any real resident size (`--max-memory 1M`): the session sheds its caches
/// (said in its log, counted in `/metrics`), at most once every 10 s, and goes on sampling to
/// the end, exiting 0 with its samples and named frames.
#[test]
fn over_max_memory_caches_are_shed_and_the_session_goes_on() {
    privileged_test!(shared);
    let scratch = tempfile::tempdir().expect("tempdir");
    let folded = scratch.path().join("out.folded");
    let output = folded.to_str().expect("utf-8 path");
    let (mut tracer, port, _workloads) = serving(&["--max-memory", "1M", "-f", "folded", "-o", output]);
    tracer.wait_for("shed its caches", |line| {
        line.contains("resident memory (RssAnon)") && line.contains("is over --max-memory 1 MiB")
    });
    let shed = poll(PATIENCE, || {
        let text = get(port, "/metrics")?.1;
        assert_eq!(metric(&text, "sframe_trace_max_memory_bytes"), Some(1 << 20), "{text}");
        metric(&text, "sframe_trace_memory_sheds_total").filter(|&n| n > 0)
    });
    // Counted as it is said; the next shedding is 10 s later at the soonest.
    assert_eq!(shed, Some(1), "{}", tracer.stderr.join("\n"));
    // It goes on sampling: a second of samples after the shedding.
    let sampled = poll(PATIENCE, || {
        metric(&get(port, "/metrics")?.1, "sframe_trace_samples_total").filter(|&n| n >= 99)
    });
    assert!(
        sampled.is_some(),
        "fewer than 99 samples in {PATIENCE:?} after the shedding"
    );
    let stderr = interrupt(tracer);
    let folded = std::fs::read_to_string(&folded).expect("the folded output");
    assert!(
        folded.lines().any(|l| l.contains("main;lib_entry;callback;spin")),
        "frames are still named after the shedding: {folded}\n{stderr}"
    );
}
