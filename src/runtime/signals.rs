//! The pipe that turns signals into something `poll` can wait on together with the ring buffer: SIGINT and
//! SIGTERM end tracing, SIGUSR1 runs `self:signal:SIGUSR1` probes.

use super::reader::Ring;
use nix::poll::PollTimeout;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// SIGINT and SIGTERM, turned into a readable pipe; SIGUSR1 into another (it runs `self:signal:SIGUSR1`
/// probes, and no longer ends the process).
pub struct SignalPipe {
    read: OwnedFd,
    usr1: OwnedFd,
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
        let (usr1, usr1_write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)?;
        let usr1_write = std::os::unix::net::UnixStream::from(usr1_write);
        ids.push(signal_hook::low_level::pipe::register(signal_hook::consts::SIGUSR1, usr1_write)?);
        Ok(SignalPipe { read, usr1, _ids: ids })
    }

    /// Becomes readable when SIGUSR1 arrives.
    pub fn usr1_fd(&self) -> RawFd {
        self.usr1.as_raw_fd()
    }

    /// Whether SIGUSR1 came since the last call (however many times).
    pub fn take_usr1(&self) -> bool {
        let mut byte = [0u8; 64];
        let mut came = false;
        while nix::unistd::read(self.usr1.as_raw_fd(), &mut byte).is_ok_and(|n| n > 0) {
            came = true;
        }
        came
    }

    /// Whether SIGINT or SIGTERM came, without waiting (the signal stays pending for `wait`).
    pub fn arrived(&self) -> bool {
        crate::sys::poll_readable(&[self.read.as_raw_fd()], PollTimeout::ZERO).is_ok_and(|r| r[0])
    }

    /// Waits for records, a signal, one of `also` becoming readable, or `timeout`.
    pub fn wait(&self, ring: &impl Ring, also: &[RawFd], timeout: Option<Duration>) -> io::Result<Wake> {
        let mut fds = vec![ring.wait_fd(), self.read.as_raw_fd()];
        fds.extend_from_slice(also);
        let timeout =
            timeout.map_or(PollTimeout::NONE, |t| PollTimeout::try_from(t).unwrap_or(PollTimeout::MAX));
        let readable = crate::sys::poll_readable(&fds, timeout)?;
        Ok(Wake { signal: readable[1], also: readable[2..].to_vec() })
    }
}

/// What ended a wait.
#[derive(Debug, Default)]
pub struct Wake {
    /// SIGINT or SIGTERM: stop.
    pub signal: bool,
    /// Which of the extra descriptors became readable, in order.
    pub also: Vec<bool>,
}

impl Wake {
    pub fn also(&self, index: usize) -> bool {
        self.also.get(index).copied().unwrap_or(false)
    }
}
