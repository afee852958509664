//! The names of TLS failures, found however deep the transports wrap them.

use std::io;

use rustls::{AlertDescription, CertificateError, Error as TlsError, InvalidMessage};

use crate::export::otlp::tls::{find_tls_error, reason};

/// An error that wraps another, as hyper's and tonic's do.
#[derive(Debug, thiserror::Error)]
#[error("wrapped")]
struct Wrapper(#[source] Box<dyn std::error::Error + Send + Sync>);

/// hyper-rustls wraps tokio-rustls's `io::Error(InvalidData, rustls::Error)` in
/// `io::Error::other`, whose `source()` skips the inner error: the rustls error is still found
/// (a regression: it was not, and every TLS failure was counted as `unreachable`), under a
/// wrapper too; an error without one is not TLS.
#[test]
fn tls_errors_are_found_through_nested_io_errors() {
    let tls = TlsError::InvalidCertificate(CertificateError::UnknownIssuer);
    let nested = io::Error::other(io::Error::new(io::ErrorKind::InvalidData, tls.clone()));
    assert_eq!(find_tls_error(&nested), Some(&tls));
    let wrapped = Wrapper(Box::new(nested));
    assert_eq!(find_tls_error(&wrapped), Some(&tls));
    let plain = Wrapper(Box::new(io::Error::from(io::ErrorKind::ConnectionRefused)));
    assert_eq!(find_tls_error(&plain), None);
}

/// Each failure the summary names: an unknown CA, an expired or misnamed certificate, a client
/// certificate the server refused, a peer that does not speak TLS.
#[test]
fn failures_have_names() {
    let cases = [
        (
            TlsError::InvalidCertificate(CertificateError::UnknownIssuer),
            "tls-unknown-issuer",
        ),
        (
            TlsError::InvalidCertificate(CertificateError::Expired),
            "tls-certificate-expired",
        ),
        (
            TlsError::InvalidCertificate(CertificateError::NotValidForName),
            "tls-wrong-name",
        ),
        (
            TlsError::AlertReceived(AlertDescription::CertificateRequired),
            "tls-client-certificate-refused",
        ),
        (
            TlsError::AlertReceived(AlertDescription::HandshakeFailure),
            "tls-refused-by-server",
        ),
        (
            TlsError::InvalidMessage(InvalidMessage::InvalidContentType),
            "tls-not-tls",
        ),
        (TlsError::General("x".to_owned()), "tls-other"),
    ];
    for (error, name) in cases {
        assert_eq!(reason(&error), name, "{error:?}");
    }
}
