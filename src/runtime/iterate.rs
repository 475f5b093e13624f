//! The iterator thread: reads each `iter:` probe's iterator once, which makes the kernel run the probe's
//! program over every object meanwhile, while the event loop prints what it sends. When the iteration ends,
//! the thread closes its end of a socket, which wakes the event loop: tracing ends then.

use bpf::Program;
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::thread::JoinHandle;

pub struct Iteration {
    /// Readable (at its end of file) once the thread is done.
    done: UnixStream,
    thread: JoinHandle<Result<(), String>>,
}

impl Iteration {
    /// Starts reading the iterators of `programs` (by probe name), one after the other.
    pub fn start(programs: Vec<(String, Arc<Program>)>) -> io::Result<Iteration> {
        let (done, finished) = UnixStream::pair()?;
        let thread = std::thread::Builder::new().name("steadytrace-iter".into()).spawn(move || {
            let _finished = finished;
            for (name, program) in programs {
                bpf::iter::run(program.as_fd()).map_err(|e| format!("cannot run `{name}`: {e}"))?;
            }
            Ok(())
        })?;
        Ok(Iteration { done, thread })
    }

    /// What the event loop waits on: readable once the iteration has ended.
    pub fn done_fd(&self) -> RawFd {
        self.done.as_raw_fd()
    }

    /// Waits for the thread; what went wrong, if anything.
    pub fn finish(self) -> Result<(), String> {
        drop(self.done);
        self.thread.join().unwrap_or_else(|_| Err("the iterator thread failed".into()))
    }
}
