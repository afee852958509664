//! Keeps the last TLS failure of a connection for the summary (gRPC and HTTP alike). tonic turns
//! a failed connection into an `UNAVAILABLE` status that keeps only the error's text, so the connector
//! and the connection's I/O are wrapped here and a rustls error seen on either (a refused
//! handshake; with TLS 1.3, the server's refusal of a client certificate arrives on the first
//! read) is put in a slot the transport reads after the call. Some servers (grpcio's among
//! them) refuse a client certificate by closing the connection without an alert: the client's
//! first read after its handshake then ends without a byte and without TLS `close_notify`. A
//! TLS connection that ends so (or is found closed or reset by a write), before the server
//! said anything, is recorded as
//! [`CLOSED_AFTER_HANDSHAKE`]: what happened, not a guess at why (a proxy with nowhere to send
//! the connection looks the same). Nothing else is changed: bytes and errors pass through as
//! they are.

use std::{
    future::Future,
    io,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
};

use hyper::{
    Uri,
    rt::{Read, ReadBufCursor, Write},
};

use super::tls;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The name of a TLS connection the server closed after the handshake, before sending a byte.
pub const CLOSED_AFTER_HANDSHAKE: &str = "tls-closed-after-handshake";

/// The last TLS failure: its summary name and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFailure {
    pub reason: &'static str,
    pub message: String,
}

/// Where the last TLS failure is kept.
pub type Slot = Arc<Mutex<Option<TlsFailure>>>;

fn record(slot: &Slot, error: &(dyn std::error::Error + 'static)) {
    if let Some(error) = tls::find_tls_error(error) {
        put(slot, tls::reason(error), error.to_string());
    }
}

fn put(slot: &Slot, reason: &'static str, message: String) {
    if let Ok(mut last) = slot.lock() {
        *last = Some(TlsFailure { reason, message });
    }
}

/// Whether an I/O error is the connection ending (closed or reset) rather than a fault of the
/// data.
fn ended(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}

/// A connector whose failures, and whose connections' I/O errors, are looked at.
#[derive(Clone)]
pub struct Watched<C> {
    pub inner: C,
    pub slot: Slot,
    /// The connections are TLS (an `https://` destination).
    pub tls: bool,
}

impl<C> tower_service::Service<Uri> for Watched<C>
where
    C: tower_service::Service<Uri>,
    C::Error: Into<BoxError>,
    C::Future: Send + 'static,
    C::Response: Send + 'static,
{
    type Response = WatchedIo<C::Response>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let slot = Arc::clone(&self.slot);
        let tls = self.tls;
        let connecting = self.inner.call(uri);
        Box::pin(async move {
            match connecting.await {
                Ok(io) => Ok(WatchedIo {
                    io,
                    slot,
                    tls,
                    heard: false,
                }),
                Err(error) => {
                    let error: BoxError = error.into();
                    record(&slot, &*error);
                    Err(error)
                }
            }
        })
    }
}

/// A connection whose I/O errors are looked at.
pub struct WatchedIo<T> {
    io: T,
    slot: Slot,
    /// Over TLS (its handshake done: the connector gave it).
    tls: bool,
    /// A read has succeeded: the server has spoken (or closed cleanly).
    heard: bool,
}

impl<T> WatchedIo<T> {
    fn seen<R>(&self, result: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        if let Poll::Ready(Err(error)) = &result {
            if self.tls && !self.heard && tls::find_tls_error(error).is_none() && ended(error) {
                put(
                    &self.slot,
                    CLOSED_AFTER_HANDSHAKE,
                    format!(
                        "the server closed the connection after the TLS handshake without answering ({error}); \
                         with TLS 1.3 a server that refuses the client certificate may do so"
                    ),
                );
            } else {
                record(&self.slot, error);
            }
        }
        result
    }
}

impl<T: hyper_util::client::legacy::connect::Connection> hyper_util::client::legacy::connect::Connection
    for WatchedIo<T>
{
    fn connected(&self) -> hyper_util::client::legacy::connect::Connected {
        self.io.connected()
    }
}

impl<T: Read + Unpin> Read for WatchedIo<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: ReadBufCursor<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.io).poll_read(cx, buf);
        let result = self.seen(result);
        if let Poll::Ready(Ok(())) = result {
            self.heard = true;
        }
        result
    }
}

impl<T: Write + Unpin> Write for WatchedIo<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.io).poll_write(cx, buf);
        self.seen(result)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.io).poll_flush(cx);
        self.seen(result)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.io).poll_shutdown(cx);
        self.seen(result)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.seen(result)
    }
}
