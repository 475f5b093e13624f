//! The iterator thread: reads each `iter:` probe's iterator once, which makes the kernel run the probe's
//! program over every object meanwhile, while the event loop prints what it sends. When the iteration ends,
//! the thread closes its end of a socket, which wakes the event loop: tracing ends then. A pinned iterator
//! (`iter:task:PIN`) is pinned instead, and read by whoever reads its file.

use crate::lang::{Diagnostic, Span};
use bpf::Program;
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
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

/// Why an iterator cannot be pinned at `path` (the probe `name`, at `span` in the script), if it cannot:
/// asked before anything is loaded, so that a mistake costs no attaching.
pub fn check_pin(name: &str, path: &Path, span: Span) -> Result<(), Diagnostic> {
    let refused = |what: String, help: String| {
        Diagnostic::error(span, format!("cannot pin `{name}` at {}: {what}", path.display())).with_help(help)
    };
    if path.is_dir() {
        return Err(refused(
            "that is a directory".into(),
            format!("name a file in it, e.g. `{}/list`", path.display()),
        ));
    }
    let directory = path.parent().unwrap_or(Path::new("/"));
    let bpf_fs = Path::new(crate::probes::iter::BPF_FS);
    if directory.exists() && !directory.is_dir() {
        return Err(refused(
            format!("{} is not a directory", directory.display()),
            "pin in a directory of a mounted BPF filesystem".into(),
        ));
    }
    match nix::sys::statfs::statfs(directory) {
        Ok(fs) if fs.filesystem_type() == nix::sys::statfs::BPF_FS_MAGIC => {}
        Ok(_) if directory == bpf_fs => {
            return Err(refused(
                format!("no BPF filesystem is mounted at {}", bpf_fs.display()),
                format!("mount one there: `mount -t bpf bpf {}`", bpf_fs.display()),
            ))
        }
        Ok(_) => {
            return Err(refused(
                format!("{} is not on a BPF filesystem", directory.display()),
                format!("pin in a directory of one: {} once mounted (`mount -t bpf bpf {}`), or a name without `/` for it", bpf_fs.display(), bpf_fs.display()),
            ))
        }
        Err(nix::errno::Errno::ENOENT) => {
            return Err(refused(
                format!("{} does not exist", directory.display()),
                "pin in a directory of a mounted BPF filesystem (make it there with mkdir first)".into(),
            ))
        }
        Err(e) => {
            return Err(refused(
                format!("{}: {}", directory.display(), e.desc()),
                "pin in a directory of a mounted BPF filesystem".into(),
            ))
        }
    }
    match path.symlink_metadata() {
        Ok(_) => Err(refused(
            "the file exists".into(),
            format!("remove it (`rm {}`) to pin again, or pin under another name", path.display()),
        )),
        Err(_) => Ok(()),
    }
}

/// Pins the iterator of `program` at `path` (checked by [`check_pin`]): each read of that file runs the
/// program over every object again. The line bpftrace prints for it.
pub fn pin(name: &str, program: &Program, path: &Path, span: Span) -> Result<String, Diagnostic> {
    bpf::iter::pin(program.as_fd(), path).map_err(|e| {
        check_pin(name, path, span).err().unwrap_or_else(|| {
            Diagnostic::error(span, format!("cannot pin `{name}` at {}: {e}", path.display()))
                .with_help("pin in a directory of a mounted BPF filesystem, as root")
        })
    })?;
    Ok(format!("Program pinned to {}\n", path.display()))
}
