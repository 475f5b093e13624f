//! The HTTP endpoint of `--metrics ADDR`: `GET /metrics` answers with the exposition a scrape function
//! makes, in the format the request's `Accept` header asks for, on a thread of its own, so that a scrape
//! never holds up the event reader. tiny_http does the HTTP: small, synchronous, no runtime to start.

use super::Format;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

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
        scrape: impl Fn(Format) -> String + Send + 'static,
    ) -> Result<Endpoint, String> {
        let server = tiny_http::Server::http(address)
            .map_err(|e| format!("cannot serve metrics on {address}: {e}"))?;
        let address = server.server_addr().to_ip().unwrap_or(address);
        let server = Arc::new(server);
        let serving = Arc::clone(&server);
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                for request in serving.incoming_requests() {
                    let response = match (request.method(), request.url().split('?').next()) {
                        (tiny_http::Method::Get, Some("/metrics")) => {
                            let accept = request
                                .headers()
                                .iter()
                                .find(|h| h.field.equiv("Accept"))
                                .map(|h| h.value.as_str().to_string());
                            let format = Format::accepted(accept.as_deref());
                            let header = tiny_http::Header::from_bytes("Content-Type", format.content_type())
                                .expect("a valid header");
                            tiny_http::Response::from_string(scrape(format)).with_header(header)
                        }
                        _ => tiny_http::Response::from_string("steadytrace serves /metrics\n")
                            .with_status_code(404),
                    };
                    let _ = request.respond(response);
                }
            })
            .map_err(|e| format!("cannot start the metrics thread: {e}"))?;
        Ok(Endpoint { server, thread: Some(thread), address })
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
