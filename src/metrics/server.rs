//! The HTTP endpoint of `--metrics ADDR`: `GET /metrics` answers with the exposition a scrape function
//! makes, in the format the request's `Accept` header asks for. Requests are taken on a thread of the
//! endpoint's own, so that a scrape never holds up the event reader, and each is answered on a thread of its
//! own, so that a client that stops reading holds up neither the other scrapes nor the tracer's exit. tiny_http
//! does the HTTP: small, synchronous, no runtime to start.

use super::Format;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Scrapes answered at once; more are refused with 503 (Prometheus scrapes once per interval).
const MAX_SCRAPES_AT_ONCE: usize = 4;

/// A running endpoint; dropping it stops the thread.
pub struct Endpoint {
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
    pub address: SocketAddr,
}

impl Endpoint {
    /// Serves `scrape(format)` at `http://ADDR/metrics`; an error names the address (in use, not this
    /// machine's).
    pub fn start(
        address: SocketAddr,
        scrape: impl Fn(Format) -> String + Send + Sync + 'static,
    ) -> Result<Endpoint, String> {
        let server = tiny_http::Server::http(address)
            .map_err(|e| format!("cannot serve metrics on {address}: {e}"))?;
        let address = server.server_addr().to_ip().unwrap_or(address);
        let server = Arc::new(server);
        let serving = Arc::clone(&server);
        let scrape = Arc::new(scrape);
        let in_flight = Arc::new(AtomicUsize::new(0));
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                for request in serving.incoming_requests() {
                    if in_flight.fetch_add(1, Ordering::AcqRel) >= MAX_SCRAPES_AT_ONCE {
                        in_flight.fetch_sub(1, Ordering::AcqRel);
                        let busy = tiny_http::Response::from_string("too many scrapes at once\n");
                        let _ = request.respond(busy.with_status_code(503));
                        continue;
                    }
                    let (scrape, done) = (Arc::clone(&scrape), Arc::clone(&in_flight));
                    let answering =
                        std::thread::Builder::new().name("metrics-scrape".into()).spawn(move || {
                            answer(request, &*scrape);
                            done.fetch_sub(1, Ordering::AcqRel);
                        });
                    if answering.is_err() {
                        // No thread to be had: the request is dropped (the client sees the connection close).
                        in_flight.fetch_sub(1, Ordering::AcqRel);
                    }
                }
            })
            .map_err(|e| format!("cannot start the metrics thread: {e}"))?;
        Ok(Endpoint { server, thread: Some(thread), address })
    }
}

/// Answers one request: the exposition at `/metrics`, 404 elsewhere.
fn answer(request: tiny_http::Request, scrape: &dyn Fn(Format) -> String) {
    let response = match (request.method(), request.url().split('?').next()) {
        (tiny_http::Method::Get, Some("/metrics")) => {
            let accept = request
                .headers()
                .iter()
                .find(|h| h.field.equiv("Accept"))
                .map(|h| h.value.as_str().to_string());
            let format = Format::accepted(accept.as_deref());
            let header =
                tiny_http::Header::from_bytes("Content-Type", format.content_type()).expect("a valid header");
            tiny_http::Response::from_string(scrape(format)).with_header(header)
        }
        _ => tiny_http::Response::from_string("steadytrace serves /metrics\n").with_status_code(404),
    };
    let _ = request.respond(response);
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
