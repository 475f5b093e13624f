//! Runs a command with `perf_event_open` failing with EPERM, as a container's seccomp profile can make
//! it fail: installs a seccomp filter and execs the command.
//!
//!     deny_perf_event_open COMMAND [ARGS...]

#[path = "shared/seccomp.rs"]
mod seccomp;

use std::ffi::CString;

fn main() {
    let args: Vec<CString> =
        std::env::args().skip(1).map(|a| CString::new(a).expect("no NUL in arguments")).collect();
    if args.is_empty() {
        eprintln!("usage: deny_perf_event_open COMMAND [ARGS...]");
        std::process::exit(2);
    }
    if let Err(e) = seccomp::deny_perf_event_open() {
        eprintln!("deny_perf_event_open: cannot install the filter: {e}");
        std::process::exit(2);
    }
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    // SAFETY: argv is a NULL-terminated array of C strings that live until execvp returns.
    unsafe { libc::execvp(argv[0], argv.as_ptr()) };
    eprintln!("deny_perf_event_open: cannot run {:?}: {}", args[0], std::io::Error::last_os_error());
    std::process::exit(127);
}
