//! One attempt at delivering a request to the collector, over OTLP/gRPC (tonic) or OTLP/HTTP
//! (protobuf body, HTTP/1.1), each bounded by a timeout. The answer says whether a failure is
//! worth retrying, per the OTLP specification: gRPC `UNAVAILABLE`, `RESOURCE_EXHAUSTED`,
//! `DEADLINE_EXCEEDED`, `ABORTED`, `CANCELLED`, `OUT_OF_RANGE`, `DATA_LOSS`; HTTP 429, 502, 503,
//! 504; and connection failures. Retrying itself is the exporter's business.

use std::{future::Future, time::Duration};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::{Client, connect::HttpConnector};
use opentelemetry_proto::tonic::collector::profiles::v1development::{
    ExportProfilesServiceRequest, ExportProfilesServiceResponse, profiles_service_client::ProfilesServiceClient,
};
use prost::Message as _;
use tonic::{Code, transport::Channel};

use super::{Destination, EndpointError, Protocol};

/// How long connecting to the collector may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long one request may take, connecting included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
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
}

/// Delivers requests; the exporter's tests put a recording fake in its place.
pub trait Transport: Send + 'static {
    fn send(
        &mut self,
        request: &ExportProfilesServiceRequest,
    ) -> impl Future<Output = Result<Accepted, SendError>> + Send;
}

/// The transport of a destination.
pub enum Collector {
    Grpc(ProfilesServiceClient<Channel>),
    Http(Client<HttpConnector, Full<Bytes>>, hyper::Uri),
}

impl Collector {
    /// Prepare the connection (made at the first request; needs a tokio runtime).
    pub fn new(destination: &Destination) -> Result<Collector, EndpointError> {
        let unusable = |e: &dyn std::fmt::Display| EndpointError::Malformed(destination.url.clone(), e.to_string());
        match destination.protocol {
            Protocol::Grpc => {
                let channel = tonic::transport::Endpoint::from_shared(destination.url.clone())
                    .map_err(|e| unusable(&e))?
                    .connect_timeout(CONNECT_TIMEOUT)
                    .timeout(REQUEST_TIMEOUT)
                    .connect_lazy();
                Ok(Collector::Grpc(ProfilesServiceClient::new(channel)))
            }
            Protocol::Http => {
                let uri = destination.url.parse().map_err(|e| unusable(&e))?;
                let mut connector = HttpConnector::new();
                connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
                let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
                Ok(Collector::Http(client, uri))
            }
        }
    }
}

impl Transport for Collector {
    async fn send(&mut self, request: &ExportProfilesServiceRequest) -> Result<Accepted, SendError> {
        let response = match self {
            Collector::Grpc(client) => send_grpc(client, request).await?,
            Collector::Http(client, uri) => send_http(client, uri, request).await?,
        };
        let partial = response.partial_success.unwrap_or_default();
        Ok(Accepted {
            rejected_profiles: partial.rejected_profiles,
            message: partial.error_message,
        })
    }
}

async fn send_grpc(
    client: &mut ProfilesServiceClient<Channel>,
    request: &ExportProfilesServiceRequest,
) -> Result<ExportProfilesServiceResponse, SendError> {
    match client.export(request.clone()).await {
        Ok(response) => Ok(response.into_inner()),
        Err(status) => Err(SendError {
            message: format!("gRPC {:?}: {}", status.code(), status.message()),
            retryable: matches!(
                status.code(),
                Code::Unavailable
                    | Code::ResourceExhausted
                    | Code::DeadlineExceeded
                    | Code::Aborted
                    | Code::Cancelled
                    | Code::OutOfRange
                    | Code::DataLoss
            ),
        }),
    }
}

async fn send_http(
    client: &Client<HttpConnector, Full<Bytes>>,
    uri: &hyper::Uri,
    request: &ExportProfilesServiceRequest,
) -> Result<ExportProfilesServiceResponse, SendError> {
    let retry = |message: String| SendError {
        message,
        retryable: true,
    };
    let post = hyper::Request::post(uri.clone())
        .header(hyper::header::CONTENT_TYPE, "application/x-protobuf")
        .body(Full::new(Bytes::from(request.encode_to_vec())))
        .map_err(|e| SendError {
            message: e.to_string(),
            retryable: false,
        })?;
    let exchange = async {
        let response = client.request(post).await.map_err(|e| retry(format!("HTTP: {e}")))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| retry(format!("HTTP {status}: reading the response: {e}")))?
            .to_bytes();
        Ok((status, body))
    };
    let (status, body) = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
        .await
        .map_err(|_| retry(format!("HTTP: no response within {} s", REQUEST_TIMEOUT.as_secs())))??;
    if status.is_success() {
        // An empty or undecodable body is a full success.
        return Ok(ExportProfilesServiceResponse::decode(body).unwrap_or_default());
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(ERROR_BODY_BYTES)]).into_owned();
    Err(SendError {
        message: format!("HTTP {status}: {}", text.trim()),
        retryable: matches!(status.as_u16(), 429 | 502 | 503 | 504),
    })
}
