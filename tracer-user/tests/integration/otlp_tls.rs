//! `-f otlp` to `https://` collectors: the receiver of `otlp.rs` (the official protos, grpcio and
//! Python's HTTP server) speaks TLS with certificates from a CA each test makes at run time
//! (rcgen, in a private temporary directory). A session exports over TLS with a bearer header
//! (from a file, or from the `OTEL_*` variables) and over mutual TLS; a wrong CA, an expired
//! certificate, a missing client certificate or header, and a server that does not speak TLS
//! are refused and counted by reason, nothing is ever sent in clear, and the secret appears in no
//! output. Privileged, like every tracing test.

use std::{
    io::{Read as _, Write as _},
    net::TcpListener,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, date_time_ymd};

use crate::otlp::{Receiver, Traced, check_export, otlp_args, sframe_trace};
use crate::support::build_workloads;

/// The bearer token the receivers require: it must reach them and appear nowhere else.
const TOKEN: &str = "s3cr3t-0f-the-fleet";
/// A run's limit: the workload, the flush at exit, and slack for a busy machine.
const LIMIT: Duration = Duration::from_secs(20);

/// The certificates of a test, written as PEM files in a private directory.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    /// A CA, a server certificate for 127.0.0.1 signed by it, an expired one, a client
    /// certificate signed by it, and another CA that signed only a client certificate.
    fn new() -> Pki {
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = Pki { dir };
        let ca = Pki::ca("sframe-trace test CA");
        pki.write("ca.pem", &ca.pem());
        let wrong_ca = Pki::ca("another CA");
        pki.write("wrong-ca.pem", &wrong_ca.pem());
        for (name, expired) in [("server", false), ("expired", true)] {
            let mut params =
                CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).expect("server params");
            if expired {
                params.not_before = date_time_ymd(2020, 1, 1);
                params.not_after = date_time_ymd(2021, 1, 1);
            }
            pki.leaf(name, &params, &ca);
        }
        let client = CertificateParams::new(vec!["sframe-trace-agent".to_owned()]).expect("client params");
        pki.leaf("client", &client, &ca);
        // A client certificate the receivers do not trust.
        pki.leaf("stranger", &client, &wrong_ca);
        pki.write(
            "token",
            &format!("# the fleet's collector\nauthorization=Bearer {TOKEN}\n"),
        );
        pki
    }

    fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        CertifiedIssuer::self_signed(params, KeyPair::generate().expect("a key")).expect("a CA")
    }

    /// `NAME.pem` and `NAME.key`: a certificate of `params` signed by `ca`.
    fn leaf(&self, name: &str, params: &CertificateParams, ca: &CertifiedIssuer<'static, KeyPair>) {
        let key = KeyPair::generate().expect("a key");
        let cert = params.signed_by(&key, ca).expect("a certificate");
        self.write(&format!("{name}.pem"), &cert.pem());
        self.write(&format!("{name}.key"), &key.serialize_pem());
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.path(name), text).expect("write a PEM file");
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn arg(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    /// The CA, the bearer token file, and the client certificate `NAME.pem` and its key.
    fn client(&self, name: &str) -> (String, String, String, String) {
        let (cert, key) = (self.arg(&format!("{name}.pem")), self.arg(&format!("{name}.key")));
        (self.arg("ca.pem"), self.arg("token"), cert, key)
    }

    /// A TLS receiver over `protocol` with the certificate `NAME.pem`, requiring the bearer
    /// header, and a client certificate from the CA with `mutual`.
    fn receiver(&self, protocol: &str, cert: &str, mutual: bool) -> Receiver {
        let mut args = vec![
            "--tls-cert".to_owned(),
            self.arg(&format!("{cert}.pem")),
            "--tls-key".to_owned(),
            self.arg(&format!("{cert}.key")),
            "--require-header".to_owned(),
            format!("authorization=Bearer {TOKEN}"),
        ];
        if mutual {
            args.extend(["--client-ca".to_owned(), self.arg("ca.pem")]);
        }
        Receiver::start_with(protocol, &args)
    }
}

/// `sframe-trace -f otlp` to `endpoint` with `extra` flags, launching the plt workload for
/// `secs` seconds, exporting every `interval`; `envs` go to its environment.
fn run(bin: &Path, endpoint: &str, interval: &str, secs: u32, extra: &[&str], envs: &[(&str, &str)]) -> Traced {
    let plt = bin.join("plt").display().to_string();
    let secs = secs.to_string();
    let mut extra = extra.to_vec();
    extra.extend(["--no-kernel", "--", &plt, &secs]);
    let mut args = otlp_args(endpoint, interval, &extra);
    if endpoint.is_empty() {
        // The endpoint comes from the environment.
        let at = args.iter().position(|a| a == "--otlp-endpoint").expect("the flag");
        args.drain(at..at + 2);
    }
    let traced = sframe_trace(&args, envs, LIMIT);
    assert!(
        !traced.stderr.contains(TOKEN),
        "the token is in the output of {}:\n{}",
        traced.command,
        traced.stderr
    );
    traced
}

/// Every request the receiver recorded carried the required header, and over HTTP was
/// compressed as `encoding` (grpcio decompresses a gRPC message before the servicer sees it,
/// and hides its `grpc-encoding`).
fn check_headers(receiver: &Receiver, encoding: Option<&str>) {
    let requests = receiver.requests();
    assert!(!requests.is_empty());
    for request in requests {
        assert_eq!(request["header_matched"], true, "{request}");
        if request["transport"] == "http" {
            assert_eq!(request["content_encoding"].as_str(), encoding, "{request}");
        }
    }
}

/// What every test here starts from, after its turn (`privileged_test!`): the v1 workloads,
/// the program it traces and a fresh PKI.
struct Setup {
    _workloads: crate::support::Workloads,
    bin: PathBuf,
    pki: Pki,
}

fn setup() -> Setup {
    let workloads = build_workloads(&["v1"]);
    let bin = workloads.path().join("v1");
    Setup {
        _workloads: workloads,
        bin,
        pki: Pki::new(),
    }
}

/// Over `https://` with a bearer header, both protocols: gRPC with the flags (the header from a
/// file, so not in `ps`), gzip-compressed; HTTP configured only by the standard variables. The
/// receiver, behind a certificate from the test's CA, finds the exact chain and every sample.
#[test]
fn exports_over_https_with_a_bearer_header() {
    privileged_test!(shared);
    let set = setup();
    let (bin, pki) = (&set.bin, &set.pki);

    let receiver = pki.receiver("grpc", "server", false);
    let (ca, token) = (pki.arg("ca.pem"), pki.arg("token"));
    let flags = [
        "--otlp-ca",
        &ca,
        "--otlp-header-file",
        &token,
        "--otlp-compression",
        "gzip",
    ];
    let endpoint = format!("https://127.0.0.1:{}", receiver.port);
    let traced = run(bin, &endpoint, "1", 3, &flags, &[("RUST_LOG", "trace")]);
    check_export(&traced, &receiver, bin, None, "plt");
    check_headers(&receiver, Some("gzip"));

    let receiver = pki.receiver("http", "server", false);
    let endpoint = format!("https://127.0.0.1:{}", receiver.port);
    let header = format!("Authorization=Bearer%20{TOKEN}");
    let envs = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca),
        ("OTEL_EXPORTER_OTLP_HEADERS", &header),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
        ("OTEL_SERVICE_NAME", "checkout"),
        ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test"),
    ];
    let traced = run(bin, "", "1", 3, &[], &envs);
    check_export(&traced, &receiver, bin, None, "checkout");
    check_headers(&receiver, Some("gzip"));
    for request in receiver.requests() {
        for resource in request["resources"].as_array().expect("resources") {
            assert_eq!(
                resource["attributes"]["deployment.environment.name"], "test",
                "{resource}"
            );
        }
    }
}

/// Mutual TLS: a receiver that requires a client certificate from the CA takes the exports of
/// a session that presents one (`--otlp-cert`/`--otlp-key`), over both protocols.
#[test]
fn exports_over_mutual_tls() {
    privileged_test!(shared);
    let set = setup();
    let (bin, pki) = (&set.bin, &set.pki);
    let (ca, token, cert, key) = pki.client("client");
    for protocol in ["grpc", "http"] {
        let receiver = pki.receiver(protocol, "server", true);
        let endpoint = format!("https://127.0.0.1:{}", receiver.port);
        let flags = [
            "--otlp-protocol",
            protocol,
            "--otlp-ca",
            &ca,
            "--otlp-header-file",
            &token,
            "--otlp-cert",
            &cert,
            "--otlp-key",
            &key,
        ];
        let traced = run(bin, &endpoint, "1", 3, &flags, &[]);
        check_export(&traced, &receiver, bin, None, "plt");
        check_headers(&receiver, None);
    }
}

/// A session whose every export was refused: it says so and exits 1, sends nothing, and the
/// summary counts the failures, all under `reason` when given.
fn check_refused(traced: &Traced, reason: Option<&str>, what: &str) {
    let context = || format!("{what}: {}\n{}", traced.command, traced.stderr);
    assert_eq!(traced.status.code(), Some(1), "{}", context());
    let summary = traced.summary();
    assert_eq!(summary.count("otlp.sent"), 0, "{}", context());
    let failed = summary.count("otlp.failed");
    assert!(failed >= 1, "{}", context());
    if let Some(reason) = reason {
        assert_eq!(
            summary.count(&format!("otlp.failed_by_reason.{reason}")),
            failed,
            "every failure is {reason}: {}",
            context()
        );
    }
}

/// What cannot be trusted is refused and counted, over both protocols, and never gets the
/// request: a server certificate from another CA (`tls-unknown-issuer`), an expired one
/// (`tls-certificate-expired`), a session without the header (`unauthenticated`), and one
/// without a client certificate where mutual TLS is required (counted; named by
/// `refused_client_certificates_are_named`).
#[test]
fn untrusted_collectors_and_missing_credentials_are_refused_and_counted() {
    privileged_test!(shared);
    let set = setup();
    let (bin, pki) = (&set.bin, &set.pki);
    let (ca, wrong_ca, token) = (pki.arg("ca.pem"), pki.arg("wrong-ca.pem"), pki.arg("token"));
    for protocol in ["grpc", "http"] {
        let cases: [(&str, bool, &[&str], Option<&str>); 4] = [
            (
                "server",
                false,
                &["--otlp-ca", &wrong_ca, "--otlp-header-file", &token],
                Some("tls-unknown-issuer"),
            ),
            (
                "expired",
                false,
                &["--otlp-ca", &ca, "--otlp-header-file", &token],
                Some("tls-certificate-expired"),
            ),
            ("server", false, &["--otlp-ca", &ca], Some("unauthenticated")),
            ("server", true, &["--otlp-ca", &ca, "--otlp-header-file", &token], None),
        ];
        for (cert, mutual, flags, reason) in cases {
            let receiver = pki.receiver(protocol, cert, mutual);
            let endpoint = format!("https://127.0.0.1:{}", receiver.port);
            let mut flags = flags.to_vec();
            flags.extend(["--otlp-protocol", protocol]);
            let traced = run(bin, &endpoint, "0.5", 1, &flags, &[]);
            let what = format!("{} over {protocol}", reason.unwrap_or("no client certificate"));
            check_refused(&traced, reason, &what);
            assert!(receiver.requests().is_empty(), "{what}: a request got through");
        }
    }
}

/// How a refused client certificate is counted: the server's alert when the client reads it
/// (Python's `ssl` sends one), or the connection closed after the handshake before the server
/// said anything (grpcio closes without an alert).
const REFUSAL_REASONS: [&str; 2] = ["tls-client-certificate-refused", "tls-closed-after-handshake"];

/// A receiver requiring a client certificate from its CA refuses one from another CA, and one
/// that presents none; with TLS 1.3 the refusal arrives after the client's handshake is done,
/// on the first read. Every failure is counted under a named TLS reason (it was `refused` or
/// `unreachable` over gRPC), over both protocols, and the request never gets through.
#[test]
fn refused_client_certificates_are_named() {
    privileged_test!(shared);
    let set = setup();
    let (bin, pki) = (&set.bin, &set.pki);
    let (ca, token, cert, key) = pki.client("stranger");
    for protocol in ["grpc", "http"] {
        let cases: [(&str, &[&str]); 2] = [
            (
                "a certificate from another CA",
                &["--otlp-cert", &cert, "--otlp-key", &key],
            ),
            ("no client certificate", &[]),
        ];
        for (what, client) in cases {
            let receiver = pki.receiver(protocol, "server", true);
            let endpoint = format!("https://127.0.0.1:{}", receiver.port);
            let mut flags = vec![
                "--otlp-protocol",
                protocol,
                "--otlp-ca",
                &ca,
                "--otlp-header-file",
                &token,
            ];
            flags.extend(client);
            let traced = run(bin, &endpoint, "0.5", 1, &flags, &[]);
            let what = format!("{what} over {protocol}");
            check_refused(&traced, None, &what);
            let summary = traced.summary();
            let named: u64 = REFUSAL_REASONS
                .iter()
                .map(|reason| summary.count(&format!("otlp.failed_by_reason.{reason}")))
                .sum();
            assert_eq!(
                named,
                summary.count("otlp.failed"),
                "{what}: every failure is one of {REFUSAL_REASONS:?}\n{}",
                traced.stderr
            );
            assert!(receiver.requests().is_empty(), "{what}: a request got through");
        }
    }
}

/// An `https://` endpoint where a plain server listens: the tracer only ever sends a TLS
/// handshake (never a request in clear, never the header), refuses what comes back
/// (`tls-not-tls`), and counts it.
#[test]
fn https_never_falls_back_to_clear_text() {
    privileged_test!(shared);
    let set = setup();
    let (bin, pki) = (&set.bin, &set.pki);
    let token = pki.arg("token");
    for protocol in ["grpc", "http"] {
        let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
        let port = listener.local_addr().expect("the port").port();
        listener.set_nonblocking(true).expect("a non-blocking listener");
        let done = Arc::new(AtomicBool::new(false));
        // Answers every connection as a plain HTTP server would, keeping what it was sent,
        // until the run is over.
        let server = std::thread::spawn({
            let done = Arc::clone(&done);
            move || {
                let mut received = Vec::new();
                while !done.load(Ordering::Relaxed) {
                    let Ok((mut stream, _)) = listener.accept() else {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    };
                    let _ = stream.set_nonblocking(false);
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                    let mut buffer = [0u8; 4096];
                    let n = stream.read(&mut buffer).unwrap_or(0);
                    received.push(buffer[..n].to_vec());
                    let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
                }
                received
            }
        });
        let endpoint = format!("https://127.0.0.1:{port}");
        let flags = ["--otlp-protocol", protocol, "--otlp-header-file", &token];
        let traced = run(bin, &endpoint, "0.5", 1, &flags, &[]);
        done.store(true, Ordering::Relaxed);
        let connections = server.join().expect("the plain server");
        check_refused(&traced, Some("tls-not-tls"), &format!("a plain server over {protocol}"));
        assert!(!connections.is_empty(), "{protocol}: no connection");
        for received in connections {
            assert!(
                received.first() == Some(&0x16),
                "{protocol}: the first bytes are not a TLS handshake record: {:?}",
                String::from_utf8_lossy(&received)
            );
            let text = String::from_utf8_lossy(&received);
            for clear in ["POST", "PRI * HTTP/2", TOKEN, "authorization"] {
                assert!(
                    !text.contains(clear),
                    "{protocol}: `{clear}` was sent in clear: {text:?}"
                );
            }
        }
    }
}
