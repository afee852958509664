//! `-f otlp`: OpenTelemetry profiles (the `opentelemetry.proto.profiles.v1development` protos of
//! opentelemetry-proto 1.10; 1.11 changed only comments in the profiles and collector messages,
//! and added the unrelated `processcontext` proto, so its wire format is the same) sent to a collector over gRPC or HTTP/protobuf, in clear text to an
//! `http://` endpoint or over TLS (rustls) to an `https://` one, never the one in place of the
//! other. Its configuration comes from flags and the `OTEL_*` variables ([`settings`]).
//!
//! The session hands a [`Resolved`](super::model::Resolved) snapshot of each export interval to
//! [`Exporter::submit`], which never waits: the snapshot goes into a bounded queue that a tokio
//! task of its own drains, encoding each snapshot ([`encode`]) and sending it with retries and
//! exponential backoff ([`transport`]). A slow or absent collector therefore costs queued
//! snapshots, never samples: what cannot be queued or sent is counted in the [`ExportReport`].
//! This module does no symbolization and reads no kernel records.

mod container;
mod encode;
mod exporter;
mod resource;
mod settings;
mod tls;
mod transport;
mod watch;

#[cfg(test)]
mod tests;

use std::{fmt, time::Duration};

pub use container::{Container, parse_cgroup};
pub use encode::encode;
pub use exporter::{ExportReport, Exporter, Ticker};
pub use resource::{ProcessInfo, ResourceInfo, Runtime};
pub use settings::{Compression, DEFAULT_TIMEOUT, Header, HeaderArg, OtlpFlags, SettingsError, TlsFiles};
pub use tls::TlsError;

/// The path an HTTP/protobuf collector receives profiles on (the OTLP/HTTP default).
pub const HTTP_PATH: &str = "/v1development/profiles";
/// The default export interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// How to reach the collector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/gRPC: `ProfilesService/Export` over HTTP/2 (collector port 4317).
    Grpc,
    /// OTLP/HTTP: a protobuf `POST` to [`HTTP_PATH`] (collector port 4318).
    Http,
}

impl Protocol {
    /// The name `--otlp-protocol` takes: `grpc` or `http`.
    pub fn flag_name(self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::Http => "http",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Grpc => "gRPC",
            Protocol::Http => "HTTP",
        })
    }
}

/// A bad `--otlp-endpoint`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndpointError {
    #[error("`{0}` is not a URL: {1}")]
    Malformed(String, String),
    #[error(
        "`{0}` is not an endpoint: give http://HOST:PORT[/PATH] or https://HOST[:PORT][/PATH] (e.g. http://localhost:4317)"
    )]
    Shape(String),
    #[error("`{0}`: a gRPC endpoint has no path (give http[s]://HOST:PORT)")]
    GrpcPath(String),
}

/// Where and how to export: a validated `--otlp-endpoint` with its protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Destination {
    /// The full URL: for gRPC `http://host:port`, for HTTP the URL that is POSTed to.
    pub url: String,
    pub protocol: Protocol,
}

impl Destination {
    /// Validate an endpoint: `http://HOST:PORT[/PATH]` or `https://HOST[:PORT][/PATH]` (443 by
    /// default) and nothing else (a host name or an IP address, no user, query or fragment), so
    /// that a mistyped flag is refused at once rather than looked up at the first export. The
    /// protocol is `protocol` when given, else HTTP when the port is 4318 or the path ends in
    /// [`HTTP_PATH`], else gRPC (the collector's 4317). An HTTP endpoint without a path gets
    /// [`HTTP_PATH`]; one with a path is used as it is (like
    /// `OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT`).
    pub fn parse(endpoint: &str, protocol: Option<Protocol>) -> Result<Destination, EndpointError> {
        Destination::parse_as(endpoint, protocol, false)
    }

    /// [`Destination::parse`] of a base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`): an HTTP endpoint
    /// gets [`HTTP_PATH`] appended to its path.
    pub fn parse_base(endpoint: &str, protocol: Option<Protocol>) -> Result<Destination, EndpointError> {
        Destination::parse_as(endpoint, protocol, true)
    }

    /// Whether the collector is reached over TLS.
    pub fn tls(&self) -> bool {
        self.url.starts_with("https://")
    }

    fn parse_as(endpoint: &str, protocol: Option<Protocol>, base: bool) -> Result<Destination, EndpointError> {
        // Errors show the endpoint without a password it may carry (it is refused anyway).
        let shown = redacted(endpoint);
        let shape = || EndpointError::Shape(shown.clone());
        let (scheme, rest) = if let Some(rest) = endpoint.strip_prefix("https://") {
            ("https", rest)
        } else {
            ("http", endpoint.strip_prefix("http://").ok_or_else(shape)?)
        };
        let uri: hyper::Uri = endpoint
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| EndpointError::Malformed(shown.clone(), e.to_string()))?;
        let Some(authority) = uri.authority() else {
            return Err(EndpointError::Malformed(shown.clone(), "no host".to_owned()));
        };
        let host = authority.host();
        let host_ok = if host.starts_with('[') {
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::Ipv6Addr>()
                .is_ok()
        } else {
            !host.is_empty()
                && host.split('.').all(|label| {
                    !label.is_empty()
                        && !label.starts_with('-')
                        && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                })
        };
        let port_ok = match authority.port_u16() {
            Some(port) => port > 0,
            None => scheme == "https" && !authority.as_str().ends_with(':'),
        };
        if !host_ok || !port_ok || authority.as_str().contains('@') || uri.query().is_some() || rest.contains('#') {
            return Err(shape());
        }
        let path = uri.path_and_query().map_or("", |p| p.as_str()).trim_end_matches('/');
        let protocol = protocol.unwrap_or(if uri.port_u16() == Some(4318) || path.ends_with(HTTP_PATH) {
            Protocol::Http
        } else {
            Protocol::Grpc
        });
        let url = match protocol {
            Protocol::Grpc if !path.is_empty() => return Err(EndpointError::GrpcPath(shown.clone())),
            Protocol::Grpc => format!("{scheme}://{authority}"),
            Protocol::Http if path.is_empty() || (base && !path.ends_with(HTTP_PATH)) => {
                format!("{scheme}://{authority}{path}{HTTP_PATH}")
            }
            Protocol::Http => format!("{scheme}://{authority}{path}"),
        };
        Ok(Destination { url, protocol })
    }
}

/// `endpoint` with what lies between `://` and an `@` (a user and password) replaced by `***`.
fn redacted(endpoint: &str) -> String {
    let Some((scheme, rest)) = endpoint.split_once("://") else {
        return endpoint.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => endpoint.to_owned(),
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.url, self.protocol)
    }
}

/// The validated `-f otlp` configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtlpConfig {
    pub destination: Destination,
    /// How often a snapshot is exported (a last one follows at the end of the session).
    pub interval: Duration,
    /// `service.name` of every resource; `None`: the executable name of each process.
    pub service_name: Option<String>,
    /// Sent with every request (secrets: never printed).
    pub headers: Vec<Header>,
    /// Extra roots and the client's certificate (an https:// destination only).
    pub tls: TlsFiles,
    pub compression: Compression,
    /// How long one request may take, connecting included.
    pub timeout: std::time::Duration,
    /// `OTEL_RESOURCE_ATTRIBUTES` (without `service.name`), added to every resource.
    pub resource_attributes: Vec<(String, String)>,
}
