//! TLS to an `https://` collector: the rustls client configuration (the system's roots, those
//! of `--otlp-ca`, and the client's certificate and key of `--otlp-cert`/`--otlp-key` for
//! mutual TLS), and the name of what went wrong when a handshake fails, for the summary.
//!
//! The certificate files are read here, each bounded in size; their contents (a private key)
//! never appear in an error, only their paths.

use std::{io::Read as _, path::Path, sync::Arc};

use rustls::{
    AlertDescription, CertificateError, ClientConfig, RootCertStore,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _},
};

use super::TlsFiles;

/// The largest certificate or key file read (a bundle of a few hundred roots fits).
const MAX_PEM_BYTES: u64 = 4 << 20;

/// A TLS configuration that cannot be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    #[error("{flag} {path}: {message}")]
    File {
        flag: &'static str,
        path: String,
        message: String,
    },
    #[error("no trusted roots: the system has none readable and no --otlp-ca was given")]
    NoRoots,
    #[error("--otlp-cert/--otlp-key: the certificate and key do not make a client identity: {0}")]
    Identity(String),
}

/// Read `path` (at most [`MAX_PEM_BYTES`]).
fn read_pem(flag: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    let error = |message: String| TlsError::File {
        flag,
        path: path.display().to_string(),
        message,
    };
    let file = std::fs::File::open(path).map_err(|e| error(e.to_string()))?;
    let mut bytes = Vec::new();
    file.take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| error(e.to_string()))?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(error(format!("larger than {MAX_PEM_BYTES} bytes")));
    }
    Ok(bytes)
}

/// The certificates of a PEM file (at least one).
fn certificates(flag: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read_pem(flag, path)?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::File {
            flag,
            path: path.display().to_string(),
            message: format!("not PEM certificates: {e}"),
        })?;
    if certs.is_empty() {
        return Err(TlsError::File {
            flag,
            path: path.display().to_string(),
            message: "no PEM certificate in it".to_owned(),
        });
    }
    Ok(certs)
}

/// The client configuration for `files`: the system's roots and `files.ca`'s trusted, the
/// client certificate presented when given. The ALPN protocols are the caller's.
pub fn client_config(files: &TlsFiles) -> Result<ClientConfig, TlsError> {
    let mut roots = RootCertStore::empty();
    // Unreadable system certificates are skipped: --otlp-ca may be all there is.
    let system = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(system.certs);
    if let Some(ca) = &files.ca {
        for cert in certificates("--otlp-ca", ca)? {
            roots.add(cert).map_err(|e| TlsError::File {
                flag: "--otlp-ca",
                path: ca.display().to_string(),
                message: e.to_string(),
            })?;
        }
    }
    if roots.is_empty() {
        return Err(TlsError::NoRoots);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Identity(e.to_string()))?
        .with_root_certificates(roots);
    match (&files.cert, &files.key) {
        (Some(cert), Some(key)) => {
            let chain = certificates("--otlp-cert", cert)?;
            let pem = read_pem("--otlp-key", key)?;
            // The key's bytes stay out of the message.
            let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|_| TlsError::File {
                flag: "--otlp-key",
                path: key.display().to_string(),
                message: "no PEM private key (PKCS#8, PKCS#1 or SEC1) in it".to_owned(),
            })?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| TlsError::Identity(e.to_string()))
        }
        _ => Ok(builder.with_no_client_auth()),
    }
}

impl super::OtlpConfig {
    /// Read the TLS files (https:// only), so that a bad one is refused before tracing starts.
    pub fn check_tls(&self) -> Result<(), TlsError> {
        if self.destination.tls() {
            client_config(&self.tls)?;
        }
        Ok(())
    }
}

/// The TLS error somewhere in `error`'s chain of causes, if any. An `io::Error` is looked
/// into (its `source()` skips the error it wraps, and hyper-rustls wraps tokio-rustls's
/// `io::Error` in another one); the walk is bounded.
pub fn find_tls_error<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(error);
    for _ in 0..32 {
        let error = next?;
        if let Some(tls) = error.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        next = match error.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => error.source(),
        };
    }
    None
}

/// The summary's name for a failed handshake.
pub fn reason(error: &rustls::Error) -> &'static str {
    match error {
        rustls::Error::InvalidCertificate(cert) => match cert {
            CertificateError::UnknownIssuer => "tls-unknown-issuer",
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => "tls-certificate-expired",
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                "tls-certificate-not-yet-valid"
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => "tls-wrong-name",
            CertificateError::Revoked => "tls-certificate-revoked",
            _ => "tls-bad-certificate",
        },
        rustls::Error::AlertReceived(
            AlertDescription::BadCertificate
            | AlertDescription::CertificateRequired
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateUnknown
            | AlertDescription::AccessDenied,
        ) => "tls-client-certificate-refused",
        rustls::Error::AlertReceived(_) => "tls-refused-by-server",
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => "tls-not-tls",
        _ => "tls-other",
    }
}
