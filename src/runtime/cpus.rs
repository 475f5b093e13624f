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

pub use crate::online_cpus::online;
use crate::online_cpus::{parse_cpu_list, ONLINE};

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

    /// Reads the online CPUs again (after draining pending uevents) and says what changed. A CPU that
    /// went offline and came back between two looks (while this process was stopped, or its thread was
    /// not scheduled) leaves the online mask as it was, but its uevents are still queued on the socket:
    /// such a CPU is reported as having gone offline and come online again.
    pub fn poll(&mut self) -> io::Result<Change> {
        let mut bounced = BTreeSet::new();
        if let Some(fd) = &self.uevents {
            let mut buffer = [0u8; 8192];
            while let Ok(n) = socket::recv(fd.as_raw_fd(), &mut buffer, socket::MsgFlags::MSG_DONTWAIT) {
                if n == 0 {
                    break;
                }
                if let Some(cpu) = offline_cpu(&buffer[..n]) {
                    bounced.insert(cpu);
                }
            }
        }
        let now = self.read()?;
        let mut change = Change {
            went_offline: self.online.difference(&now).copied().collect(),
            came_online: now.difference(&self.online).copied().collect(),
        };
        for cpu in bounced {
            if self.online.contains(&cpu) && now.contains(&cpu) {
                change.went_offline.push(cpu);
                change.came_online.push(cpu);
            }
        }
        self.online = now;
        Ok(change)
    }
}

/// The CPU of an `offline@/devices/system/cpu/cpuN` uevent (its header, up to the first NUL).
fn offline_cpu(message: &[u8]) -> Option<u32> {
    let header = message.split(|&b| b == 0).next()?;
    let cpu = header.strip_prefix(b"offline@/devices/system/cpu/cpu")?;
    std::str::from_utf8(cpu).ok()?.parse().ok()
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

    #[test]
    fn reads_the_cpu_of_offline_uevents_only() {
        assert_eq!(offline_cpu(b"offline@/devices/system/cpu/cpu1\0ACTION=offline\0"), Some(1));
        assert_eq!(offline_cpu(b"offline@/devices/system/cpu/cpu12"), Some(12));
        assert_eq!(offline_cpu(b"online@/devices/system/cpu/cpu1\0ACTION=online"), None);
        assert_eq!(offline_cpu(b"offline@/devices/system/memory/memory3\0"), None);
    }
}
