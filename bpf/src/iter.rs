//! BPF iterators: a tracing program the kernel runs once per object of a kind (each task, each open file of
//! each task, each memory mapping of each task), while a reader reads the iterator's file.

use crate::link;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// The BTF id of the kernel's `bpf_iter_NAME`, which an iterator program of kind `name` is loaded for.
pub fn btf_id(name: &str) -> io::Result<u32> {
    let name = std::ffi::CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `name` is a NUL-terminated string that outlives the call; libbpf adds the `bpf_iter_` prefix.
    let id = unsafe { libbpf_sys::libbpf_find_vmlinux_btf_id(name.as_ptr(), libbpf_sys::BPF_TRACE_ITER) };
    if id < 0 {
        return Err(io::Error::from_raw_os_error(-id));
    }
    Ok(id as u32)
}

/// Runs the iterator program `prog` (loaded with [`crate::AttachMode::Iterator`]) over every object once:
/// the kernel calls it for each while its file is read, and once more with none at the end. What the
/// program writes into the file (nothing, when it prints through the ring buffer) is read and dropped.
pub fn run(prog: BorrowedFd<'_>) -> io::Result<()> {
    let link = link::create(prog, libbpf_sys::BPF_TRACE_ITER, &link::options())?;
    // SAFETY: a plain call on a link fd we own.
    let fd = unsafe { libbpf_sys::bpf_iter_create(link.as_raw_fd()) };
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: a non-negative return is a new fd that we own.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let mut buffer = [0u8; 4096];
    loop {
        match file.read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
