//! The HTTP endpoint of `--metrics ADDR`: `GET /metrics` (and `HEAD`) answers with the exposition a scrape
//! function makes, in the format the request's `Accept` header asks for.
//!
//! A small HTTP/1.1 server on std's `TcpListener`, one request per connection. tiny_http was tried first
//! and failed hostile testing: no timeouts (four clients that never read their answer locked every other
//! scrape out), no limit on a request's size (a 400 MiB header line grew the tracer by 300 MB), and a panic in
//! its accept thread when the process ran out of descriptors, after which the port stayed dead. Here:
//! - connections are taken on a thread of the endpoint's own, so a scrape never holds up the event reader;
//! - each is answered on a thread of its own, at most [`MAX_CONNECTIONS`] at once (more get 503 at once),
//!   with [`READ_TIMEOUT`] to send the request and [`WRITE_TIMEOUT`] to read the answer;
//! - a request head longer than [`MAX_REQUEST_HEAD`] gets 431; a failed accept (no descriptors left) is waited
//!   out, never fatal.

use super::Format;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Connections served at once; Prometheus scrapes once per interval.
pub const MAX_CONNECTIONS: usize = 16;
/// How long a client has to send its request.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client has to take each part of the answer.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest request line and headers taken.
pub const MAX_REQUEST_HEAD: usize = 16 * 1024;
/// How often the accepting thread looks whether it is to stop.
const STOP_POLL: Duration = Duration::from_millis(100);

type Scrape = dyn Fn(Format) -> String + Send + Sync;

/// A running endpoint; dropping it stops taking connections (within [`STOP_POLL`]).
pub struct Endpoint {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Where it listens (with the port the kernel chose, for port 0).
    pub address: SocketAddr,
}

impl Endpoint {
    /// Serves `scrape(format)` at `http://ADDR/metrics`; an error names the address (in use, not this
    /// machine's).
    pub fn start(
        address: SocketAddr,
        scrape: impl Fn(Format) -> String + Send + Sync + 'static,
    ) -> Result<Endpoint, String> {
        let refused = |e: io::Error| format!("cannot serve metrics on {address}: {e}");
        let listener = TcpListener::bind(address).map_err(refused)?;
        listener.set_nonblocking(true).map_err(refused)?;
        let address = listener.local_addr().unwrap_or(address);
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let scrape: Arc<Scrape> = Arc::new(scrape);
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || accept_until_stopped(&listener, &stopping, &scrape))
            .map_err(|e| format!("cannot start the metrics thread: {e}"))?;
        Ok(Endpoint { stop, thread: Some(thread), address })
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn accept_until_stopped(listener: &TcpListener, stop: &AtomicBool, scrape: &Arc<Scrape>) {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let timeout = nix::poll::PollTimeout::try_from(STOP_POLL).unwrap_or(nix::poll::PollTimeout::MAX);
    while !stop.load(Ordering::Relaxed) {
        if crate::sys::poll_readable(&[listener.as_raw_fd()], timeout).is_err() {
            std::thread::sleep(STOP_POLL);
        }
        match listener.accept() {
            Ok((stream, _)) => dispatch(stream, &in_flight, scrape),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            // Out of descriptors or memory, or the connection was reset before it was taken: wait and go on.
            Err(_) => std::thread::sleep(STOP_POLL),
        }
    }
}

/// Answers `stream` on a thread of its own, or with 503 when [`MAX_CONNECTIONS`] are being answered.
fn dispatch(stream: TcpStream, in_flight: &Arc<AtomicUsize>, scrape: &Arc<Scrape>) {
    if stream.set_nonblocking(false).is_err() || stream.set_write_timeout(Some(WRITE_TIMEOUT)).is_err() {
        return;
    }
    if in_flight.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
        in_flight.fetch_sub(1, Ordering::AcqRel);
        let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
        let _ = respond(&stream, Status::Busy, None, b"too many connections at once\n", true);
        return;
    }
    let (in_flight, scrape) = (Arc::clone(in_flight), Arc::clone(scrape));
    // With no thread to be had, the closure is dropped: the connection closes unanswered, and the count
    // taken above is given back by nothing, so give it back here.
    let counted = Arc::clone(&in_flight);
    let spawned = std::thread::Builder::new().name("metrics-request".into()).spawn(move || {
        let _ = answer(&stream, &*scrape);
        in_flight.fetch_sub(1, Ordering::AcqRel);
    });
    if spawned.is_err() {
        counted.fetch_sub(1, Ordering::AcqRel);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Ok,
    BadRequest,
    NotFound,
    MethodNotAllowed,
    TooLarge,
    Busy,
}

impl Status {
    fn line(self) -> &'static str {
        match self {
            Status::Ok => "200 OK",
            Status::BadRequest => "400 Bad Request",
            Status::NotFound => "404 Not Found",
            Status::MethodNotAllowed => "405 Method Not Allowed",
            Status::TooLarge => "431 Request Header Fields Too Large",
            Status::Busy => "503 Service Unavailable",
        }
    }
}

/// Reads one request from `stream` and answers it.
fn answer(stream: &TcpStream, scrape: &Scrape) -> io::Result<()> {
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    let Some(head) = read_head(stream)? else {
        return respond(stream, Status::TooLarge, None, b"request too large\n", true);
    };
    let Some(request) = Request::parse(&head) else {
        return respond(stream, Status::BadRequest, None, b"bad request\n", true);
    };
    match route(&request) {
        Route::Metrics { body } => {
            let format = Format::accepted(request.accept.as_deref());
            let text = scrape(format);
            respond(stream, Status::Ok, Some(format.content_type()), text.as_bytes(), body)
        }
        Route::Refused(status, text) => respond(stream, status, None, text.as_bytes(), true),
    }
}

/// The request line and headers, up to the blank line; `None` when they pass [`MAX_REQUEST_HEAD`].
fn read_head(mut stream: &TcpStream) -> io::Result<Option<String>> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(&chunk[..n]);
        if let Some(end) = find_blank_line(&head) {
            head.truncate(end);
            return Ok(Some(String::from_utf8_lossy(&head).into_owned()));
        }
        if head.len() > MAX_REQUEST_HEAD {
            return Ok(None);
        }
    }
}

fn find_blank_line(bytes: &[u8]) -> Option<usize> {
    let crlf = bytes.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = bytes.windows(2).position(|w| w == b"\n\n");
    crlf.into_iter().chain(lf).min()
}

#[derive(Debug, PartialEq, Eq)]
struct Request {
    method: String,
    path: String,
    accept: Option<String>,
}

impl Request {
    fn parse(head: &str) -> Option<Request> {
        let mut lines = head.lines();
        let mut words = lines.next()?.split_whitespace();
        let (method, target) = (words.next()?, words.next()?);
        words.next().filter(|version| version.starts_with("HTTP/"))?;
        let path = target.split('?').next().unwrap_or_default();
        let accept = lines
            .filter_map(|line| line.split_once(':'))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("accept"))
            .map(|(_, value)| value.trim().to_string());
        Some(Request { method: method.to_string(), path: path.to_string(), accept })
    }
}

enum Route {
    /// The exposition; `body` false for HEAD.
    Metrics {
        body: bool,
    },
    Refused(Status, &'static str),
}

fn route(request: &Request) -> Route {
    match (request.path.as_str(), request.method.as_str()) {
        ("/metrics", "GET") => Route::Metrics { body: true },
        ("/metrics", "HEAD") => Route::Metrics { body: false },
        ("/metrics", _) => Route::Refused(Status::MethodNotAllowed, "/metrics takes GET and HEAD\n"),
        _ => Route::Refused(Status::NotFound, "steadytrace serves /metrics\n"),
    }
}

fn respond(
    mut stream: &TcpStream,
    status: Status,
    content_type: Option<&str>,
    body: &[u8],
    send_body: bool,
) -> io::Result<()> {
    let content_type = content_type.unwrap_or("text/plain; charset=utf-8");
    let allow = if status == Status::MethodNotAllowed { "Allow: GET, HEAD\r\n" } else { "" };
    let head = format!(
        "HTTP/1.1 {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n",
        status.line(),
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    if send_body {
        stream.write_all(body)?;
    }
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_parsed_and_routed() {
        let request = Request::parse("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\naccept: text/plain").unwrap();
        assert_eq!(
            request,
            Request { method: "GET".into(), path: "/metrics".into(), accept: Some("text/plain".into()) }
        );
        assert!(matches!(route(&request), Route::Metrics { body: true }));
        let head = Request::parse("HEAD /metrics HTTP/1.0").unwrap();
        assert!(matches!(route(&head), Route::Metrics { body: false }));
        let post = Request::parse("POST /metrics HTTP/1.1").unwrap();
        assert!(matches!(route(&post), Route::Refused(Status::MethodNotAllowed, _)));
        let elsewhere = Request::parse("GET /metrics/ HTTP/1.1").unwrap();
        assert!(matches!(route(&elsewhere), Route::Refused(Status::NotFound, _)));
        assert_eq!(Request::parse("GET /metrics"), None);
        assert_eq!(Request::parse(""), None);
        assert_eq!(find_blank_line(b"GET / HTTP/1.1\r\n\r\nbody"), Some(14));
        assert_eq!(find_blank_line(b"GET / HTTP/1.1\n\n"), Some(14));
    }

    /// Random request heads and `Accept` headers (a fixed-seed xorshift, 200,000 of each, with HTTP words mixed
    /// in): parsing and routing never panic.
    #[test]
    fn random_requests_never_panic() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let words = [
            "GET", "HEAD", " ", "/metrics", "?", "HTTP/1.1", "\r\n", ":", "accept", ";q=", ",", "\u{e9}",
            "\0",
        ];
        for _ in 0..200_000 {
            let mut text = String::new();
            for _ in 0..next() % 12 {
                match next() % 3 {
                    0 => text.push_str(words[(next() % words.len() as u64) as usize]),
                    1 => text.push(char::from_u32((next() % 0x300) as u32).unwrap_or('x')),
                    _ => text.push_str(&(next() % 1000).to_string()),
                }
            }
            if let Some(request) = Request::parse(&text) {
                let _ = route(&request);
            }
            let _ = Format::accepted(Some(&text));
            let _ = find_blank_line(text.as_bytes());
        }
    }
}
