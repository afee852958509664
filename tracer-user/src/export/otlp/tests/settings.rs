//! The configuration from flags and `OTEL_*` variables: each variable honoured, the signal's
//! own before the general one, each flag before both, and no header value in any error.

use std::path::PathBuf;

use super::*;
use crate::export::otlp::{Compression, DEFAULT_TIMEOUT, HeaderArg, OtlpFlags, SettingsError, TlsFiles};

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn flags() -> OtlpFlags {
    OtlpFlags {
        interval: Duration::from_secs(10),
        ..Default::default()
    }
}

fn arg(text: &str) -> HeaderArg {
    HeaderArg {
        origin: "--otlp-header #1".to_owned(),
        text: text.to_owned(),
    }
}

fn headers(config: &OtlpConfig) -> Vec<(String, String)> {
    config
        .headers
        .iter()
        .map(|h| (h.name.clone(), h.value.clone()))
        .collect()
}

fn pair(name: &str, value: &str) -> (String, String) {
    (name.to_owned(), value.to_owned())
}

/// Every variable is read when no flag says otherwise: endpoint (a base URL gets the signal's
/// path), protocol, headers (percent-decoded), files, compression, timeout (ms), service name
/// and resource attributes.
#[test]
fn every_variable_is_honoured() {
    let env = env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://otlp.example.com/otlp"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "Authorization=Bearer%20abc,x-scope=team%2Ca",
        ),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/otel/ca.pem"),
        ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/etc/otel/client.pem"),
        ("OTEL_EXPORTER_OTLP_CLIENT_KEY", "/etc/otel/client.key"),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
        ("OTEL_SERVICE_NAME", "checkout"),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.environment.name=prod,team=a%3Db",
        ),
        ("UNRELATED", "x"),
    ]);
    let config = OtlpConfig::resolve(&flags(), &env).expect("a configuration");
    assert_eq!(
        config.destination.url,
        "https://otlp.example.com/otlp/v1development/profiles"
    );
    assert_eq!(config.destination.protocol, Protocol::Http);
    assert_eq!(
        headers(&config),
        [pair("authorization", "Bearer abc"), pair("x-scope", "team,a")]
    );
    assert_eq!(config.tls.ca, Some(PathBuf::from("/etc/otel/ca.pem")));
    assert_eq!(config.tls.cert, Some(PathBuf::from("/etc/otel/client.pem")));
    assert_eq!(config.tls.key, Some(PathBuf::from("/etc/otel/client.key")));
    assert_eq!(config.compression, Compression::Gzip);
    assert_eq!(config.timeout, Duration::from_millis(2500));
    assert_eq!(config.service_name.as_deref(), Some("checkout"));
    assert_eq!(
        config.resource_attributes,
        [pair("deployment.environment.name", "prod"), pair("team", "a=b")]
    );
}

/// The signal's own variables (`OTEL_EXPORTER_OTLP_PROFILES_*`) win over the general ones; its
/// endpoint is used as it is (no path appended); its headers replace those of the same name.
#[test]
fn profiles_variables_win_over_general_ones() {
    let env = env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://general:4318"),
        ("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "https://own:8443/custom"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL", "http/protobuf"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=general,x-a=1"),
        ("OTEL_EXPORTER_OTLP_PROFILES_HEADERS", "Authorization=own"),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/general.pem"),
        ("OTEL_EXPORTER_OTLP_PROFILES_CERTIFICATE", "/own.pem"),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
        ("OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION", "none"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "1000"),
        ("OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT", "3000"),
    ]);
    let config = OtlpConfig::resolve(&flags(), &env).expect("a configuration");
    assert_eq!(config.destination.url, "https://own:8443/custom");
    assert_eq!(config.destination.protocol, Protocol::Http);
    assert_eq!(headers(&config), [pair("x-a", "1"), pair("authorization", "own")]);
    assert_eq!(config.tls.ca, Some(PathBuf::from("/own.pem")));
    assert_eq!(config.compression, Compression::None);
    assert_eq!(config.timeout, Duration::from_secs(3));
}

/// Each flag overrides its variables (the signal's own included).
#[test]
fn flags_override_variables() {
    let env = env(&[
        ("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "https://own:8443/custom"),
        ("OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL", "http/protobuf"),
        ("OTEL_EXPORTER_OTLP_PROFILES_HEADERS", "authorization=env,x-env=1"),
        ("OTEL_EXPORTER_OTLP_PROFILES_CERTIFICATE", "/env-ca.pem"),
        ("OTEL_EXPORTER_OTLP_PROFILES_CLIENT_CERTIFICATE", "/env-cert.pem"),
        ("OTEL_EXPORTER_OTLP_PROFILES_CLIENT_KEY", "/env-key.pem"),
        ("OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION", "gzip"),
        ("OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT", "3000"),
        ("OTEL_SERVICE_NAME", "env-service"),
        ("OTEL_RESOURCE_ATTRIBUTES", "service.name=attr-service"),
    ]);
    let flags = OtlpFlags {
        endpoint: Some("https://flag:4317".to_owned()),
        protocol: Some(Protocol::Grpc),
        headers: vec![arg("Authorization=flag")],
        tls: TlsFiles {
            ca: Some("/flag-ca.pem".into()),
            cert: Some("/flag-cert.pem".into()),
            key: Some("/flag-key.pem".into()),
        },
        compression: Some(Compression::None),
        timeout: Some(Duration::from_secs(5)),
        service_name: Some("flag-service".to_owned()),
        ..flags()
    };
    let config = OtlpConfig::resolve(&flags, &env).expect("a configuration");
    assert_eq!(config.destination.url, "https://flag:4317");
    assert_eq!(config.destination.protocol, Protocol::Grpc);
    assert_eq!(headers(&config), [pair("x-env", "1"), pair("authorization", "flag")]);
    assert_eq!(config.tls.ca, Some(PathBuf::from("/flag-ca.pem")));
    assert_eq!(config.tls.cert, Some(PathBuf::from("/flag-cert.pem")));
    assert_eq!(config.tls.key, Some(PathBuf::from("/flag-key.pem")));
    assert_eq!(config.compression, Compression::None);
    assert_eq!(config.timeout, Duration::from_secs(5));
    assert_eq!(config.service_name.as_deref(), Some("flag-service"));
    // Without the flag and OTEL_SERVICE_NAME, the attribute names the service.
    let env_only = env.into_iter().filter(|(k, _)| k != "OTEL_SERVICE_NAME").collect();
    let config = OtlpConfig::resolve(&self::flags(), &env_only).expect("a configuration");
    assert_eq!(config.service_name.as_deref(), Some("attr-service"));
    assert!(
        config.resource_attributes.is_empty(),
        "{:?}",
        config.resource_attributes
    );
}

/// Nothing set: no endpoint is an error; an endpoint alone gets the defaults.
#[test]
fn defaults() {
    assert_eq!(
        OtlpConfig::resolve(&flags(), &HashMap::new()),
        Err(SettingsError::NoEndpoint)
    );
    let flags = OtlpFlags {
        endpoint: Some("http://localhost:4317".to_owned()),
        ..flags()
    };
    let config = OtlpConfig::resolve(&flags, &HashMap::new()).expect("a configuration");
    assert_eq!(config.destination.protocol, Protocol::Grpc);
    assert!(config.headers.is_empty());
    assert_eq!(config.tls, TlsFiles::default());
    assert_eq!(config.compression, Compression::None);
    assert_eq!(config.timeout, DEFAULT_TIMEOUT);
    assert_eq!(config.service_name, None);
}

/// Bad values are refused naming the flag or variable, and a header's value never appears in
/// the error or in the configuration's `Debug` (where a log could print it).
#[test]
fn bad_values_are_refused_and_secrets_never_shown() {
    const SECRET: &str = "s3cr3t-t0ken";
    let endpoint = |e: &str| OtlpFlags {
        endpoint: Some(e.to_owned()),
        ..flags()
    };
    let https = endpoint("https://collector:4317");
    type Case<'a> = (OtlpFlags, Vec<(&'a str, String)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            flags(),
            vec![("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json".into())],
            "http/json",
        ),
        (
            https.clone(),
            vec![("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd".into())],
            "COMPRESSION",
        ),
        (
            https.clone(),
            vec![("OTEL_EXPORTER_OTLP_TIMEOUT", "10s".into())],
            "TIMEOUT",
        ),
        (
            https.clone(),
            vec![("OTEL_EXPORTER_OTLP_TIMEOUT", "0".into())],
            "TIMEOUT",
        ),
        (
            https.clone(),
            vec![("OTEL_EXPORTER_OTLP_HEADERS", format!("Bearer {SECRET}"))],
            "OTEL_EXPORTER_OTLP_HEADERS",
        ),
        (
            https.clone(),
            vec![("OTEL_EXPORTER_OTLP_HEADERS", format!("a=%zz{SECRET}"))],
            "OTEL_EXPORTER_OTLP_HEADERS",
        ),
        (
            https.clone(),
            vec![("OTEL_EXPORTER_OTLP_HEADERS", format!("a=x\r\nhost: {SECRET}"))],
            "HEADERS",
        ),
        (
            https.clone(),
            vec![("OTEL_RESOURCE_ATTRIBUTES", "novalue".into())],
            "OTEL_RESOURCE_ATTRIBUTES",
        ),
        (endpoint("ftp://x"), vec![], "--otlp-endpoint"),
        (
            flags(),
            vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://x".into())],
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ),
    ];
    let mut cases = cases;
    cases.push((
        OtlpFlags {
            headers: vec![arg(&format!("Bearer {SECRET}"))],
            ..https.clone()
        },
        vec![],
        "--otlp-header #1",
    ));
    cases.push((
        OtlpFlags {
            headers: vec![arg(&format!("bad name={SECRET}"))],
            ..https.clone()
        },
        vec![],
        "--otlp-header #1",
    ));
    cases.push((
        OtlpFlags {
            tls: TlsFiles {
                ca: Some("/ca.pem".into()),
                ..Default::default()
            },
            ..endpoint("http://collector:4317")
        },
        vec![],
        "--otlp-ca is for an https:// collector",
    ));
    cases.push((
        OtlpFlags {
            tls: TlsFiles {
                cert: Some("/cert.pem".into()),
                ..Default::default()
            },
            ..https.clone()
        },
        vec![],
        "--otlp-cert and --otlp-key go together",
    ));
    cases.push((
        OtlpFlags {
            timeout: Some(Duration::from_secs(61)),
            ..https.clone()
        },
        vec![],
        "--otlp-timeout",
    ));
    for (flags, vars, expected) in cases {
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let error = OtlpConfig::resolve(&flags, &env(&vars))
            .expect_err(expected)
            .to_string();
        assert!(error.contains(expected), "`{error}` should name {expected}");
        assert!(!error.contains(SECRET), "`{error}` shows the secret");
        assert!(!format!("{flags:?}").contains(SECRET), "{flags:?}");
    }
    // A good configuration's Debug shows the header's name, never its value.
    let flags = OtlpFlags {
        headers: vec![arg(&format!("authorization=Bearer {SECRET}"))],
        ..https
    };
    let config = OtlpConfig::resolve(&flags, &HashMap::new()).expect("a configuration");
    assert_eq!(headers(&config), [pair("authorization", &format!("Bearer {SECRET}"))]);
    let debug = format!("{config:?}");
    assert!(debug.contains("authorization") && !debug.contains(SECRET), "{debug}");
}

/// TLS files given by variables are for https:// only: a plain collector ignores them (as other
/// OpenTelemetry components do), where the same files given by flags are a mistake.
#[test]
fn tls_variables_are_ignored_for_plain_collectors() {
    let env = env(&[
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/ca.pem"),
        ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/cert.pem"),
        ("OTEL_EXPORTER_OTLP_CLIENT_KEY", "/key.pem"),
    ]);
    let flags = OtlpFlags {
        endpoint: Some("http://localhost:4317".to_owned()),
        ..flags()
    };
    let config = OtlpConfig::resolve(&flags, &env).expect("a configuration");
    assert_eq!(config.tls, TlsFiles::default());
}

/// Hostile variables are bounded: too many headers or attributes are refused, not kept.
#[test]
fn hostile_variables_are_bounded() {
    let many: Vec<String> = (0..200).map(|i| format!("h{i}=v")).collect();
    let flags = OtlpFlags {
        endpoint: Some("https://collector:4317".to_owned()),
        ..flags()
    };
    let headers = many.join(",");
    assert_eq!(
        OtlpConfig::resolve(&flags, &env(&[("OTEL_EXPORTER_OTLP_HEADERS", &headers)])),
        Err(SettingsError::TooManyHeaders)
    );
    let long = format!("a={}", "x".repeat(10_000));
    assert_eq!(
        OtlpConfig::resolve(&flags, &env(&[("OTEL_EXPORTER_OTLP_HEADERS", &long)])),
        Err(SettingsError::TooManyHeaders)
    );
    assert_eq!(
        OtlpConfig::resolve(&flags, &env(&[("OTEL_RESOURCE_ATTRIBUTES", &headers)])),
        Err(SettingsError::TooManyAttributes)
    );
}
