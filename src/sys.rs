//! The system calls and C library functions that `nix` does not wrap, as small safe functions: the
//! only `unsafe` code of this crate (the `bpf` and `trigger` crates have their own). Everything `nix`
//! wraps safely is called through `nix` where it is used.

use std::ffi::{c_char, c_int, CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;

use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::unistd::{ForkResult, Pid};

/// Forks a child that waits for a byte on `release`, then executes `program` with `argv`; it exits
/// with status 127 instead when `release` is closed without a byte or the exec fails. Until the byte
/// comes, the child dies with its parent. `parent_end` is the other end of `release`'s pipe, which
/// the child closes so that only the parent holds it.
pub fn fork_held_exec(
    program: &CStr,
    argv: &[CString],
    release: OwnedFd,
    parent_end: &OwnedFd,
) -> nix::Result<Pid> {
    // Everything the child needs is allocated before the fork: after it, only async-signal-safe calls.
    let mut pointers: Vec<*const c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    pointers.push(std::ptr::null());
    // SAFETY: between fork and exec the child only calls close(2), prctl(2), read(2), signal(2), execv(2) and
    // _exit(2), which are async-signal-safe, with pointers to memory allocated before the fork.
    match unsafe { nix::unistd::fork() }? {
        ForkResult::Child => unsafe {
            libc::close(parent_end.as_raw_fd());
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            let mut byte = 0u8;
            if libc::read(release.as_raw_fd(), (&raw mut byte).cast(), 1) == 1 {
                libc::prctl(libc::PR_SET_PDEATHSIG, 0);
                // An ignored signal stays ignored across exec: the command gets SIGPIPE's default back, so that
                // `yes | head -1` in it ends as it does anywhere else.
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                libc::execv(program.as_ptr(), pointers.as_ptr());
            }
            libc::_exit(127)
        },
        ForkResult::Parent { child } => Ok(child),
    }
}

/// A descriptor that becomes readable when process `pid` exits (pidfd_open(2)).
pub fn pidfd_open(pid: Pid) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags, touches no memory of ours, and returns a new fd.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a non-negative return is a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Waits until one of `fds` is readable or `timeout` passes; says which are readable. An
/// interruption by a signal counts as a wake-up with nothing readable.
pub fn poll_readable(fds: &[RawFd], timeout: PollTimeout) -> io::Result<Vec<bool>> {
    let mut polled: Vec<PollFd<'_>> = fds
        .iter()
        // SAFETY: the borrows live only for this poll(2), which reads and writes nothing through the
        // descriptors: one that is not open comes back as POLLNVAL.
        .map(|&fd| PollFd::new(unsafe { BorrowedFd::borrow_raw(fd) }, PollFlags::POLLIN))
        .collect();
    match nix::poll::poll(&mut polled, timeout) {
        Ok(_) => Ok(polled.iter().map(|p| p.revents().is_some_and(|r| !r.is_empty())).collect()),
        Err(nix::errno::Errno::EINTR) => Ok(vec![false; fds.len()]),
        Err(e) => Err(e.into()),
    }
}

/// Gives the calling thread SCHED_FIFO at `priority` (1-99).
pub fn set_fifo_priority(priority: u8) -> io::Result<()> {
    let param = libc::sched_param { sched_priority: c_int::from(priority) };
    // SAFETY: sched_setscheduler on this thread (tid 0) reads a valid parameter.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The local time now, formatted with strftime(3); empty when it does not fit 256 bytes.
pub fn local_time(format: &CStr) -> Vec<u8> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    format_local_time(format, now as i64)
}

/// The local time `seconds` after the epoch, formatted with strftime(3); empty when it does not fit
/// 256 bytes.
pub fn format_local_time(format: &CStr, seconds: i64) -> Vec<u8> {
    let mut buffer = vec![0u8; 256];
    // SAFETY: localtime_r and strftime get valid pointers to buffers of the sizes given; tm is plain
    // data, for which all zeroes is a valid value.
    unsafe {
        let at = seconds as libc::time_t;
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&at, &mut tm);
        let n = libc::strftime(buffer.as_mut_ptr().cast(), buffer.len(), format.as_ptr(), &tm);
        buffer.truncate(n);
    }
    buffer
}

type CxaDemangle = unsafe extern "C" fn(*const c_char, *mut c_char, *mut usize, *mut c_int) -> *mut c_char;

/// `abi::__cxa_demangle` from libstdc++, loaded on first use: the demangler bcc and so bpftrace use
/// (a Rust crate such as cpp_demangle prints about one C++ name in twenty differently). Not in the static
/// build (scripts/build-static): a static glibc's dlopen needs the very glibc it was linked with, which a
/// container does not have, so C++ names stay mangled there.
fn cxa_demangle_function() -> Option<CxaDemangle> {
    static FUNCTION: OnceLock<Option<CxaDemangle>> = OnceLock::new();
    *FUNCTION.get_or_init(|| {
        if cfg!(target_feature = "crt-static") {
            return None;
        }
        // SAFETY: dlopen and dlsym with NUL-terminated names; the library is never closed, so the function
        // pointer stays valid, and `__cxa_demangle` has the signature of `CxaDemangle`.
        unsafe {
            let handle = libc::dlopen(c"libstdc++.so.6".as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
            if handle.is_null() {
                return None;
            }
            let function = libc::dlsym(handle, c"__cxa_demangle".as_ptr());
            (!function.is_null()).then(|| std::mem::transmute::<*mut libc::c_void, CxaDemangle>(function))
        }
    })
}

/// `mangled` demangled by libstdc++'s `__cxa_demangle`; `None` when it rejects the name or libstdc++
/// cannot be loaded.
pub fn cxa_demangle(mangled: &CStr) -> Option<String> {
    let function = cxa_demangle_function()?;
    // SAFETY: a NUL-terminated input, no caller buffer (so the result is malloc'ed by the callee), the
    // result freed with free() after copying.
    unsafe {
        let mut status: c_int = 0;
        let out = function(mangled.as_ptr(), std::ptr::null_mut(), std::ptr::null_mut(), &mut status);
        if out.is_null() {
            return None;
        }
        let text = CStr::from_ptr(out).to_string_lossy().into_owned();
        libc::free(out.cast());
        Some(text)
    }
}

/// The file at `path`, mapped read-only into memory: its sections are read without reading the whole file.
pub fn map_file(path: &str) -> io::Result<memmap2::Mmap> {
    let file = std::fs::File::open(path)?;
    // SAFETY: the mapping is private and read-only; a binary or library changed on disk while it is read could
    // change bytes under the parser (object and gimli then read garbage, bounds-checked, never out of the
    // mapping), which is the risk every tool mapping ELF files (blazesym, perf, gdb) takes. Truncation would
    // raise SIGBUS; programs are not truncated while they run.
    unsafe { memmap2::Mmap::map(&file) }
}

/// What a process needs before steadytrace's own start (main.rs runs without Rust's runtime set-up, which did
/// both): SIGPIPE ignored, so that a closed pipe is an error a write reports rather than a silent death; and
/// descriptors 0, 1 and 2 open (on /dev/null where they were closed), so that no map or event opened later takes
/// one of their numbers and receives the output.
pub fn prepare_process() {
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler; nothing else runs yet.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let mut standard = [0, 1, 2].map(|fd| libc::pollfd { fd, events: 0, revents: 0 });
    // SAFETY: poll reads and writes exactly the three pollfd structures given; a zero timeout never blocks.
    if unsafe { libc::poll(standard.as_mut_ptr(), 3, 0) } < 0 {
        return;
    }
    for closed in standard.iter().filter(|fd| fd.revents & libc::POLLNVAL != 0) {
        // The lowest free descriptor is taken: the closed one, as the standard descriptors are filled in order.
        // SAFETY: opens a path from a NUL-terminated literal; the descriptor is meant to stay open for good.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        if fd != closed.fd {
            return;
        }
    }
}
