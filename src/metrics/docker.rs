//! A container's name from Docker's Engine API, over its Unix socket: `GET /containers/{id}/json`, its `.Name`
//! without the leading `/`. One request per lookup, HTTP/1.0 (so the answer is not chunked and ends when the
//! connection does), within a deadline: a Docker that hangs costs a scrape that long, no more.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// Where Docker's daemon listens.
pub const SOCKET: &str = "/var/run/docker.sock";

/// The most an answer may be: an inspected container is a few KiB.
const MOST: u64 = 1 << 20;

/// The daemon could not be asked: no socket (or not ours to open), or no whole answer within the deadline.
#[derive(Debug, PartialEq, Eq)]
pub struct Unreachable;

/// The name of the container `id` as the daemon at `socket` gives it within `deadline`; `Ok(None)` when the
/// daemon answers but gives no name (it does not know the container).
pub fn container_name(socket: &Path, id: &str, deadline: Duration) -> Result<Option<String>, Unreachable> {
    if !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(None);
    }
    let started = Instant::now();
    let left = || deadline.checked_sub(started.elapsed()).filter(|d| !d.is_zero()).ok_or(Unreachable);
    let mut stream = UnixStream::connect(socket).map_err(|_| Unreachable)?;
    stream.set_write_timeout(Some(left()?)).map_err(|_| Unreachable)?;
    let request = format!("GET /containers/{id}/json HTTP/1.0\r\nHost: docker\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(|_| Unreachable)?;
    let mut answer = vec![];
    let mut buf = [0u8; 8192];
    loop {
        stream.set_read_timeout(Some(left()?)).map_err(|_| Unreachable)?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) if (answer.len() + n) as u64 <= MOST => answer.extend_from_slice(&buf[..n]),
            _ => return Err(Unreachable),
        }
    }
    Ok(name_in_answer(&answer))
}

/// `.Name` of a `200` answer's JSON body, without its leading `/`.
fn name_in_answer(answer: &[u8]) -> Option<String> {
    let head_end = answer.windows(4).position(|w| w == b"\r\n\r\n")?;
    let status = std::str::from_utf8(&answer[..head_end]).ok()?.split(' ').nth(1)?;
    if status != "200" {
        return None;
    }
    let body: serde_json::Value = serde_json::from_slice(&answer[head_end + 4..]).ok()?;
    let name = body.get("Name")?.as_str()?;
    let name = name.strip_prefix('/').unwrap_or(name);
    (!name.is_empty()).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn the_name_is_the_top_level_one() {
        let body = r#"{"Id":"ab","HostConfig":{"RestartPolicy":{"Name":"no"}},"Name":"/web-1"}"#;
        let answer = format!("HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{body}");
        assert_eq!(name_in_answer(answer.as_bytes()).as_deref(), Some("web-1"));
        let missing = "HTTP/1.0 404 Not Found\r\n\r\n{\"message\":\"No such container: ab\"}";
        assert_eq!(name_in_answer(missing.as_bytes()), None);
        assert_eq!(name_in_answer(b"garbage"), None);
        assert_eq!(name_in_answer(b"HTTP/1.0 200 OK\r\n\r\n{\"Name\":7}"), None);
    }

    #[test]
    fn a_daemon_that_never_answers_costs_the_deadline_only() {
        let dir = std::env::temp_dir().join(format!("steadytrace-docker-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let socket = dir.join("hung.sock");
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket).unwrap();
        let held = std::thread::spawn(move || {
            let connection = listener.accept();
            std::thread::sleep(Duration::from_secs(2));
            drop(connection);
        });
        let started = Instant::now();
        assert_eq!(container_name(&socket, "ab", Duration::from_millis(200)), Err(Unreachable));
        assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
        assert_eq!(
            container_name(&dir.join("absent.sock"), "ab", Duration::from_millis(200)),
            Err(Unreachable)
        );
        drop(held);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
