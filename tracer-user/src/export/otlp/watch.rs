//! Keeps the last TLS failure of a gRPC connection for the summary. tonic turns a failed
//! connection into an `UNAVAILABLE` status that keeps only the error's text, so the connector
//! and the connection's I/O are wrapped here and a rustls error seen on either (a refused
//! handshake; with TLS 1.3, the server's refusal of a client certificate arrives on the first
//! read) is put in a slot the transport reads after the call. Nothing else is changed: bytes and
//! errors pass through as they are.

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

/// The last TLS failure: its summary name and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFailure {
    pub reason: &'static str,
    pub message: String,
}

/// Where the last TLS failure is kept.
pub type Slot = Arc<Mutex<Option<TlsFailure>>>;

fn record(slot: &Slot, error: &(dyn std::error::Error + 'static)) {
    if let Some(error) = tls::find_tls_error(error)
        && let Ok(mut last) = slot.lock()
    {
        *last = Some(TlsFailure {
            reason: tls::reason(error),
            message: error.to_string(),
        });
    }
}

/// A connector whose failures, and whose connections' I/O errors, are looked at.
#[derive(Clone)]
pub struct Watched<C> {
    pub inner: C,
    pub slot: Slot,
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
        let connecting = self.inner.call(uri);
        Box::pin(async move {
            match connecting.await {
                Ok(io) => Ok(WatchedIo { io, slot }),
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
}

impl<T> WatchedIo<T> {
    fn seen<R>(&self, result: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        if let Poll::Ready(Err(error)) = &result {
            record(&self.slot, error);
        }
        result
    }
}

impl<T: Read + Unpin> Read for WatchedIo<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: ReadBufCursor<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.io).poll_read(cx, buf);
        self.seen(result)
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
