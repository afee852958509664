//! `-f otlp` end to end: a real traced run exports to an OTLP receiver built from the official
//! protos and independent of sframe-trace's encoder (tests/otlp/receiver.py: Python's
//! opentelemetry-proto with grpcio, in a private venv under target/), which decodes each request
//! and resolves it through its dictionary. Over gRPC and HTTP, the receiver must find the
//! workload's exact call chain down to `_start`, the resource attributes, the thread of each
//! sample, the build-ids of the mappings, and every sample the summary counts. A collector that
//! is absent or never answers must not stall the tracer, and the summary counts what it
//! dropped. Privileged, like every tracing test.

use std::{
    collections::HashMap,
    fs::File,
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Command, ExitStatus, Stdio},
    sync::{Mutex, OnceLock},
    thread::sleep,
    time::Duration,
};

use object::{Object as _, read::File as ElfFile};
use serde_json::Value;

use crate::support::{Running, SUMMARY_JSON, Summary, build_workloads, run, tracer_binary, wait_tracer};

/// The receiver's Python packages: the proto release of the protos sframe-trace speaks
/// (opentelemetry-proto 1.45 carries the v1development profiles of the 1.10 protos; it is the
/// newest release, none carries 1.11, whose profiles and collector messages differ from 1.10's
/// in comments only).
const RECEIVER_PACKAGES: &[&str] = &["opentelemetry-proto==1.45.2", "grpcio==1.85.1", "protobuf==7.36.2"];
/// Sampling frequency of every run.
const HZ: u32 = 499;
/// How long the workload runs, and the export interval: several periodic exports and a last one.
const WORKLOAD_SECS: u32 = 3;
const INTERVAL: &str = "1";
/// The workload's chain, outermost first (fixtures/workloads/plt.c, through libwork.so).
const CHAIN: &[&str] = &["_start", "main", "lib_entry", "callback", "spin"];
/// At least this share of the samples must be exactly [`CHAIN`] (as in the folded tests).
const MIN_EXACT: f64 = 0.99;
/// A run must give at least this fraction of the nominal HZ x seconds samples (the rest of the
/// suite may take most of a small machine).
const MIN_SAMPLE_FRACTION: f64 = 0.1;
/// The tracer's flush time at exit (trace/otlp.rs) and the slack allowed on top.
const FLUSH_SECS: u64 = 5;
const SLACK_SECS: u64 = 10;

/// The venv's python, created once (idempotent across runs: a marker names what is installed).
fn receiver_python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    static CREATING: Mutex<()> = Mutex::new(());
    let _one = CREATING.lock().unwrap_or_else(|p| p.into_inner());
    PYTHON
        .get_or_init(|| {
            let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("otlp-receiver-venv");
            let python = venv.join("bin/python");
            let marker = venv.join(format!("installed {}", RECEIVER_PACKAGES.join(" ")));
            if marker.exists() {
                return python;
            }
            let _ = std::fs::remove_dir_all(&venv);
            run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
            run(Command::new(&python)
                .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
                .args(RECEIVER_PACKAGES));
            File::create(&marker).expect("write the venv marker");
            python
        })
        .clone()
}

/// A running receiver and the file it writes one decoded request per line to.
pub(crate) struct Receiver {
    _process: Running,
    pub(crate) port: u16,
    out: PathBuf,
    _scratch: tempfile::TempDir,
}

impl Receiver {
    /// Start `receiver.py --protocol PROTOCOL` (never answering with `stall`).
    pub(crate) fn start(protocol: &str, stall: bool) -> Receiver {
        Receiver::start_with(protocol, if stall { &["--stall"] } else { &[] })
    }

    /// Start `receiver.py --protocol PROTOCOL EXTRA...` (e.g. its TLS options).
    pub(crate) fn start_with<S: AsRef<std::ffi::OsStr>>(protocol: &str, extra: &[S]) -> Receiver {
        let scratch = tempfile::tempdir().expect("tempdir");
        let out = scratch.path().join("requests.jsonl");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/receiver.py");
        let mut command = Command::new(receiver_python());
        command
            .arg(script)
            .args(["--protocol", protocol, "--out"])
            .arg(&out)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(File::create(scratch.path().join("stderr")).expect("create the receiver's stderr"));
        let mut process = Running(command.spawn().expect("start the OTLP receiver"));
        let mut line = String::new();
        BufReader::new(process.0.stdout.take().expect("the receiver's stdout"))
            .read_line(&mut line)
            .expect("read the receiver's port");
        let port = line
            .strip_prefix("PORT ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| {
                let stderr = std::fs::read_to_string(scratch.path().join("stderr")).unwrap_or_default();
                panic!("the receiver did not start: `{line}`\n{stderr}")
            });
        Receiver {
            _process: process,
            port,
            out,
            _scratch: scratch,
        }
    }

    /// The requests received so far, decoded.
    pub(crate) fn requests(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line from the receiver"))
            .collect()
    }
}

/// What one tracer run left.
pub(crate) struct Traced {
    pub(crate) command: String,
    pub(crate) status: ExitStatus,
    pub(crate) stderr: String,
}

/// Run `sframe-trace ARGS` (its summary as JSON) with `envs` added to its environment (and so
/// to a command it launches), killing it if it outlives `limit` after it starts sampling (see
/// [`wait_tracer`]): a stalled export must not hold it longer.
pub(crate) fn sframe_trace(args: &[String], envs: &[(&str, &str)], limit: Duration) -> Traced {
    let scratch = tempfile::tempdir().expect("tempdir");
    let stderr_path = scratch.path().join("stderr");
    let mut child = Command::new(tracer_binary())
        .args(SUMMARY_JSON)
        .args(args)
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(&stderr_path).expect("create the stderr file"))
        .spawn()
        .expect("spawn sframe-trace");
    let status = wait_tracer(&mut child, &stderr_path, limit);
    Traced {
        command: format!("sframe-trace {}", args.join(" ")),
        status,
        stderr: std::fs::read_to_string(&stderr_path).unwrap_or_default(),
    }
}

impl Traced {
    /// The run's summary.
    pub(crate) fn summary(&self) -> Summary {
        Summary::of(&self.stderr)
    }
}

/// The samples the summary counts.
pub(crate) fn summary_samples(traced: &Traced) -> u64 {
    traced.summary().count("samples")
}

fn build_id_hex(path: &Path) -> String {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let file = ElfFile::parse(&*data).expect("an ELF file");
    let id = file.build_id().expect("read the build-id note").expect("a build-id");
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// A sample's user functions, outermost first (all lines of each location: inlined ones
/// included).
fn chain(sample: &Value) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for frame in sample["frames"].as_array().expect("frames").iter().rev() {
        if frame["attributes"]["profile.frame.type"] == "kernel" {
            continue;
        }
        let functions = frame["functions"].as_array().expect("functions");
        if functions.is_empty() {
            names.push(format!("[{}+{}]", frame["mapping"], frame["address"]));
        }
        names.extend(functions.iter().rev().map(|f| f.as_str().expect("a name").to_owned()));
    }
    names
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("read the host name")
        .trim()
        .to_owned()
}

/// What a successful export of the plt workload run as `pid` (None: launched, pid unknown) must
/// hold, checked on what the receiver decoded.
pub(crate) fn check_export(traced: &Traced, receiver: &Receiver, bin_dir: &Path, pid: Option<u32>, service: &str) {
    let context = || format!("{}\n{}", traced.command, traced.stderr);
    assert!(traced.status.success(), "{} exited with {}", context(), traced.status);
    let requests = receiver.requests();
    assert!(
        requests.len() >= 2,
        "expected periodic exports and a last one, got {} requests: {}",
        requests.len(),
        context()
    );
    let mut exact = 0u64;
    let mut total = 0u64;
    let mut pids = Vec::new();
    let mut builds: HashMap<String, String> = HashMap::new();
    for request in &requests {
        assert_eq!(request["errors"], serde_json::json!([]), "dictionary errors: {request}");
        for resource in request["resources"].as_array().expect("resources") {
            let attributes = &resource["attributes"];
            let resource_pid = attributes["process.pid"].as_u64().expect("process.pid") as u32;
            pids.push(resource_pid);
            assert_eq!(attributes["host.name"], host_name(), "{attributes}");
            assert_eq!(attributes["service.name"], service, "{attributes}");
            assert_eq!(attributes["process.executable.name"], "plt", "{attributes}");
            for profile in resource["profiles"].as_array().expect("profiles") {
                assert_eq!(profile["sample_type"], serde_json::json!(["samples", "count"]));
                assert_eq!(profile["period_type"], serde_json::json!(["cpu", "nanoseconds"]));
                assert_eq!(profile["period"], 1_000_000_000 / u64::from(HZ));
                for sample in profile["samples"].as_array().expect("samples") {
                    let count = sample["values"][0].as_u64().expect("a count");
                    total += count;
                    if chain(sample) == CHAIN {
                        exact += count;
                    }
                    assert_eq!(sample["attributes"]["thread.id"], resource_pid, "single-threaded");
                    assert_eq!(sample["attributes"]["thread.name"], "plt");
                    for frame in sample["frames"].as_array().expect("frames") {
                        if let Some(id) = frame["mapping_attributes"]["process.executable.build_id.gnu"].as_str() {
                            builds.insert(frame["mapping"].as_str().unwrap_or_default().to_owned(), id.to_owned());
                        }
                    }
                }
            }
        }
    }
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), 1, "one process: {pids:?}");
    if let Some(pid) = pid {
        assert_eq!(pids[0], pid);
    }
    let sampled = summary_samples(traced);
    assert_eq!(
        total,
        sampled,
        "the receiver got every sample the summary counts: {}",
        context()
    );
    let min = (f64::from(HZ * WORKLOAD_SECS) * MIN_SAMPLE_FRACTION) as u64;
    assert!(total >= min, "only {total} samples (at least {min}): {}", context());
    assert!(
        exact as f64 >= MIN_EXACT * total as f64,
        "{exact} of {total} samples are exactly {}: {}",
        CHAIN.join(";"),
        context()
    );
    for object in ["plt", "libwork.so"] {
        let path = bin_dir.join(object);
        let key = path.display().to_string();
        assert_eq!(
            builds.get(&key),
            Some(&build_id_hex(&path)),
            "the build-id of {key}: {builds:?}"
        );
    }
    let summary = traced.summary();
    assert_eq!(summary.count("otlp.dropped"), 0, "{}", context());
    assert_eq!(summary.count("otlp.sent") as usize, requests.len(), "{}", context());
    assert_eq!(summary.count("otlp.sent_samples"), total, "{}", context());
}

/// `-F HZ -f otlp --otlp-endpoint ENDPOINT --export-interval INTERVAL EXTRA...`.
pub(crate) fn otlp_args(endpoint: &str, interval: &str, extra: &[&str]) -> Vec<String> {
    let hz = HZ.to_string();
    let mut args = vec![
        "-F",
        &hz,
        "-f",
        "otlp",
        "--otlp-endpoint",
        endpoint,
        "--export-interval",
        interval,
    ];
    args.extend(extra);
    args.into_iter().map(str::to_owned).collect()
}

/// OTLP/gRPC: the tracer launches the workload and exports to the receiver's gRPC port; the
/// receiver resolves the exact chain, the resource, the threads and the build-ids.
#[test]
fn exports_over_grpc() {
    privileged_test!(shared);
    let workloads = build_workloads(&["v1"]);
    let bin_dir = workloads.path().join("v1");
    let receiver = Receiver::start("grpc", false);
    let args = otlp_args(
        &format!("http://127.0.0.1:{}", receiver.port),
        INTERVAL,
        &[
            "--no-kernel",
            "--",
            &bin_dir.join("plt").display().to_string(),
            &WORKLOAD_SECS.to_string(),
        ],
    );
    let traced = sframe_trace(
        &args,
        &[],
        Duration::from_secs(u64::from(WORKLOAD_SECS) + FLUSH_SECS + SLACK_SECS),
    );
    check_export(&traced, &receiver, &bin_dir, None, "plt");
}

/// OTLP/HTTP (picked with --otlp-protocol), attached to a running workload, with a service
/// name of its own and kernel stacks recorded (the user part must still be the exact chain).
#[test]
fn exports_over_http() {
    privileged_test!(shared);
    let workloads = build_workloads(&["v1"]);
    let bin_dir = workloads.path().join("v1");
    let receiver = Receiver::start("http", false);
    let workload = Running(
        Command::new(bin_dir.join("plt"))
            .arg("60")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the workload"),
    );
    // Past ld.so and into the busy loop.
    sleep(Duration::from_millis(200));
    let args = otlp_args(
        &format!("http://127.0.0.1:{}", receiver.port),
        INTERVAL,
        &[
            "-d",
            &WORKLOAD_SECS.to_string(),
            "--otlp-protocol",
            "http",
            "--service-name",
            "checkout",
            "--pid",
            &workload.pid().to_string(),
        ],
    );
    let traced = sframe_trace(
        &args,
        &[],
        Duration::from_secs(u64::from(WORKLOAD_SECS) + FLUSH_SECS + SLACK_SECS),
    );
    check_export(&traced, &receiver, &bin_dir, Some(workload.pid()), "checkout");
}

/// A collector that is absent (nothing listens) or stalls (takes requests, never answers),
/// over either protocol: the tracer samples as usual, ends on time (its flush time at most
/// after the workload), the summary counts every export as dropped, and a session whose exports
/// all failed says so and exits 1 (it once exited 0).
#[test]
fn absent_or_stalled_collectors_never_stall_the_tracer() {
    privileged_test!(shared);
    let workloads = build_workloads(&["v1"]);
    let bin = workloads.path().join("v1/plt");
    let secs = 2;
    for (protocol, stall) in [("grpc", false), ("http", false), ("grpc", true), ("http", true)] {
        let receiver = stall.then(|| Receiver::start(protocol, true));
        let port = match &receiver {
            Some(receiver) => receiver.port,
            // A port that was free a moment ago: nothing listens there.
            None => std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port(),
        };
        let args = otlp_args(
            &format!("http://127.0.0.1:{port}"),
            "0.25",
            &[
                "--no-kernel",
                "--otlp-protocol",
                protocol,
                "--",
                &bin.display().to_string(),
                &secs.to_string(),
            ],
        );
        let traced = sframe_trace(&args, &[], Duration::from_secs(secs + FLUSH_SECS + SLACK_SECS));
        let what = format!(
            "{} collector over {protocol}",
            if stall { "a stalled" } else { "an absent" }
        );
        // Every export failed: said so, and status 1 (nothing to report).
        assert_eq!(
            traced.status.code(),
            Some(1),
            "{what}: {} exited with {}\n{}",
            traced.command,
            traced.status,
            traced.stderr
        );
        assert!(
            traced
                .stderr
                .contains("every OTLP export failed: nothing reached http://127.0.0.1:"),
            "{what}: {}",
            traced.stderr
        );
        let sampled = summary_samples(&traced);
        let min = (f64::from(HZ) * secs as f64 * MIN_SAMPLE_FRACTION) as u64;
        assert!(
            sampled >= min,
            "{what}: only {sampled} samples (at least {min})\n{}",
            traced.stderr
        );
        let summary = traced.summary();
        assert_eq!(summary.count("otlp.sent"), 0, "{what}: {}", traced.stderr);
        assert!(summary.count("otlp.dropped") >= 2, "{what}: {}", traced.stderr);
        assert_eq!(
            summary.count("otlp.dropped_samples"),
            sampled,
            "{what}: every sample lost: {}",
            traced.stderr
        );
        if let Some(receiver) = receiver {
            assert!(receiver.requests().is_empty(), "{what}: it never answered");
        }
    }
}

/// Bad OTLP flags are refused before anything is traced, in one sentence with status 2.
#[test]
fn bad_otlp_flags_are_refused() {
    let cases: &[(&[&str], &str)] = &[
        (&["-f", "otlp"], "needs --otlp-endpoint"),
        (&["--otlp-endpoint", "http://localhost:4317"], "go with -f otlp"),
        (
            &[
                "-f",
                "otlp",
                "--otlp-endpoint",
                "http://collector:4317",
                "--otlp-ca",
                "ca.pem",
            ],
            "--otlp-ca is for an https:// collector",
        ),
        (
            &[
                "-f",
                "otlp",
                "--otlp-endpoint",
                "https://collector:4317",
                "--otlp-header",
                "Bearer s3cret",
            ],
            "--otlp-header #1: a header is not `name=value`",
        ),
        (
            &[
                "-f",
                "otlp",
                "--otlp-endpoint",
                "https://collector:4317",
                "--otlp-ca",
                "/nonexistent/ca.pem",
            ],
            "--otlp-ca /nonexistent/ca.pem",
        ),
        (&["--otlp-header", "a=b", "--", "true"], "go with -f otlp"),
        (
            &["-f", "otlp", "--otlp-endpoint", "http://collector:4317/v1/x"],
            "no path",
        ),
        (
            &[
                "-f",
                "otlp",
                "--otlp-endpoint",
                "http://localhost:4317",
                "--export-interval",
                "0",
            ],
            "--export-interval",
        ),
        (
            &["-f", "otlp", "--otlp-endpoint", "http://localhost:4317", "-o", "x.pb"],
            "--output does not apply",
        ),
    ];
    for (args, expected) in cases {
        let mut args = args.to_vec();
        args.extend(["--", "true"]);
        crate::support::assert_refused(&args, expected);
    }
}
