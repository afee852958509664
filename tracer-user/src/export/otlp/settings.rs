//! The `-f otlp` configuration from its flags and the standard OpenTelemetry variables
//! (`OTEL_EXPORTER_OTLP_{,PROFILES_}*`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`), flags
//! first, a signal's own variable before the general one. Pure: the caller hands in the flags
//! (header files already read) and the environment as a map; nothing here reads a file.
//!
//! Header values are secrets: no error names one (a malformed header is named by where it came
//! from, `--otlp-header #2` or `OTEL_EXPORTER_OTLP_HEADERS`), and their `Debug` is redacted.

use std::{collections::HashMap, fmt, path::PathBuf, time::Duration};

use super::{Destination, EndpointError, OtlpConfig, Protocol};

/// The request timeout when neither `--otlp-timeout` nor `OTEL_EXPORTER_OTLP_TIMEOUT` says.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a timeout may be (a longer one would hold the export queue for nothing).
const MAX_TIMEOUT: Duration = Duration::from_secs(60);
/// Headers in all, and the longest one (name and value): the environment and files are bounded.
const MAX_HEADERS: usize = 64;
const MAX_HEADER_BYTES: usize = 8192;
/// Resource attributes from `OTEL_RESOURCE_ATTRIBUTES`, at most.
const MAX_ATTRIBUTES: usize = 128;

/// Whether request bodies are compressed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compression {
    #[default]
    None,
    Gzip,
}

/// One request header. The value is a secret (a bearer token, an API key).
#[derive(Clone, PartialEq, Eq)]
pub struct Header {
    /// Lower case (gRPC metadata keys are).
    pub name: String,
    pub value: String,
}

impl fmt::Debug for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: <redacted>", self.name)
    }
}

/// The files of a TLS session: extra trusted roots, and the client's own certificate and key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsFiles {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// One `k=v` header as given, and where it came from (for errors that never show it).
#[derive(Clone, PartialEq, Eq)]
pub struct HeaderArg {
    pub origin: String,
    pub text: String,
}

impl fmt::Debug for HeaderArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} <redacted>", self.origin)
    }
}

/// The OTLP flags as given (the files of `--otlp-header-file` already read into `headers`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OtlpFlags {
    pub endpoint: Option<String>,
    pub protocol: Option<Protocol>,
    pub headers: Vec<HeaderArg>,
    pub tls: TlsFiles,
    pub compression: Option<Compression>,
    pub timeout: Option<Duration>,
    pub service_name: Option<String>,
    pub interval: Duration,
}

/// A configuration that cannot be used. Never carries a header's value.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SettingsError {
    #[error(
        "-f otlp needs --otlp-endpoint URL or OTEL_EXPORTER_OTLP_ENDPOINT (the collector, e.g. http://localhost:4317)"
    )]
    NoEndpoint,
    #[error("{0}: {1}")]
    Endpoint(&'static str, EndpointError),
    #[error("{0}: `{1}` is not a protocol (grpc or http/protobuf; http/json is not supported)")]
    Protocol(&'static str, String),
    #[error("{0}: `{1}` is not a compression (gzip or none)")]
    Compression(&'static str, String),
    #[error("{0}: `{1}` is not a timeout in milliseconds (1 to 60000)")]
    Timeout(&'static str, String),
    #[error("--otlp-timeout must be more than 0 and at most 60 s")]
    TimeoutFlag,
    #[error("{0}: a header is not `name=value` with a header name and a printable value (the value is not shown)")]
    Header(String),
    #[error("more than {MAX_HEADERS} headers, or one longer than {MAX_HEADER_BYTES} bytes")]
    TooManyHeaders,
    #[error("OTEL_RESOURCE_ATTRIBUTES: `{0}` is not `key=value` (percent-encoded)")]
    Attribute(String),
    #[error("OTEL_RESOURCE_ATTRIBUTES: more than {MAX_ATTRIBUTES} attributes")]
    TooManyAttributes,
    #[error(
        "{0} and {1} go together (a client certificate and its key, by flags or by OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY)"
    )]
    ClientPair(&'static str, &'static str),
    #[error("{0} is for an https:// collector, but the endpoint is `{1}`")]
    TlsWithoutHttps(&'static str, String),
}

/// Each `OTEL_EXPORTER_OTLP_*` setting: the signal's own variable, then the general one.
const VARIABLES: &[(&str, &str, &str)] = &[
    (
        "ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ),
    (
        "PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ),
    (
        "CERTIFICATE",
        "OTEL_EXPORTER_OTLP_PROFILES_CERTIFICATE",
        "OTEL_EXPORTER_OTLP_CERTIFICATE",
    ),
    (
        "CLIENT_CERTIFICATE",
        "OTEL_EXPORTER_OTLP_PROFILES_CLIENT_CERTIFICATE",
        "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
    ),
    (
        "CLIENT_KEY",
        "OTEL_EXPORTER_OTLP_PROFILES_CLIENT_KEY",
        "OTEL_EXPORTER_OTLP_CLIENT_KEY",
    ),
    (
        "COMPRESSION",
        "OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION",
        "OTEL_EXPORTER_OTLP_COMPRESSION",
    ),
    (
        "TIMEOUT",
        "OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ),
];

/// The setting `what` from the environment (the signal's own variable first): the variable's
/// name, its value, and whether it was the signal's own. Empty variables are unset.
fn otlp_var<'a>(env: &'a HashMap<String, String>, what: &str) -> Option<(&'static str, &'a str, bool)> {
    let &(_, own, general) = VARIABLES.iter().find(|(w, _, _)| *w == what)?;
    let get = |name: &'static str| Some((name, env.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())?));
    get(own)
        .map(|(name, value)| (name, value, true))
        .or_else(|| get(general).map(|(name, value)| (name, value, false)))
}

/// `%XX` escapes decoded (W3C baggage, as the OpenTelemetry variables use); `None` if one is
/// malformed or the result is not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `name=value` as a header: a token name (lowered), a value of visible ASCII and spaces (no
/// line breaks: nothing can be smuggled into the request).
fn header(text: &str, origin: &str, decode: bool) -> Result<Header, SettingsError> {
    let bad = || SettingsError::Header(origin.to_owned());
    if text.len() > MAX_HEADER_BYTES {
        return Err(SettingsError::TooManyHeaders);
    }
    let (name, value) = text.split_once('=').ok_or_else(bad)?;
    let name = name.trim().to_ascii_lowercase();
    let value = if decode {
        percent_decode(value.trim()).ok_or_else(bad)?
    } else {
        value.trim().to_owned()
    };
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(token) || !value.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) {
        return Err(bad());
    }
    Ok(Header { name, value })
}

/// Put `header` in `headers`, in place of one of the same name.
fn set_header(headers: &mut Vec<Header>, header: Header) -> Result<(), SettingsError> {
    headers.retain(|h| h.name != header.name);
    headers.push(header);
    if headers.len() > MAX_HEADERS {
        return Err(SettingsError::TooManyHeaders);
    }
    Ok(())
}

/// `k=v,k2=v2` pairs (percent-encoded) of `OTEL_RESOURCE_ATTRIBUTES`.
fn resource_attributes(text: &str) -> Result<Vec<(String, String)>, SettingsError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let bad = || SettingsError::Attribute(item.chars().take(64).collect());
        let (key, value) = item.split_once('=').ok_or_else(bad)?;
        let key = percent_decode(key.trim()).filter(|k| !k.is_empty()).ok_or_else(bad)?;
        let value = percent_decode(value.trim()).ok_or_else(bad)?;
        out.retain(|(k, _)| *k != key);
        out.push((key, value));
        if out.len() > MAX_ATTRIBUTES {
            return Err(SettingsError::TooManyAttributes);
        }
    }
    Ok(out)
}

fn protocol(name: &'static str, value: &str) -> Result<Protocol, SettingsError> {
    match value {
        "grpc" => Ok(Protocol::Grpc),
        "http/protobuf" | "http" => Ok(Protocol::Http),
        other => Err(SettingsError::Protocol(name, other.to_owned())),
    }
}

fn compression(name: &'static str, value: &str) -> Result<Compression, SettingsError> {
    match value {
        "gzip" => Ok(Compression::Gzip),
        "none" => Ok(Compression::None),
        other => Err(SettingsError::Compression(name, other.to_owned())),
    }
}

impl OtlpConfig {
    /// The configuration of `flags` over `env` (the process's environment: only the
    /// `OTEL_*` variables named in this file are read).
    pub fn resolve(flags: &OtlpFlags, env: &HashMap<String, String>) -> Result<OtlpConfig, SettingsError> {
        let protocol = match (flags.protocol, otlp_var(env, "PROTOCOL")) {
            (Some(p), _) => Some(p),
            (None, Some((name, value, _))) => Some(protocol(name, value)?),
            (None, None) => None,
        };
        let destination = match (&flags.endpoint, otlp_var(env, "ENDPOINT")) {
            (Some(endpoint), _) => {
                Destination::parse(endpoint, protocol).map_err(|e| SettingsError::Endpoint("--otlp-endpoint", e))?
            }
            (None, Some((name, value, own))) => if own {
                Destination::parse(value, protocol)
            } else {
                Destination::parse_base(value, protocol)
            }
            .map_err(|e| SettingsError::Endpoint(name, e))?,
            (None, None) => return Err(SettingsError::NoEndpoint),
        };

        let mut headers = Vec::new();
        for what in ["HEADERS", "PROFILES_HEADERS"] {
            let name = format!("OTEL_EXPORTER_OTLP_{what}");
            for item in env.get(&name).map_or("", |v| v.as_str()).split(',') {
                if !item.trim().is_empty() {
                    set_header(&mut headers, header(item, &name, true)?)?;
                }
            }
        }
        for arg in &flags.headers {
            set_header(&mut headers, header(&arg.text, &arg.origin, false)?)?;
        }

        // A variable's file is for an https:// collector only (a plain one ignores it, as the
        // other OpenTelemetry components do); a flag's with http:// is a mistake.
        let tls_on = destination.tls();
        let file = |flag: &Option<PathBuf>, name: &'static str, what| -> Result<_, SettingsError> {
            match flag {
                Some(_) if !tls_on => Err(SettingsError::TlsWithoutHttps(name, destination.url.clone())),
                Some(path) => Ok(Some(path.clone())),
                None if !tls_on => Ok(None),
                None => Ok(otlp_var(env, what).map(|(_, value, _)| PathBuf::from(value))),
            }
        };
        let tls = TlsFiles {
            ca: file(&flags.tls.ca, "--otlp-ca", "CERTIFICATE")?,
            cert: file(&flags.tls.cert, "--otlp-cert", "CLIENT_CERTIFICATE")?,
            key: file(&flags.tls.key, "--otlp-key", "CLIENT_KEY")?,
        };
        match (&tls.cert, &tls.key) {
            (Some(_), None) => return Err(SettingsError::ClientPair("--otlp-cert", "--otlp-key")),
            (None, Some(_)) => return Err(SettingsError::ClientPair("--otlp-key", "--otlp-cert")),
            _ => {}
        }

        let compression = match (flags.compression, otlp_var(env, "COMPRESSION")) {
            (Some(c), _) => c,
            (None, Some((name, value, _))) => compression(name, value)?,
            (None, None) => Compression::None,
        };
        let timeout = match (flags.timeout, otlp_var(env, "TIMEOUT")) {
            (Some(t), _) if t.is_zero() || t > MAX_TIMEOUT => return Err(SettingsError::TimeoutFlag),
            (Some(t), _) => t,
            (None, Some((name, value, _))) => value
                .parse::<u64>()
                .ok()
                .map(Duration::from_millis)
                .filter(|t| !t.is_zero() && *t <= MAX_TIMEOUT)
                .ok_or_else(|| SettingsError::Timeout(name, value.to_owned()))?,
            (None, None) => DEFAULT_TIMEOUT,
        };

        let mut resource_attributes = match env.get("OTEL_RESOURCE_ATTRIBUTES") {
            Some(text) => resource_attributes(text)?,
            None => Vec::new(),
        };
        let from_attributes = resource_attributes
            .iter()
            .position(|(k, _)| k == "service.name")
            .map(|i| resource_attributes.remove(i).1);
        let service_name = flags
            .service_name
            .clone()
            .or_else(|| {
                env.get("OTEL_SERVICE_NAME")
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
            })
            .or(from_attributes);

        Ok(OtlpConfig {
            destination,
            interval: flags.interval,
            service_name,
            headers,
            tls,
            compression,
            timeout,
            resource_attributes,
        })
    }
}
