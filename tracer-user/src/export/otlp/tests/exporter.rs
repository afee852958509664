//! The exporter and its configuration: endpoints, retries against a fake transport, shutdown,
//! a stalled collector, and the executables named in exports.

use super::*;

/// Endpoints: the protocol follows the port or path unless given, HTTP endpoints without a path
/// get the profiles path, https:// means TLS (port 443 unless given), and paths on gRPC and
/// anything but `http://HOST:PORT[/PATH]` or `https://HOST[:PORT][/PATH]` are refused.
#[test]
fn endpoints_parse() {
    let parse = |e: &str, p| Destination::parse(e, p);
    let dest = |url: &str, protocol| {
        Ok(Destination {
            url: url.to_owned(),
            protocol,
        })
    };
    assert_eq!(
        parse("http://localhost:4317", None),
        dest("http://localhost:4317", Protocol::Grpc)
    );
    assert_eq!(
        parse("http://10.0.0.1:4317/", None),
        dest("http://10.0.0.1:4317", Protocol::Grpc)
    );
    assert_eq!(
        parse("http://collector:4318", None),
        dest("http://collector:4318/v1development/profiles", Protocol::Http)
    );
    assert_eq!(
        parse("http://collector:8080/v1development/profiles", None),
        dest("http://collector:8080/v1development/profiles", Protocol::Http)
    );
    assert_eq!(
        parse("http://collector:8080/custom/path", Some(Protocol::Http)),
        dest("http://collector:8080/custom/path", Protocol::Http)
    );
    assert_eq!(
        parse("http://collector:4318", Some(Protocol::Grpc)),
        dest("http://collector:4318", Protocol::Grpc)
    );
    assert_eq!(
        parse("https://collector:4317", None),
        dest("https://collector:4317", Protocol::Grpc)
    );
    assert_eq!(
        parse("https://otlp.example.com/otlp/v1development/profiles", None),
        dest("https://otlp.example.com/otlp/v1development/profiles", Protocol::Http)
    );
    assert!(parse("https://collector:4317", None).expect("https").tls());
    assert!(!parse("http://collector:4317", None).expect("http").tls());
    // A base URL (OTEL_EXPORTER_OTLP_ENDPOINT) gets the signal's path after its own.
    assert_eq!(
        Destination::parse_base("https://otlp.example.com/otlp", Some(Protocol::Http)),
        dest("https://otlp.example.com/otlp/v1development/profiles", Protocol::Http)
    );
    assert_eq!(
        Destination::parse_base("http://collector:4318", None),
        dest("http://collector:4318/v1development/profiles", Protocol::Http)
    );
    assert!(matches!(
        parse("http://c:4317/x", None),
        Err(EndpointError::GrpcPath(_))
    ));
    assert!(matches!(parse("http://", None), Err(EndpointError::Malformed(..))));
    assert_eq!(
        parse("http://[::1]:4317", None),
        dest("http://[::1]:4317", Protocol::Grpc)
    );
    // A password in the URL is refused and not shown.
    let error = parse("https://user:pa55word@collector:4317/x", None)
        .expect_err("userinfo")
        .to_string();
    assert!(
        error.contains("https://***@collector:4317/x") && !error.contains("pa55word"),
        "{error}"
    );
    for garbage in [
        "garbage",
        "localhost:4317",
        "http://garbage",
        "http://collector:0",
        "http://collector",
        "https://collector:",
        "http://user@collector:4317",
        "http://collector:4317/?q=1",
        "http://-collector:4317",
        "http://coll_ector:4317",
        "http://collector..local:4317",
        "http://[::zz]:4317",
        "ftp://collector:4317",
    ] {
        assert!(
            matches!(
                parse(garbage, None),
                Err(EndpointError::Shape(_) | EndpointError::Malformed(..))
            ),
            "{garbage}: {:?}",
            parse(garbage, None)
        );
    }
}

/// A scripted collector: answers from `script` (then accepts) after `delay`, or never answers
/// when stalled.
#[derive(Clone, Default)]
struct Fake {
    script: Arc<Mutex<VecDeque<Result<Accepted, SendError>>>>,
    received: Arc<Mutex<Vec<ExportProfilesServiceRequest>>>,
    stalled: bool,
    /// How long each answer takes.
    delay: Duration,
}

impl Transport for Fake {
    async fn send(&mut self, request: &ExportProfilesServiceRequest) -> Result<Accepted, SendError> {
        if self.stalled {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(self.delay).await;
        self.received.lock().unwrap().push(request.clone());
        let answer = self.script.lock().unwrap().pop_front();
        answer.unwrap_or(Ok(Accepted::default()))
    }
}

fn unavailable(retryable: bool) -> Result<Accepted, SendError> {
    Err(SendError {
        message: "unavailable".to_owned(),
        retryable,
        reason: "unavailable",
    })
}

fn config() -> OtlpConfig {
    OtlpConfig {
        destination: Destination::parse("http://localhost:4317", None).expect("an endpoint"),
        interval: Duration::from_secs(10),
        service_name: None,
        headers: Vec::new(),
        tls: Default::default(),
        compression: Default::default(),
        timeout: crate::export::otlp::DEFAULT_TIMEOUT,
        resource_attributes: Vec::new(),
    }
}

const QUICK: Retry = Retry {
    attempts: 3,
    first_delay: Duration::from_millis(1),
    max_delay: Duration::from_millis(4),
};

/// Retryable failures are retried with backoff until the collector takes the export; a
/// permanent failure is given up at once; both are counted.
#[tokio::test]
async fn retries_then_gives_up() {
    let fake = Fake::default();
    fake.script
        .lock()
        .unwrap()
        .extend([unavailable(true), unavailable(true), unavailable(false)]);
    let mut exporter = Exporter::with_transport(fake.clone(), &config(), &[], QUICK);
    exporter.submit(sample_profile(), &Default::default());
    exporter.submit(sample_profile(), &Default::default());
    let deadline = Instant::now() + Duration::from_secs(5);
    while fake.received.lock().unwrap().len() < 4 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let report = exporter.shutdown(Duration::from_secs(5)).await;
    assert_eq!(fake.received.lock().unwrap().len(), 4, "3 attempts, then 1");
    assert_eq!((report.sent, report.failed, report.retries), (1, 1, 2));
    assert_eq!((report.sent_samples, report.lost_samples), (12, 12));
    assert_eq!(report.dropped(), 1);
}

/// At shutdown, a snapshot waiting out its backoff is tried once more at once, not after the
/// delay, and what still fails is counted as failed.
#[tokio::test]
async fn shutdown_cuts_the_backoff_short() {
    let fake = Fake::default();
    fake.script
        .lock()
        .unwrap()
        .extend([unavailable(true), unavailable(true)]);
    let patient = Retry {
        attempts: 5,
        first_delay: Duration::from_secs(3600),
        max_delay: Duration::from_secs(3600),
    };
    let mut exporter = Exporter::with_transport(fake.clone(), &config(), &[], patient);
    exporter.submit(sample_profile(), &Default::default());
    while fake.received.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let started = Instant::now();
    let report = exporter.shutdown(Duration::from_secs(5)).await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "shutdown waited for the backoff"
    );
    assert_eq!(fake.received.lock().unwrap().len(), 2, "the first attempt and one more");
    assert_eq!((report.sent, report.failed, report.unsent), (0, 1, 0));
}

/// A slow collector that keeps taking exports gets every queued one at shutdown, though all of
/// them together take longer than the flush time (it bounds the wait for each one).
#[tokio::test]
async fn shutdown_waits_for_a_slow_collector_that_keeps_taking_exports() {
    let fake = Fake {
        delay: Duration::from_millis(300),
        ..Fake::default()
    };
    let mut exporter = Exporter::with_transport(fake.clone(), &config(), &[], QUICK);
    for _ in 0..3 {
        exporter.submit(sample_profile(), &Default::default());
    }
    let started = Instant::now();
    let report = exporter.shutdown(Duration::from_millis(500)).await;
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "3 answers of 300 ms each"
    );
    assert_eq!(fake.received.lock().unwrap().len(), 3);
    assert_eq!(
        (report.sent, report.unsent, report.lost_samples),
        (3, 0, 0),
        "{report:?}"
    );
}

/// With a collector that never answers, submitting never waits: what does not fit the queue is
/// dropped, shutdown ends at the flush timeout, and every snapshot is accounted for.
#[tokio::test]
async fn a_stalled_collector_never_blocks_submission() {
    let fake = Fake {
        stalled: true,
        ..Fake::default()
    };
    let mut exporter = Exporter::with_transport(fake, &config(), &[], QUICK);
    let started = Instant::now();
    for _ in 0..20 {
        exporter.submit(sample_profile(), &Default::default());
        tokio::task::yield_now().await;
    }
    assert!(started.elapsed() < Duration::from_millis(500), "submit waited");
    let report = exporter.shutdown(Duration::from_millis(200)).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "shutdown outlived its flush time"
    );
    assert_eq!(report.sent, 0);
    assert!(
        report.queue_full >= 20 - 1 - crate::export::otlp::exporter::QUEUE_CAPACITY as u64,
        "{report:?}"
    );
    assert_eq!(report.dropped(), 20);
    assert_eq!(report.lost_samples, 20 * 12);
    assert!(report.to_string().contains("0 exports sent"), "{report}");
    assert!(report.to_string().contains("20 dropped"), "{report}");
}

/// A process's executable outlives the process for the snapshot with its samples, and is
/// forgotten once the process is gone and has no samples (pids are reused).
#[test]
fn executables_of_exited_processes_are_kept_then_forgotten() {
    let gone = u32::MAX - 1;
    let mut resource = resource();
    resource.processes.insert(gone, resource.processes[&100].clone());
    resource.refresh(&[gone].into(), &Default::default());
    assert!(
        resource.processes.contains_key(&gone),
        "its samples are still being sent"
    );
    resource.refresh(&Default::default(), &Default::default());
    assert!(!resource.processes.contains_key(&gone));
}

/// Empty snapshots are not exported, and the executables of traced processes are read while
/// they run (here: this test process).
#[tokio::test]
async fn empty_snapshots_are_skipped_and_executables_named() {
    let fake = Fake::default();
    let me = std::process::id();
    let mut exporter = Exporter::with_transport(fake.clone(), &config(), &[me], QUICK);
    exporter.submit(Resolved::default(), &Default::default());
    let mut profile = sample_profile();
    profile.stacks.truncate(1);
    profile.stacks[0].pid = me;
    exporter.submit(profile, &Default::default());
    let report = exporter.shutdown(Duration::from_secs(5)).await;
    assert_eq!(report.sent, 1);
    let received = fake.received.lock().unwrap();
    let attributes = resource_attributes(
        &received[0].resource_profiles[0]
            .resource
            .as_ref()
            .expect("a resource")
            .attributes,
    );
    let exe = std::env::current_exe().expect("current exe");
    let name = exe.file_name().expect("a file name").to_string_lossy().into_owned();
    assert_eq!(attributes["process.executable.name"], text(&name));
    assert_eq!(attributes["service.name"], text(&name));
}
