//! A per-CPU perf event and its mmap'd ring of records, read as `perf_event_mmap_page`'s protocol says:
//! records lie between `data_tail` (ours to advance) and `data_head` (the kernel's), read with acquire and
//! written with release ordering; a record may wrap around the end of the data area.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;

/// A perf event of every process on one CPU, with its ring mapped.
pub struct PerfRing {
    fd: OwnedFd,
    cpu: u32,
    ring: *mut u8,
    ring_len: usize,
    data_len: usize,
    page: usize,
}

// SAFETY: the mapping is owned by this value alone; it is read and written only through `&mut self`.
unsafe impl Send for PerfRing {}

impl PerfRing {
    /// Opens the event `attr` (made disabled) of every process on `cpu`, maps a ring of `pages` data pages
    /// (rounded up to a power of two) and enables it.
    pub fn open(attr: &libbpf_sys::perf_event_attr, cpu: u32, pages: usize) -> io::Result<PerfRing> {
        // SAFETY: attr is a valid, fully initialised perf_event_attr of the size it declares.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                attr as *const _,
                -1,
                cpu as i32,
                -1,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a non-negative return is a new file descriptor that we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let data_len = page * pages.next_power_of_two();
        let ring_len = page + data_len;
        // SAFETY: a shared, readable and writable mapping of the event's ring, of the size perf requires
        // (one header page and a power of two of data pages); checked for failure below.
        let ring = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ring == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let events = PerfRing { fd, cpu, ring: ring.cast(), ring_len, data_len, page };
        // SAFETY: plain ioctl on the event's own descriptor.
        if unsafe { libc::ioctl(events.fd.as_raw_fd(), PERF_EVENT_IOC_ENABLE as _, 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(events)
    }

    pub fn cpu(&self) -> u32 {
        self.cpu
    }

    /// Nanoseconds the event has been enabled (its `read_format` must be `PERF_FORMAT_TOTAL_TIME_ENABLED`):
    /// it stops growing when the event's CPU goes offline, and does not grow again when the CPU returns (the
    /// kernel does not bring such events back).
    pub fn enabled_time(&self) -> io::Result<u64> {
        let mut read = [0u64; 2];
        // SAFETY: reads at most 16 bytes into a 16-byte buffer from the event's own descriptor.
        let got = unsafe { libc::read(self.fd.as_raw_fd(), read.as_mut_ptr().cast(), 16) };
        if got < 0 {
            return Err(io::Error::last_os_error());
        }
        // An event in error state reads as end of file.
        if got != 16 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("read {got} of 16 bytes")));
        }
        Ok(read[1])
    }

    /// The descriptor, readable when records wait (poll it).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Hands every record waiting in the ring (header included) to `each`, in order, and frees their room.
    pub fn drain(&mut self, mut each: impl FnMut(&[u8])) {
        let header = self.ring.cast::<libbpf_sys::perf_event_mmap_page>();
        // SAFETY: the header page is mapped for as long as `self` lives; data_head and data_tail are
        // naturally aligned u64 fields the kernel and we share, accessed atomically as perf's ABI says.
        let (head, tail) = unsafe {
            let head = &*std::ptr::addr_of!((*header).data_head).cast::<AtomicU64>();
            let tail = &*std::ptr::addr_of!((*header).data_tail).cast::<AtomicU64>();
            (head, tail)
        };
        let end = head.load(Ordering::Acquire);
        let mut at = tail.load(Ordering::Relaxed);
        // SAFETY: the data area follows the header page and is `data_len` bytes long.
        let data = unsafe { std::slice::from_raw_parts(self.ring.add(self.page), self.data_len) };
        let mut record = Vec::new();
        while at < end {
            let read = |from: u64, len: usize, into: &mut Vec<u8>| {
                into.clear();
                for i in 0..len as u64 {
                    into.push(data[((from + i) % self.data_len as u64) as usize]);
                }
            };
            read(at, 8, &mut record);
            let size = u16::from_ne_bytes([record[6], record[7]]) as u64;
            if size < 8 {
                break;
            }
            read(at, size as usize, &mut record);
            each(&record);
            at += size;
        }
        tail.store(at, Ordering::Release);
    }
}

impl Drop for PerfRing {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `open`, which nothing else refers to.
        unsafe { libc::munmap(self.ring.cast(), self.ring_len) };
    }
}
