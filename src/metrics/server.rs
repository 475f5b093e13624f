//! The HTTP endpoint of `--metrics ADDR`: `GET /metrics` (and `HEAD`) answers with the exposition a scrape
//! function makes, in the format the request's `Accept` header asks for; with `--metrics-web-config`, over TLS
//! and to the users it names only.
//!
//! A small HTTP/1.1 server on std's `TcpListener`, one request per connection. tiny_http was tried first
//! and failed hostile testing: no timeouts (four clients that never read their answer locked every other
//! scrape out), no limit on a request's size (a 400 MiB header line grew the tracer by 300 MB), and a panic in
//! its accept thread when the process ran out of descriptors, after which the port stayed dead. Here:
//! - connections are taken on a thread of the endpoint's own, so a scrape never holds up the event reader;
//! - each is answered on a thread of its own, at most [`MAX_CONNECTIONS`] at once (more get 503 at once, or
//!   are closed when TLS is on), with [`READ_TIMEOUT`] for the TLS handshake and the request together (a
//!   client that stops half way through either loses its slot then) and [`WRITE_TIMEOUT`] for each write;
//! - a request head longer than [`MAX_REQUEST_HEAD`] gets 431; a failed accept (no descriptors left) is waited
//!   out, never fatal;
//! - every refusal is counted by its reason ([`Refusal`]), for `steadytrace_metrics_requests_refused_total`.

use super::health::EndpointCounts;
use super::web_config::WebConfig;
use super::Format;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Connections served at once; Prometheus scrapes once per interval.
pub const MAX_CONNECTIONS: usize = 16;
/// How long a client has for the TLS handshake and to send its request.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client has to take each part of the answer.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest request line and headers taken.
pub const MAX_REQUEST_HEAD: usize = 16 * 1024;
/// How often the accepting thread looks whether it is to stop.
const STOP_POLL: Duration = Duration::from_millis(100);

type Scrape = dyn Fn(Format, EndpointCounts) -> String + Send + Sync;

/// Why a request got no exposition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No credentials, or wrong ones (401).
    Unauthorized,
    /// The TLS handshake failed: no client certificate where one is required, one nobody trusted, no common
    /// version or cipher suite.
    TlsHandshake,
    /// Plain HTTP sent to the TLS port (400).
    PlainHttp,
    /// [`MAX_CONNECTIONS`] were being answered (503).
    TooManyConnections,
    /// The handshake and request were not done within [`READ_TIMEOUT`].
    Timeout,
    /// The request head passed [`MAX_REQUEST_HEAD`] (431).
    RequestTooLarge,
    /// Not HTTP, or the connection closed half way (400).
    BadRequest,
    /// Another path (404) or method (405).
    NotFound,
    MethodNotAllowed,
}

impl Refusal {
    pub const ALL: [Refusal; 9] = [
        Refusal::Unauthorized,
        Refusal::TlsHandshake,
        Refusal::PlainHttp,
        Refusal::TooManyConnections,
        Refusal::Timeout,
        Refusal::RequestTooLarge,
        Refusal::BadRequest,
        Refusal::NotFound,
        Refusal::MethodNotAllowed,
    ];

    /// The `reason` label.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::Unauthorized => "unauthorized",
            Refusal::TlsHandshake => "tls_handshake",
            Refusal::PlainHttp => "plain_http",
            Refusal::TooManyConnections => "too_many_connections",
            Refusal::Timeout => "timeout",
            Refusal::RequestTooLarge => "request_too_large",
            Refusal::BadRequest => "bad_request",
            Refusal::NotFound => "not_found",
            Refusal::MethodNotAllowed => "method_not_allowed",
        }
    }
}

/// Scrapes served and requests refused, since start.
#[derive(Default)]
struct Counters {
    served: AtomicU64,
    refused: [AtomicU64; Refusal::ALL.len()],
}

impl Counters {
    fn refuse(&self, why: Refusal) {
        self.refused[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> EndpointCounts {
        EndpointCounts {
            served: self.served.load(Ordering::Relaxed),
            refused: Refusal::ALL
                .iter()
                .map(|r| (r.name(), self.refused[*r as usize].load(Ordering::Relaxed)))
                .collect(),
        }
    }
}

/// What every connection's thread shares.
struct Shared {
    scrape: Box<Scrape>,
    web: Arc<WebConfig>,
    counters: Counters,
    in_flight: AtomicUsize,
}

/// A running endpoint; dropping it stops taking connections (within [`STOP_POLL`]).
pub struct Endpoint {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Where it listens (with the port the kernel chose, for port 0).
    pub address: SocketAddr,
}

impl Endpoint {
    /// Serves `scrape(format, counts)` at `/metrics` as `web` says (plain HTTP with [`WebConfig::open`]); an
    /// error names the address (in use, not this machine's).
    pub fn start(
        address: SocketAddr,
        web: Arc<WebConfig>,
        scrape: impl Fn(Format, EndpointCounts) -> String + Send + Sync + 'static,
    ) -> Result<Endpoint, String> {
        let refused = |e: io::Error| format!("cannot serve metrics on {address}: {e}");
        let listener = TcpListener::bind(address).map_err(refused)?;
        listener.set_nonblocking(true).map_err(refused)?;
        let address = listener.local_addr().unwrap_or(address);
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let shared = Arc::new(Shared {
            scrape: Box::new(scrape),
            web,
            counters: Counters::default(),
            in_flight: AtomicUsize::new(0),
        });
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || accept_until_stopped(&listener, &stopping, &shared))
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

fn accept_until_stopped(listener: &TcpListener, stop: &AtomicBool, shared: &Arc<Shared>) {
    let timeout = nix::poll::PollTimeout::try_from(STOP_POLL).unwrap_or(nix::poll::PollTimeout::MAX);
    while !stop.load(Ordering::Relaxed) {
        if crate::sys::poll_readable(&[listener.as_raw_fd()], timeout).is_err() {
            std::thread::sleep(STOP_POLL);
        }
        match listener.accept() {
            Ok((stream, _)) => dispatch(stream, shared),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            // Out of descriptors or memory, or the connection was reset before it was taken: wait and go on.
            Err(_) => std::thread::sleep(STOP_POLL),
        }
    }
}

/// Answers `stream` on a thread of its own, or refuses it when [`MAX_CONNECTIONS`] are being answered.
fn dispatch(stream: TcpStream, shared: &Arc<Shared>) {
    if stream.set_nonblocking(false).is_err() || stream.set_write_timeout(Some(WRITE_TIMEOUT)).is_err() {
        return;
    }
    if shared.in_flight.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
        shared.in_flight.fetch_sub(1, Ordering::AcqRel);
        shared.counters.refuse(Refusal::TooManyConnections);
        // A TLS client would read a plain answer as a broken handshake: it is only closed.
        if shared.web.tls.is_none() {
            let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
            let busy = Answer::text(Status::Busy, "too many connections at once\n");
            let _ = busy.write(&mut &stream, &shared.web.headers);
        }
        return;
    }
    let connection = Arc::clone(shared);
    // With no thread to be had, the closure is dropped: the connection closes unanswered, and the count
    // taken above is given back by nothing, so give it back here.
    let spawned = std::thread::Builder::new().name("metrics-request".into()).spawn(move || {
        serve_connection(&stream, &connection);
        connection.in_flight.fetch_sub(1, Ordering::AcqRel);
    });
    if spawned.is_err() {
        shared.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection's reads, which must all be done by `deadline`; writes go straight through (each has
/// [`WRITE_TIMEOUT`]).
struct Deadlined<'a> {
    tcp: &'a TcpStream,
    deadline: Instant,
}

impl Read for Deadlined<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.tcp.set_read_timeout(Some(left))?;
        let mut tcp = self.tcp;
        tcp.read(buf)
    }
}

impl Write for Deadlined<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut tcp = self.tcp;
        tcp.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        let mut tcp = self.tcp;
        tcp.flush()
    }
}

fn timed_out(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// One connection: the TLS handshake when TLS is on, then one request and its answer.
fn serve_connection(tcp: &TcpStream, shared: &Shared) {
    let mut io = Deadlined { tcp, deadline: Instant::now() + READ_TIMEOUT };
    let Some(config) = &shared.web.tls else {
        serve_request(&mut io, shared);
        return;
    };
    match first_byte(&io) {
        Ok(Some(0x16)) => {}
        // A TLS connection starts with a handshake record; anything else is most likely plain HTTP.
        Ok(Some(_)) => {
            shared.counters.refuse(Refusal::PlainHttp);
            let _ = read_head(&mut io);
            let answer =
                Answer::text(Status::BadRequest, "Client sent an HTTP request to an HTTPS server.\n");
            let _ = answer.write(&mut io, &[]);
            return;
        }
        Ok(None) => return,
        Err(e) => {
            shared.counters.refuse(if timed_out(&e) { Refusal::Timeout } else { Refusal::BadRequest });
            return;
        }
    }
    let Ok(mut connection) = rustls::ServerConnection::new(Arc::clone(config)) else { return };
    while connection.is_handshaking() {
        if let Err(e) = connection.complete_io(&mut io) {
            shared.counters.refuse(if timed_out(&e) { Refusal::Timeout } else { Refusal::TlsHandshake });
            return;
        }
    }
    serve_request(&mut rustls::Stream::new(&mut connection, &mut io), shared);
    connection.send_close_notify();
    let _ = connection.complete_io(&mut io);
}

/// The connection's first byte, left to be read again; `None` when it closed before sending any.
fn first_byte(io: &Deadlined<'_>) -> io::Result<Option<u8>> {
    let left = io.deadline.saturating_duration_since(Instant::now());
    io.tcp.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
    let mut byte = [0u8; 1];
    Ok(match io.tcp.peek(&mut byte)? {
        0 => None,
        _ => Some(byte[0]),
    })
}

/// Reads one request from `stream` and answers it.
fn serve_request(stream: &mut (impl Read + Write), shared: &Shared) {
    let answer = match answer(stream, shared) {
        Ok(answer) => answer,
        Err(refusal) => {
            shared.counters.refuse(refusal);
            match refusal {
                Refusal::Timeout => return,
                Refusal::RequestTooLarge => Answer::text(Status::TooLarge, "request too large\n"),
                Refusal::Unauthorized => Answer::text(Status::Unauthorized, "Unauthorized\n"),
                Refusal::NotFound => Answer::text(Status::NotFound, "steadytrace serves /metrics\n"),
                Refusal::MethodNotAllowed => {
                    Answer::text(Status::MethodNotAllowed, "/metrics takes GET and HEAD\n")
                }
                _ => Answer::text(Status::BadRequest, "bad request\n"),
            }
        }
    };
    let _ = answer.write(stream, &shared.web.headers);
}

fn answer(stream: &mut impl Read, shared: &Shared) -> Result<Answer, Refusal> {
    let head = match read_head(stream) {
        Ok(Some(head)) => head,
        Ok(None) => return Err(Refusal::RequestTooLarge),
        Err(e) if timed_out(&e) => return Err(Refusal::Timeout),
        Err(_) => return Err(Refusal::BadRequest),
    };
    let request = Request::parse(&head).ok_or(Refusal::BadRequest)?;
    // As the exporter-toolkit does, credentials are asked for before anything else is said.
    if !shared.web.users.is_empty() && !shared.web.users.admit(request.authorization.as_deref()) {
        return Err(Refusal::Unauthorized);
    }
    let body = route(&request)?;
    shared.counters.served.fetch_add(1, Ordering::Relaxed);
    let format = Format::accepted(request.accept.as_deref());
    let text = (shared.scrape)(format, shared.counters.snapshot());
    Ok(Answer {
        status: Status::Ok,
        content_type: format.content_type(),
        body: text.into_bytes(),
        send_body: body,
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Ok,
    BadRequest,
    Unauthorized,
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
            Status::Unauthorized => "401 Unauthorized",
            Status::NotFound => "404 Not Found",
            Status::MethodNotAllowed => "405 Method Not Allowed",
            Status::TooLarge => "431 Request Header Fields Too Large",
            Status::Busy => "503 Service Unavailable",
        }
    }
}

/// The request line and headers, up to the blank line; `None` when they pass [`MAX_REQUEST_HEAD`].
fn read_head(stream: &mut impl Read) -> io::Result<Option<String>> {
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
    authorization: Option<String>,
}

impl Request {
    fn parse(head: &str) -> Option<Request> {
        let mut lines = head.lines();
        let mut words = lines.next()?.split_whitespace();
        let (method, target) = (words.next()?, words.next()?);
        words.next().filter(|version| version.starts_with("HTTP/"))?;
        let path = target.split('?').next().unwrap_or_default();
        let headers: Vec<(&str, &str)> = lines.filter_map(|line| line.split_once(':')).collect();
        let header = |wanted: &str| {
            headers
                .iter()
                .find(|(name, _)| name.trim().eq_ignore_ascii_case(wanted))
                .map(|(_, value)| value.trim().to_string())
        };
        Some(Request {
            method: method.to_string(),
            path: path.to_string(),
            accept: header("accept"),
            authorization: header("authorization"),
        })
    }
}

/// Whether the request is for the exposition, and with its body (false for HEAD).
fn route(request: &Request) -> Result<bool, Refusal> {
    match (request.path.as_str(), request.method.as_str()) {
        ("/metrics", "GET") => Ok(true),
        ("/metrics", "HEAD") => Ok(false),
        ("/metrics", _) => Err(Refusal::MethodNotAllowed),
        _ => Err(Refusal::NotFound),
    }
}

struct Answer {
    status: Status,
    content_type: &'static str,
    body: Vec<u8>,
    send_body: bool,
}

impl Answer {
    fn text(status: Status, text: &str) -> Answer {
        Answer {
            status,
            content_type: "text/plain; charset=utf-8",
            body: text.as_bytes().to_vec(),
            send_body: true,
        }
    }

    /// The answer, with the web configuration's extra `headers`.
    fn write(&self, stream: &mut impl Write, headers: &[(String, String)]) -> io::Result<()> {
        let mut head = format!(
            "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
            self.status.line(),
            self.content_type,
            self.body.len()
        );
        match self.status {
            Status::MethodNotAllowed => head.push_str("Allow: GET, HEAD\r\n"),
            Status::Unauthorized => head.push_str("WWW-Authenticate: Basic\r\n"),
            _ => {}
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("Connection: close\r\n\r\n");
        stream.write_all(head.as_bytes())?;
        if self.send_body {
            stream.write_all(&self.body)?;
        }
        stream.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_parsed_and_routed() {
        let request = Request::parse("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\naccept: text/plain").unwrap();
        assert_eq!(
            request,
            Request {
                method: "GET".into(),
                path: "/metrics".into(),
                accept: Some("text/plain".into()),
                authorization: None
            }
        );
        assert_eq!(route(&request), Ok(true));
        let head = Request::parse("HEAD /metrics HTTP/1.0\r\nAuthorization: Basic eDp5").unwrap();
        assert_eq!((route(&head), head.authorization.as_deref()), (Ok(false), Some("Basic eDp5")));
        let post = Request::parse("POST /metrics HTTP/1.1").unwrap();
        assert_eq!(route(&post), Err(Refusal::MethodNotAllowed));
        let elsewhere = Request::parse("GET /metrics/ HTTP/1.1").unwrap();
        assert_eq!(route(&elsewhere), Err(Refusal::NotFound));
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
