//! Which CPUs are online, and when that changes: a kept-open `/sys/devices/system/cpu/online` read
//! with `pread` (under a microsecond, so it can be polled every few milliseconds), woken at once by
//! the kernel's `online@`/`offline@` uevents where they arrive (not in non-initial user namespaces,
//! such as rootless containers: there the periodic read still notices within one poll period).

use std::collections::BTreeSet;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;

use nix::sys::socket;

const ONLINE: &str = "/sys/devices/system/cpu/online";

/// Parses a kernel CPU list such as `0-3,8`.
pub fn parse_cpu_list(text: &str) -> BTreeSet<u32> {
    let mut cpus = BTreeSet::new();
    for range in text.trim().split(',').filter(|r| !r.is_empty()) {
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        if let (Ok(first), Ok(last)) = (first.parse::<u32>(), last.parse::<u32>()) {
            cpus.extend(first..=last);
        }
    }
    cpus
}

/// The CPUs online now.
pub fn online() -> io::Result<BTreeSet<u32>> {
    Ok(parse_cpu_list(&std::fs::read_to_string(ONLINE)?))
}

/// What changed since the last look.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Change {
    pub went_offline: Vec<u32>,
    pub came_online: Vec<u32>,
}

pub struct CpuWatcher {
    file: File,
    uevents: Option<OwnedFd>,
    online: BTreeSet<u32>,
}

impl CpuWatcher {
    pub fn new() -> io::Result<CpuWatcher> {
        let file = File::open(ONLINE)?;
        let mut watcher = CpuWatcher { file, uevents: uevent_socket().ok(), online: BTreeSet::new() };
        watcher.online = watcher.read()?;
        Ok(watcher)
    }

    pub fn online(&self) -> &BTreeSet<u32> {
        &self.online
    }

    /// A descriptor that becomes readable when the kernel announces a device change, if available.
    pub fn wake_fd(&self) -> Option<RawFd> {
        self.uevents.as_ref().map(|fd| fd.as_raw_fd())
    }

    fn read(&self) -> io::Result<BTreeSet<u32>> {
        let mut buffer = [0u8; 4096];
        let n = self.file.read_at(&mut buffer, 0)?;
        Ok(parse_cpu_list(&String::from_utf8_lossy(&buffer[..n])))
    }

    /// Reads the online CPUs again (after draining pending uevents) and says what changed.
    pub fn poll(&mut self) -> io::Result<Change> {
        if let Some(fd) = &self.uevents {
            let mut buffer = [0u8; 8192];
            while socket::recv(fd.as_raw_fd(), &mut buffer, socket::MsgFlags::MSG_DONTWAIT)
                .is_ok_and(|n| n > 0)
            {}
        }
        let now = self.read()?;
        let change = Change {
            went_offline: self.online.difference(&now).copied().collect(),
            came_online: now.difference(&self.online).copied().collect(),
        };
        self.online = now;
        Ok(change)
    }
}

/// A socket receiving the kernel's uevents (the kobject broadcast group).
fn uevent_socket() -> nix::Result<OwnedFd> {
    let fd = socket::socket(
        socket::AddressFamily::Netlink,
        socket::SockType::Datagram,
        socket::SockFlag::SOCK_NONBLOCK | socket::SockFlag::SOCK_CLOEXEC,
        socket::SockProtocol::NetlinkKObjectUEvent,
    )?;
    socket::bind(fd.as_raw_fd(), &socket::NetlinkAddr::new(0, 1))?;
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kernel_cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8\n").into_iter().collect::<Vec<_>>(), [0, 1, 2, 3, 8]);
        assert_eq!(parse_cpu_list("0").len(), 1);
        assert!(parse_cpu_list("\n").is_empty());
    }
}
