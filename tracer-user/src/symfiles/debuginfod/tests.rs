//! The debuginfod client against hand-made servers on 127.0.0.1: what a hostile or broken
//! server can do (lie about sizes, send another file, stall, answer garbage) ends in a
//! [`FetchError`] and leaves nothing in the cache; a good answer lands at the standard place.

use std::{
    io::{Read as _, Write as _},
    net::TcpListener,
    path::Path,
    time::Duration,
};

use super::{Client, FetchError, Limits, Server, read_head};

#[test]
fn server_urls_parse() {
    let s = Server::parse("http://127.0.0.1:8002").expect("parses");
    assert_eq!((s.host.as_str(), s.port, s.path.as_str()), ("127.0.0.1", 8002, ""));
    let s = Server::parse("http://debuginfod.example.org/prefix/").expect("parses");
    assert_eq!(
        (s.host.as_str(), s.port, s.path.as_str()),
        ("debuginfod.example.org", 80, "prefix")
    );
    let s = Server::parse("http://[::1]:9000/x").expect("parses");
    assert_eq!((s.host.as_str(), s.port), ("::1", 9000));
    assert!(
        Server::parse("https://example.org")
            .unwrap_err()
            .contains("only http://")
    );
    assert!(Server::parse("http://:80").is_err());
    assert!(Server::parse("http://host:99999").is_err());
    assert!(Server::parse("http://host/a b").is_err());
}

#[test]
fn response_heads_parse_or_are_refused() {
    let head = |text: &str| read_head(&mut text.as_bytes());
    assert_eq!(
        head("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nbody").ok(),
        Some(Some(12))
    );
    assert_eq!(head("HTTP/1.0 200 OK\r\nServer: x\r\n\r\n").ok(), Some(None));
    assert!(matches!(
        head("HTTP/1.1 404 Not Found\r\n\r\n"),
        Err(FetchError::Status(404))
    ));
    assert!(matches!(
        head("HTTP/1.1 503 Busy\r\n\r\n"),
        Err(FetchError::Status(503))
    ));
    assert!(matches!(
        head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
        Err(FetchError::BadResponse(_))
    ));
    assert!(matches!(
        head("SSH-2.0-OpenSSH\r\n\r\n"),
        Err(FetchError::BadResponse(_))
    ));
    assert!(matches!(
        head("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"),
        Err(FetchError::BadResponse(_))
    ));
    // A head that never ends is cut at its bound.
    let endless = format!("HTTP/1.1 200 OK\r\n{}", "X-Pad: y\r\n".repeat(10_000));
    assert!(matches!(head(&endless), Err(FetchError::BadResponse(_))));
}

/// A server that answers one connection with `response` (after reading the request).
fn serve_once(response: Vec<u8>, stall: bool) -> (Server, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let handle = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().expect("accept");
        let mut request = [0u8; 4096];
        let _ = conn.read(&mut request);
        let _ = conn.write_all(&response);
        if stall {
            std::thread::sleep(Duration::from_secs(3));
        }
    });
    let server = Server {
        host: "127.0.0.1".into(),
        port,
        path: String::new(),
    };
    (server, handle)
}

/// This test binary's own build-id and bytes (an ELF file that has one).
fn own_elf() -> (Vec<u8>, Vec<u8>) {
    let bytes = std::fs::read("/proc/self/exe").expect("read the test binary");
    let id = object::File::parse(bytes.as_slice())
        .ok()
        .and_then(|f| object::Object::build_id(&f).ok().flatten().map(<[u8]>::to_vec))
        .expect("the test binary has a build-id");
    (id, bytes)
}

fn client(server: Server, cache: &Path, limits: Limits) -> Client {
    Client::new(vec![server], cache.to_path_buf(), limits)
}

fn cache_is_empty(cache: &Path, id: &[u8]) -> bool {
    let dir = cache.join(super::super::hex(id));
    std::fs::read_dir(&dir).map_or(true, |mut entries| entries.next().is_none())
}

#[test]
fn a_good_answer_lands_in_the_cache() {
    let (id, bytes) = own_elf();
    let mut response = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", bytes.len()).into_bytes();
    response.extend_from_slice(&bytes);
    let (server, handle) = serve_once(response, false);
    let cache = tempfile::tempdir().expect("tempdir");
    let mut c = client(server, cache.path(), Limits::default());
    let path = c.fetch(&id).expect("fetched");
    assert_eq!(path, cache.path().join(super::super::hex(&id)).join("debuginfo"));
    assert_eq!(std::fs::read(&path).expect("read"), bytes);
    assert_eq!(c.cached(&id), Some(path));
    handle.join().expect("server");
}

#[test]
fn hostile_answers_are_refused_and_leave_no_file() {
    let (id, bytes) = own_elf();
    let cache = tempfile::tempdir().expect("tempdir");
    let small = Limits {
        file_bytes: 1 << 20,
        timeout: Duration::from_millis(500),
        ..Limits::default()
    };
    // Claims more than the limit.
    let (server, h) = serve_once(
        b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n".to_vec(),
        false,
    );
    assert!(matches!(
        client(server, cache.path(), small).fetch(&id),
        Err(FetchError::TooLarge(_))
    ));
    h.join().expect("server");
    // No length, and more bytes than the limit until the connection closes.
    let mut endless = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
    endless.extend(std::iter::repeat_n(0u8, (1 << 20) + 10));
    let (server, h) = serve_once(endless, false);
    assert!(matches!(
        client(server, cache.path(), small).fetch(&id),
        Err(FetchError::TooLarge(_))
    ));
    h.join().expect("server");
    // Another file than the one asked for.
    let mut other = bytes.clone();
    let at = other
        .windows(id.len())
        .position(|w| w == id.as_slice())
        .expect("build-id in the file");
    other[at] ^= 0xff;
    let mut response = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", other.len()).into_bytes();
    response.extend_from_slice(&other);
    let (server, h) = serve_once(response, false);
    assert!(matches!(
        client(server, cache.path(), Limits::default()).fetch(&id),
        Err(FetchError::WrongFile)
    ));
    h.join().expect("server");
    // Stalls after promising a body.
    let (server, h) = serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc".to_vec(), true);
    assert!(matches!(
        client(server, cache.path(), small).fetch(&id),
        Err(FetchError::Timeout(_))
    ));
    h.join().expect("server");
    assert!(cache_is_empty(cache.path(), &id), "a refused answer left a file");
}

#[test]
fn requests_are_bounded_per_session() {
    let (id, _) = own_elf();
    let cache = tempfile::tempdir().expect("tempdir");
    let (server, h) = serve_once(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec(), false);
    let mut c = client(
        server,
        cache.path(),
        Limits {
            requests: 1,
            ..Limits::default()
        },
    );
    assert!(matches!(c.fetch(&id), Err(FetchError::NotFound)));
    h.join().expect("server");
    assert!(matches!(c.fetch(&id), Err(FetchError::RequestLimit(1))));
    // Once the session's time for requests is over, none is made (nothing listens here).
    let mut late = Client::new(
        vec![Server::parse("http://127.0.0.1:1").expect("parses")],
        cache.path().to_path_buf(),
        Limits {
            session_time: Duration::ZERO,
            ..Limits::default()
        },
    );
    assert!(matches!(late.fetch(&id), Err(FetchError::TimeLimit(_))));
}
