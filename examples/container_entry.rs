//! Starts a command the way a container runtime starts a container's process, for tests/static_container.rs:
//! mounts /proc, /sys and tracefs inside ROOT, chroots into ROOT, keeps only CAP_BPF and CAP_PERFMON, installs
//! the seccomp filter failing perf_event_open with EPERM (examples/shared/seccomp.rs), and execs COMMAND, a
//! path inside ROOT.
//!
//!     unshare --mount --pid --fork --propagation private container_entry ROOT COMMAND [ARGS...]
//!
//! It must be pid 1 of fresh mount and pid namespaces (as unshare above makes it), so that its mounts vanish
//! with them and /proc shows the container's processes; it refuses to run otherwise.

#[path = "shared/seccomp.rs"]
mod seccomp;

use std::ffi::{CStr, CString};
use std::io::Error;

const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;
/// linux/capability.h: the version whose sets are two 32-bit words.
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

fn fail(what: &str) -> ! {
    eprintln!("container_entry: {what}: {}", Error::last_os_error());
    std::process::exit(2);
}

fn mount(source: &CStr, target: &str, fstype: &CStr) {
    let target = CString::new(target).expect("no NUL in ROOT");
    // SAFETY: NUL-terminated strings that outlive the call; no data argument.
    if unsafe { libc::mount(source.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) } != 0 {
        fail(&format!("mount {fstype:?} on {target:?}"));
    }
}

/// Bounding, ambient, permitted, effective and inheritable sets reduced to CAP_BPF and CAP_PERFMON: what
/// `--cap-drop ALL --cap-add BPF --cap-add PERFMON` gives a container's root.
fn keep_only_bpf_and_perfmon() {
    for cap in 0..64 {
        // SAFETY: plain prctl; EINVAL past the kernel's last capability ends the loop.
        if cap != CAP_BPF
            && cap != CAP_PERFMON
            && unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0
        {
            if Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
                break;
            }
            fail("PR_CAPBSET_DROP");
        }
    }
    // SAFETY: plain prctl.
    if unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) } != 0 {
        fail("PR_CAP_AMBIENT_CLEAR_ALL");
    }
    // Both capabilities live in the second word (bits 32 and up).
    let high = (1 << (CAP_BPF - 32)) | (1 << (CAP_PERFMON - 32));
    let data = [CapData::default(), CapData { effective: high, permitted: high, inheritable: high }];
    let header = CapHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
    // SAFETY: capset with a version-3 header and the two data words that version reads.
    if unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) } != 0 {
        fail("capset");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: container_entry ROOT COMMAND [ARGS...]");
        std::process::exit(2);
    }
    if std::process::id() != 1 {
        eprintln!(
            "container_entry: not pid 1 of a new pid namespace: run it under `unshare --mount --pid --fork`"
        );
        std::process::exit(2);
    }
    let root = &args[0];
    // SAFETY: NUL-terminated strings; makes every mount of this namespace private, so none reaches the host.
    if unsafe {
        libc::mount(
            c"none".as_ptr(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    } != 0
    {
        fail("making / private");
    }
    for dir in ["proc", "sys"] {
        let _ = std::fs::create_dir(format!("{root}/{dir}"));
    }
    mount(c"proc", &format!("{root}/proc"), c"proc");
    mount(c"sysfs", &format!("{root}/sys"), c"sysfs");
    mount(c"nodev", &format!("{root}/sys/kernel/tracing"), c"tracefs");
    let root_c = CString::new(root.as_str()).expect("no NUL in ROOT");
    // SAFETY: NUL-terminated paths.
    if unsafe { libc::chroot(root_c.as_ptr()) } != 0 || unsafe { libc::chdir(c"/".as_ptr()) } != 0 {
        fail("chroot");
    }
    keep_only_bpf_and_perfmon();
    if let Err(e) = seccomp::deny_perf_event_open() {
        eprintln!("container_entry: cannot install the seccomp filter: {e}");
        std::process::exit(2);
    }
    let command: Vec<CString> = args[1..].iter().map(|a| CString::new(a.as_str()).expect("no NUL")).collect();
    let mut argv: Vec<*const libc::c_char> = command.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    // SAFETY: argv is a NULL-terminated array of C strings that live until execv returns.
    unsafe { libc::execv(argv[0], argv.as_ptr()) };
    fail(&format!("exec {:?} inside {root}", args[1]));
}
