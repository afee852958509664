//! One attempt at delivering a request to the collector, over OTLP/gRPC (tonic) or OTLP/HTTP
//! (protobuf body, HTTP/1.1), each bounded by a timeout. The answer says whether a failure is
//! worth retrying, per the OTLP specification: gRPC `UNAVAILABLE`, `RESOURCE_EXHAUSTED`,
//! `DEADLINE_EXCEEDED`, `ABORTED`, `CANCELLED`, `OUT_OF_RANGE`, `DATA_LOSS`; HTTP 429, 502, 503,
//! 504; and connection failures, but not a failed TLS handshake (its certificates will not change
//! between attempts). Every failure is named for the summary. An `https://` collector is reached
//! through rustls only (the connector refuses plain `http://` for it); the configured headers go
//! with every request, marked sensitive, and never into a message. Retrying itself is the
//! exporter's business.

use std::{future::Future, io::Write as _, time::Duration};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::{Client, connect::HttpConnector};
use opentelemetry_proto::tonic::collector::profiles::v1development::{
    ExportProfilesServiceRequest, ExportProfilesServiceResponse, profiles_service_client::ProfilesServiceClient,
};
use prost::Message as _;
use tonic::{
    Code,
    codec::CompressionEncoding,
    metadata::{AsciiMetadataKey, AsciiMetadataValue},
    transport::Channel,
};

use super::{
    Compression, OtlpConfig, Protocol, tls,
    watch::{Slot, Watched},
};

/// How long connecting to the collector may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// The most of an HTTP error body kept for the message.
const ERROR_BODY_BYTES: usize = 200;

/// The collector took the request; it may still have refused some profiles.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Accepted {
    pub rejected_profiles: i64,
    pub message: String,
}

/// A failed attempt.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SendError {
    pub message: String,
    /// Worth trying again later.
    pub retryable: bool,
    /// Why, as the summary counts it: `unreachable`, `timeout`, `unauthenticated`, `refused`,
    /// `unavailable`, or a `tls-*` name (see [`tls::reason`], and
    /// `tls-closed-after-handshake`, `watch::CLOSED_AFTER_HANDSHAKE`).
    pub reason: &'static str,
}

/// Delivers requests; the exporter's tests put a recording fake in its place.
pub trait Transport: Send + 'static {
    fn send(
        &mut self,
        request: &ExportProfilesServiceRequest,
    ) -> impl Future<Output = Result<Accepted, SendError>> + Send;
}

/// A transport that cannot be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CollectorError {
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("`{0}` cannot be used: {1}")]
    Endpoint(String, String),
    #[error("header `{0}` cannot be sent (its value is not shown)")]
    Header(String),
}

/// The transport of a destination, with the headers of every request.
pub struct Collector {
    kind: Kind,
    headers: Vec<(String, String)>,
    gzip: bool,
    timeout: Duration,
}

/// A gRPC client, the headers of its calls, and where its connector keeps the last TLS failure.
struct Grpc {
    client: ProfilesServiceClient<Channel>,
    metadata: Vec<(AsciiMetadataKey, AsciiMetadataValue)>,
    tls_failure: Slot,
}

/// The OTLP/HTTP client, its connections watched for TLS failures.
type HttpClient = Client<Watched<HttpsConnector<HttpConnector>>, Full<Bytes>>;

enum Kind {
    Grpc(Grpc),
    Http(Box<HttpClient>, hyper::Uri, Slot),
}

impl Collector {
    /// Prepare the connection (made at the first request; needs a tokio runtime). An https://
    /// destination is reached over TLS only; an http:// one in clear text.
    pub fn new(config: &OtlpConfig) -> Result<Collector, CollectorError> {
        let destination = &config.destination;
        let unusable = |e: &dyn std::fmt::Display| CollectorError::Endpoint(destination.url.clone(), e.to_string());
        let tls_config = if destination.tls() {
            tls::client_config(&config.tls)?
        } else {
            // Never used: an http:// URL is all this connector is given.
            rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|e| unusable(&e))?
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
        };
        let schemes = HttpsConnectorBuilder::new().with_tls_config(tls_config);
        let schemes = if destination.tls() {
            schemes.https_only()
        } else {
            schemes.https_or_http()
        };
        let mut tcp = HttpConnector::new();
        tcp.set_connect_timeout(Some(CONNECT_TIMEOUT));
        tcp.enforce_http(false);
        let kind = match destination.protocol {
            Protocol::Grpc => {
                let tls_failure = Slot::default();
                let connector = Watched {
                    inner: schemes.enable_http2().wrap_connector(tcp),
                    slot: std::sync::Arc::clone(&tls_failure),
                    tls: destination.tls(),
                };
                let channel = tonic::transport::Endpoint::from_shared(destination.url.clone())
                    .map_err(|e| unusable(&e))?
                    .connect_timeout(CONNECT_TIMEOUT)
                    .timeout(config.timeout)
                    .connect_with_connector_lazy(connector);
                let mut client = ProfilesServiceClient::new(channel);
                if config.compression == Compression::Gzip {
                    client = client.send_compressed(CompressionEncoding::Gzip);
                }
                let mut metadata = Vec::new();
                for header in &config.headers {
                    let bad = || CollectorError::Header(header.name.clone());
                    let key = AsciiMetadataKey::from_bytes(header.name.as_bytes()).map_err(|_| bad())?;
                    let mut value = AsciiMetadataValue::try_from(header.value.as_str()).map_err(|_| bad())?;
                    value.set_sensitive(true);
                    metadata.push((key, value));
                }
                Kind::Grpc(Grpc {
                    client,
                    metadata,
                    tls_failure,
                })
            }
            Protocol::Http => {
                let uri = destination.url.parse().map_err(|e| unusable(&e))?;
                let tls_failure = Slot::default();
                let connector = Watched {
                    inner: schemes.enable_http1().wrap_connector(tcp),
                    slot: std::sync::Arc::clone(&tls_failure),
                    tls: destination.tls(),
                };
                let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
                Kind::Http(Box::new(client), uri, tls_failure)
            }
        };
        Ok(Collector {
            kind,
            headers: config
                .headers
                .iter()
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect(),
            gzip: config.compression == Compression::Gzip,
            timeout: config.timeout,
        })
    }
}

impl Transport for Collector {
    async fn send(&mut self, request: &ExportProfilesServiceRequest) -> Result<Accepted, SendError> {
        let response = match &mut self.kind {
            Kind::Grpc(grpc) => grpc.send(request).await?,
            Kind::Http(client, uri, tls_failure) => {
                let http = Http {
                    client,
                    uri,
                    tls_failure,
                    headers: &self.headers,
                    gzip: self.gzip,
                    timeout: self.timeout,
                };
                http.send(request).await?
            }
        };
        let partial = response.partial_success.unwrap_or_default();
        Ok(Accepted {
            rejected_profiles: partial.rejected_profiles,
            message: partial.error_message,
        })
    }
}

impl Grpc {
    async fn send(
        &mut self,
        request: &ExportProfilesServiceRequest,
    ) -> Result<ExportProfilesServiceResponse, SendError> {
        let mut call = tonic::Request::new(request.clone());
        for (key, value) in &self.metadata {
            call.metadata_mut().insert(key.clone(), value.clone());
        }
        let last_failure = || self.tls_failure.lock().ok().and_then(|mut last| last.take());
        // What an earlier call left is not this one's.
        last_failure();
        let status = match self.client.export(call).await {
            Ok(response) => return Ok(response.into_inner()),
            Err(status) => status,
        };
        // A TLS failure seen on this call's connection is the call's failure, whatever code
        // tonic gives it: the server cannot have answered past it (regression: a connection a
        // server closed after the handshake, rustls's unexpected end of file, came back as
        // `OutOfRange`, tonic's code for an I/O `UnexpectedEof`, and was counted `unavailable`).
        let tls = last_failure();
        let reason = match (&tls, status.code()) {
            (Some(failure), _) => failure.reason,
            (None, Code::Unauthenticated | Code::PermissionDenied) => "unauthenticated",
            (None, Code::DeadlineExceeded) => "timeout",
            (None, Code::Unavailable) => "unreachable",
            (None, code) if retryable_code(code) => "unavailable",
            (None, _) => "refused",
        };
        Err(SendError {
            message: match &tls {
                Some(failure) => format!("gRPC: TLS: {}", failure.message),
                None => format!("gRPC {:?}: {}", status.code(), status.message()),
            },
            // A handshake that failed fails again: the certificates do not change.
            retryable: tls.is_none() && retryable_code(status.code()),
            reason,
        })
    }
}

/// The gRPC codes worth retrying, per the OTLP specification.
fn retryable_code(code: Code) -> bool {
    matches!(
        code,
        Code::Unavailable
            | Code::ResourceExhausted
            | Code::DeadlineExceeded
            | Code::Aborted
            | Code::Cancelled
            | Code::OutOfRange
            | Code::DataLoss
    )
}

/// One OTLP/HTTP request's means.
struct Http<'a> {
    client: &'a HttpClient,
    uri: &'a hyper::Uri,
    /// Where its connector keeps the last TLS failure.
    tls_failure: &'a Slot,
    headers: &'a [(String, String)],
    gzip: bool,
    timeout: Duration,
}

impl Http<'_> {
    async fn send(&self, request: &ExportProfilesServiceRequest) -> Result<ExportProfilesServiceResponse, SendError> {
        let fail = |message: String, retryable, reason| SendError {
            message,
            retryable,
            reason,
        };
        let mut body = request.encode_to_vec();
        let mut post =
            hyper::Request::post(self.uri.clone()).header(hyper::header::CONTENT_TYPE, "application/x-protobuf");
        if self.gzip {
            let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            body = encoder
                .write_all(&body)
                .and_then(|()| encoder.finish())
                .map_err(|e| fail(format!("gzip: {e}"), false, "refused"))?;
            post = post.header(hyper::header::CONTENT_ENCODING, "gzip");
        }
        for (name, value) in self.headers {
            let mut value = hyper::header::HeaderValue::from_str(value)
                .map_err(|_| fail(format!("header `{name}` cannot be sent"), false, "refused"))?;
            value.set_sensitive(true);
            post = post.header(name.as_str(), value);
        }
        let post = post
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| fail(e.to_string(), false, "refused"))?;
        let last_failure = || self.tls_failure.lock().ok().and_then(|mut last| last.take());
        // What an earlier request left is not this one's.
        last_failure();
        let exchange = async {
            let response =
                self.client
                    .request(post)
                    .await
                    .map_err(|e| match (tls::find_tls_error(&e), last_failure()) {
                        (Some(tls), _) => fail(format!("HTTP: TLS: {tls}"), false, tls::reason(tls)),
                        (None, Some(failure)) => fail(format!("HTTP: TLS: {}", failure.message), false, failure.reason),
                        (None, None) => fail(format!("HTTP: {e}"), true, "unreachable"),
                    })?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| fail(format!("HTTP {status}: reading the response: {e}"), true, "unavailable"))?
                .to_bytes();
            Ok((status, body))
        };
        let (status, body) = tokio::time::timeout(self.timeout, exchange).await.map_err(|_| {
            fail(
                format!("HTTP: no response within {:.1} s", self.timeout.as_secs_f64()),
                true,
                "timeout",
            )
        })??;
        if status.is_success() {
            // An empty or undecodable body is a full success.
            return Ok(ExportProfilesServiceResponse::decode(body).unwrap_or_default());
        }
        let text = String::from_utf8_lossy(&body[..body.len().min(ERROR_BODY_BYTES)]).into_owned();
        let reason = match status.as_u16() {
            401 | 403 => "unauthenticated",
            429 | 502 | 503 | 504 => "unavailable",
            _ => "refused",
        };
        Err(fail(
            format!("HTTP {status}: {}", tracer_unwind::names::escaped(text.trim())),
            matches!(status.as_u16(), 429 | 502 | 503 | 504),
            reason,
        ))
    }
}
