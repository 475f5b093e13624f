//! BPF iterators: a tracing program the kernel runs once per object of a kind (each task, each open file of
//! each task, each memory mapping of each task), while a reader reads the iterator's file.

use crate::sys::link;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

/// The BTF id of the kernel's `bpf_iter_NAME`, which an iterator program of kind `name` is loaded for.
pub fn btf_id(name: &str) -> io::Result<u32> {
    // libbpf adds the `bpf_iter_` prefix for this attach type.
    crate::sys::features::vmlinux_btf_id(name, libbpf_sys::BPF_TRACE_ITER)
}

/// Runs the iterator program `prog` (loaded with [`crate::code::prog::AttachMode::Iterator`]) over every
/// object once: the kernel calls it for each while its file is read, and once more with none at the end.
/// What the program writes into the file (nothing, when it prints through the ring buffer) is read and
/// dropped.
pub fn run(prog: BorrowedFd<'_>) -> io::Result<()> {
    let link = link::create(prog, libbpf_sys::BPF_TRACE_ITER, &link::options())?;
    let mut file = std::fs::File::from(link::iterator(link.as_fd())?);
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

/// Pins an iterator of `prog` at `path` on the BPF filesystem (`BPF_OBJ_PIN` of its link): each read of
/// that file runs the program over every object again, writing what it prints with `bpf_seq_printf` into
/// the file, after this process has gone. The pin lives until the file is removed.
pub fn pin(prog: BorrowedFd<'_>, path: &Path) -> io::Result<()> {
    let link = link::create(prog, libbpf_sys::BPF_TRACE_ITER, &link::options())?;
    link::pin(link.as_fd(), path)
}
