//! The event loop's parts: the sink that prints records, and the pipe that turns signals into
//! something `poll` can wait on together with the ring buffer.

use super::{system, Failure};
use crate::codegen::Compiled;
use crate::output::{decode, Event};
use bpf::ringbuf::RingBufReader;
use std::cell::RefCell;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd};

/// Where records go: printed until `exit()` is seen; after it, only END's output is printed.
pub struct Sink<'a> {
    pub out: &'a mut dyn Write,
    pub exit_code: Option<i64>,
    pub in_end: bool,
    error: Option<io::Error>,
}

impl<'a> Sink<'a> {
    pub fn new(out: &'a mut dyn Write) -> Sink<'a> {
        Sink { out, exit_code: None, in_end: false, error: None }
    }

    pub fn record(&mut self, compiled: &Compiled, data: &[u8]) {
        if self.exit_code.is_some() && !self.in_end {
            return;
        }
        match decode(&compiled.records, data) {
            Some(Event::Print(text)) => {
                if let Err(e) = self.out.write_all(&text) {
                    self.error.get_or_insert(e);
                }
            }
            Some(Event::Exit(code)) => {
                self.exit_code.get_or_insert(code);
            }
            None => {}
        }
    }
}

/// Hands every record waiting in the ring buffer to the sink, then flushes the output.
pub fn drain(reader: &RingBufReader<'_>, sink: &RefCell<Sink<'_>>) -> Result<(), Failure> {
    reader.drain().map_err(|e| system("reading the ring buffer failed", e))?;
    let mut sink = sink.borrow_mut();
    let flushed = sink.out.flush();
    match sink.error.take().map_or(flushed, Err) {
        // A closed pipe (`steadytrace ... | head`) ends tracing quietly, like any filter.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
            sink.exit_code.get_or_insert(0);
            Ok(())
        }
        Err(e) => Err(system("cannot write the output", e)),
        Ok(()) => Ok(()),
    }
}

/// SIGINT and SIGTERM, turned into a readable pipe.
pub struct SignalPipe {
    read: OwnedFd,
    _ids: Vec<signal_hook::SigId>,
}

impl SignalPipe {
    pub fn new() -> io::Result<SignalPipe> {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)?;
        let write = std::os::unix::net::UnixStream::from(write);
        let mut ids = vec![];
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            ids.push(signal_hook::low_level::pipe::register(signal, write.try_clone()?)?);
        }
        Ok(SignalPipe { read, _ids: ids })
    }

    /// Waits for records or a signal; `true` when a signal asks to stop.
    pub fn wait(&self, reader: &RingBufReader<'_>) -> io::Result<bool> {
        let mut fds = [
            libc::pollfd { fd: reader.wait_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: self.read.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: fds is a valid array of pollfd for the duration of the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n < 0 {
            let error = io::Error::last_os_error();
            return if error.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(error) };
        }
        Ok(fds[1].revents != 0)
    }
}
