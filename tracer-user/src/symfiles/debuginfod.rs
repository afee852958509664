//! A debuginfod client: the debug file of a build-id from the servers of `DEBUGINFOD_URLS`
//! (space separated) or `--debuginfod`, over plain HTTP/1.1 (`GET URL/buildid/HEX/debuginfo`),
//! into the client cache gdb and perf share (`$XDG_CACHE_HOME/debuginfod_client/HEX/debuginfo`,
//! by default `~/.cache/debuginfod_client`).
//!
//! The server and the network are not trusted: each request has a deadline
//! ([`Limits::timeout`]), a session makes at most [`Limits::requests`] requests (none after
//! [`Limits::session_time`]) and takes at most [`Limits::file_bytes`] per file and
//! [`Limits::session_bytes`] in all; the response head is bounded; the body is written to an unpredictably named temporary file beside its place in
//! the cache (`outfile`) and renamed there only when complete and an ELF file with the
//! build-id asked for. Every failure is a [`FetchError`] with a short reason the summary counts.

use std::{
    io::{self, BufRead as _, BufReader, Read, Write as _},
    net::{TcpStream, ToSocketAddrs as _},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use std::os::fd::AsRawFd as _;

use object::{Object as _, ReadCache};

use crate::sys::objfile::{self, Pread};

/// Bounds of one session's fetches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// From connecting to the last byte of one response.
    pub timeout: Duration,
    /// Requests per session (each server asked counts).
    pub requests: u32,
    /// Time for all of a session's requests together (after it, none is made).
    pub session_time: Duration,
    pub file_bytes: u64,
    pub session_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(30),
            requests: 64,
            session_time: Duration::from_secs(120),
            file_bytes: tracer_unwind::objfile::MAX_OBJECT_READ,
            session_bytes: 4 << 30,
        }
    }
}

/// A server: `http://HOST[:PORT][/PATH]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server {
    pub host: String,
    pub port: u16,
    /// The path prefix, without a trailing `/` (empty for the root).
    pub path: String,
}

impl Server {
    /// Parse a server URL; only `http://` is spoken.
    pub fn parse(url: &str) -> Result<Server, String> {
        let Some(rest) = url.strip_prefix("http://") else {
            return Err(format!("debuginfod server {url:?}: only http:// URLs are supported"));
        };
        let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(']') || host.starts_with('[') => (
                host,
                port.parse::<u16>()
                    .map_err(|_| format!("debuginfod server {url:?}: bad port {port:?}"))?,
            ),
            _ => (authority, 80),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || host.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
            return Err(format!("debuginfod server {url:?}: no host"));
        }
        if path.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
            return Err(format!("debuginfod server {url:?}: bad path"));
        }
        Ok(Server {
            host: host.to_owned(),
            port,
            path: path.trim_end_matches('/').to_owned(),
        })
    }
}

/// Why a debug file was not fetched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    #[error("no server has it")]
    NotFound,
    #[error("the session's {0} debuginfod requests are used up")]
    RequestLimit(u32),
    #[error("the session's {0:?} for debuginfod requests are used up")]
    TimeLimit(Duration),
    #[error("larger than the {0}-byte limit")]
    TooLarge(u64),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("cannot reach the server: {0}")]
    Unreachable(io::Error),
    #[error("malformed response: {0}")]
    BadResponse(&'static str),
    #[error("HTTP status {0}")]
    Status(u16),
    #[error("the file is not an ELF file with the build-id asked for")]
    WrongFile,
    #[error("cannot write the cache: {0}")]
    Cache(String),
}

impl FetchError {
    /// The summary's name for it.
    pub fn reason(&self) -> &'static str {
        match self {
            FetchError::NotFound => "not_found",
            FetchError::RequestLimit(_) => "request_limit",
            FetchError::TimeLimit(_) => "time_limit",
            FetchError::TooLarge(_) => "too_large",
            FetchError::Timeout(_) => "timeout",
            FetchError::Unreachable(_) => "unreachable",
            FetchError::BadResponse(_) | FetchError::Status(_) => "bad_response",
            FetchError::WrongFile => "wrong_file",
            FetchError::Cache(_) => "cache_unwritable",
        }
    }
}

/// The client of one session.
#[derive(Clone, Debug)]
pub struct Client {
    servers: Vec<Server>,
    cache: PathBuf,
    limits: Limits,
    requests: u32,
    bytes: u64,
    /// When the session's first request was made.
    first: Option<Instant>,
}

impl Client {
    /// A client of `servers` caching in `cache`.
    pub fn new(servers: Vec<Server>, cache: PathBuf, limits: Limits) -> Client {
        Client {
            servers,
            cache,
            limits,
            requests: 0,
            bytes: 0,
            first: None,
        }
    }

    /// Whether there is a server to ask (none with `--offline`).
    pub fn has_servers(&self) -> bool {
        !self.servers.is_empty()
    }

    /// The standard cache directory: `$XDG_CACHE_HOME/debuginfod_client`, else
    /// `$HOME/.cache/debuginfod_client`.
    pub fn default_cache() -> Option<PathBuf> {
        let base = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".cache"),
        };
        Some(base.join("debuginfod_client"))
    }

    /// The cached debug file of `id`, if present (a regular file, not a link).
    pub fn cached(&self, id: &[u8]) -> Option<PathBuf> {
        let path = self.cache.join(super::hex(id)).join("debuginfo");
        let meta = std::fs::symlink_metadata(&path).ok()?;
        (meta.file_type().is_file() && matches_build_id(&path, id)).then_some(path)
    }

    /// Fetch the debug file of `id` into the cache (module docs).
    pub fn fetch(&mut self, id: &[u8]) -> Result<PathBuf, FetchError> {
        let hex = super::hex(id);
        let mut last = FetchError::NotFound;
        for server in self.servers.clone() {
            if self.requests >= self.limits.requests {
                return Err(FetchError::RequestLimit(self.limits.requests));
            }
            let first = *self.first.get_or_insert_with(Instant::now);
            if first.elapsed() >= self.limits.session_time {
                return Err(FetchError::TimeLimit(self.limits.session_time));
            }
            self.requests += 1;
            match self.fetch_from(&server, &hex, id) {
                Ok(path) => return Ok(path),
                Err(FetchError::Status(404)) => {}
                Err(err) => last = err,
            }
        }
        Err(last)
    }

    fn fetch_from(&mut self, server: &Server, hex: &str, id: &[u8]) -> Result<PathBuf, FetchError> {
        let deadline = Instant::now() + self.limits.timeout;
        let timeout = FetchError::Timeout(self.limits.timeout);
        let addr = (server.host.as_str(), server.port)
            .to_socket_addrs()
            .map_err(FetchError::Unreachable)?
            .next()
            .ok_or(FetchError::BadResponse("the host has no address"))?;
        let stream = TcpStream::connect_timeout(&addr, self.limits.timeout).map_err(|e| match e.kind() {
            io::ErrorKind::TimedOut => FetchError::Timeout(self.limits.timeout),
            _ => FetchError::Unreachable(e),
        })?;
        let _ = stream.set_write_timeout(Some(self.limits.timeout));
        let request = format!(
            "GET {}/buildid/{hex}/debuginfo HTTP/1.1\r\nHost: {}:{}\r\nUser-Agent: sframe-trace\r\nAccept: */*\r\nConnection: close\r\n\r\n",
            server.path, server.host, server.port
        );
        (&stream)
            .write_all(request.as_bytes())
            .map_err(FetchError::Unreachable)?;
        let mut reader = BufReader::new(Deadline {
            stream: &stream,
            deadline,
        });
        let length = read_head(&mut reader).map_err(|e| if e.is_timeout() { timeout } else { e })?;
        let left = self.limits.session_bytes.saturating_sub(self.bytes);
        let cap = self.limits.file_bytes.min(left);
        if length.is_some_and(|n| n > cap) {
            return Err(FetchError::TooLarge(cap));
        }
        let dir = self.cache.join(hex);
        std::fs::create_dir_all(&dir).map_err(|e| FetchError::Cache(e.to_string()))?;
        let path = dir.join("debuginfo");
        let (mut file, placement) =
            super::super::outfile::create(&path).map_err(|e| FetchError::Cache(e.to_string()))?;
        let limit = length.unwrap_or(cap + 1);
        let copied = io::copy(&mut (&mut reader).take(limit), &mut file).map_err(|e| match e.kind() {
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => FetchError::Timeout(self.limits.timeout),
            _ => FetchError::Unreachable(e),
        })?;
        self.bytes += copied;
        if copied > cap {
            return Err(FetchError::TooLarge(cap));
        }
        if length.is_some_and(|n| n != copied) {
            return Err(FetchError::BadResponse("the body ended early"));
        }
        file.flush().map_err(|e| FetchError::Cache(e.to_string()))?;
        // The temporary file itself is checked (through its descriptor), then put in place.
        if !matches_build_id(Path::new(&format!("/proc/self/fd/{}", file.as_raw_fd())), id) {
            return Err(FetchError::WrongFile);
        }
        drop(file);
        placement.commit().map_err(|e| FetchError::Cache(e.to_string()))?;
        Ok(path)
    }
}

impl FetchError {
    fn is_timeout(&self) -> bool {
        matches!(self, FetchError::Unreachable(e) if matches!(e.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock))
    }
}

/// Reads from the stream until the deadline, each read waiting at most what is left.
struct Deadline<'a> {
    stream: &'a TcpStream,
    deadline: Instant,
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        let mut stream = self.stream;
        stream.read(buf)
    }
}

/// The most bytes of a response head (status line and headers).
const MAX_HEAD: u64 = 16 << 10;

/// Read the status line and headers; the body's length (`None`: until the connection closes).
/// Only status 200 is a success; chunked bodies are refused.
pub fn read_head(reader: &mut impl io::BufRead) -> Result<Option<u64>, FetchError> {
    let mut limited = reader.take(MAX_HEAD);
    let mut line = String::new();
    let io_error = FetchError::Unreachable;
    limited.read_line(&mut line).map_err(io_error)?;
    let status = parse_status(&line)?;
    let mut length = None;
    loop {
        line.clear();
        if limited.read_line(&mut line).map_err(io_error)? == 0 {
            return Err(FetchError::BadResponse("the head is cut short or too long"));
        }
        let header = line.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            break;
        }
        let Some((name, value)) = header.split_once(':') else {
            return Err(FetchError::BadResponse("a header line without a colon"));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse::<u64>()
                    .map_err(|_| FetchError::BadResponse("a bad Content-Length"))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") && !value.eq_ignore_ascii_case("identity") {
            return Err(FetchError::BadResponse("a chunked body"));
        }
    }
    match status {
        200 => Ok(length),
        404 => Err(FetchError::Status(404)),
        other => Err(FetchError::Status(other)),
    }
}

fn parse_status(line: &str) -> Result<u16, FetchError> {
    let mut words = line.split_ascii_whitespace();
    let version = words.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(FetchError::BadResponse("not an HTTP/1.x status line"));
    }
    words
        .next()
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or(FetchError::BadResponse("no status code"))
}

/// Whether the file at `path` is ELF with GNU build-id `id` (read within bounds).
pub fn matches_build_id(path: &Path, id: &[u8]) -> bool {
    let Ok(file) = objfile::open_regular(path) else {
        return false;
    };
    let Ok(meta) = file.metadata() else {
        return false;
    };
    let cache = ReadCache::new(Pread::new(&file, meta.len()));
    object::File::parse(&cache).is_ok_and(|obj| obj.build_id().ok().flatten() == Some(id))
}

#[cfg(test)]
mod tests;
