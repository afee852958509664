//! `-f otlp`: OpenTelemetry profiles (the `opentelemetry.proto.profiles.v1development` protos of
//! opentelemetry-proto 1.10) sent to a collector over gRPC or HTTP/protobuf.
//!
//! The session hands a [`Resolved`](super::model::Resolved) snapshot of each export interval to
//! [`Exporter::submit`], which never waits: the snapshot goes into a bounded queue that a tokio
//! task of its own drains, encoding each snapshot ([`encode`]) and sending it with retries and
//! exponential backoff ([`transport`]). A slow or absent collector therefore costs queued
//! snapshots, never samples: what cannot be queued or sent is counted in the [`ExportReport`].
//! This module does no symbolization and reads no kernel records.

mod encode;
mod exporter;
mod resource;
mod transport;

#[cfg(test)]
mod tests;

use std::{fmt, time::Duration};

pub use encode::encode;
pub use exporter::{ExportReport, Exporter, Ticker};
pub use resource::{ProcessInfo, ResourceInfo};

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
    #[error("`{0}`: only plain http:// collectors are supported (no TLS); point it at the host's collector")]
    Scheme(String),
    #[error("`{0}` is not an endpoint: give http://HOST:PORT[/PATH] (e.g. http://localhost:4317)")]
    Shape(String),
    #[error("`{0}`: a gRPC endpoint has no path (give http://HOST:PORT)")]
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
    /// Validate an endpoint: `http://HOST:PORT[/PATH]` and nothing else (a host name or an IP
    /// address, an explicit port, no user, query or fragment), so that a mistyped flag is
    /// refused at once rather than looked up at the first export. The protocol is `protocol`
    /// when given, else HTTP when the port is 4318 or the path ends in [`HTTP_PATH`], else gRPC
    /// (the collector's 4317). An HTTP endpoint without a path gets [`HTTP_PATH`]; one with a
    /// path is used as it is (like `OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT`).
    pub fn parse(endpoint: &str, protocol: Option<Protocol>) -> Result<Destination, EndpointError> {
        let shape = || EndpointError::Shape(endpoint.to_owned());
        if endpoint.starts_with("https://") {
            return Err(EndpointError::Scheme(endpoint.to_owned()));
        }
        let rest = endpoint.strip_prefix("http://").ok_or_else(shape)?;
        let uri: hyper::Uri = endpoint
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| EndpointError::Malformed(endpoint.to_owned(), e.to_string()))?;
        let Some(authority) = uri.authority() else {
            return Err(EndpointError::Malformed(endpoint.to_owned(), "no host".to_owned()));
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
        let explicit_port = authority.port_u16().is_some_and(|port| port > 0);
        if !host_ok || !explicit_port || authority.as_str().contains('@') || uri.query().is_some() || rest.contains('#')
        {
            return Err(shape());
        }
        let path = uri.path_and_query().map_or("", |p| p.as_str()).trim_end_matches('/');
        let protocol = protocol.unwrap_or(if uri.port_u16() == Some(4318) || path.ends_with(HTTP_PATH) {
            Protocol::Http
        } else {
            Protocol::Grpc
        });
        let url = match protocol {
            Protocol::Grpc if !path.is_empty() => return Err(EndpointError::GrpcPath(endpoint.to_owned())),
            Protocol::Grpc => format!("http://{authority}"),
            Protocol::Http if path.is_empty() => format!("http://{authority}{HTTP_PATH}"),
            Protocol::Http => format!("http://{authority}{path}"),
        };
        Ok(Destination { url, protocol })
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
}
