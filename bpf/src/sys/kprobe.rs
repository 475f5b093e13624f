//! Attaching one program to many kernel functions at once: a kprobe_multi link (Linux 5.18 and later,
//! kernels built with CONFIG_FPROBE). The kernel registers the functions with ftrace together, where
//! perf kprobe events cost one `perf_event_open` and one kprobe registration per function.

use crate::code::prog::AttachMode;
use crate::sys::link;
use std::ffi::CString;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

/// Whether this kernel has kprobe_multi links, found out without attaching anything. The link request
/// names its functions by an address array at an unreadable pointer: a kernel with kprobe_multi links
/// checks the other arguments, then fails to copy the array (EFAULT); one without them rejects the
/// attach type (EINVAL), and one built without CONFIG_FPROBE says EOPNOTSUPP.
pub(crate) fn multi_supported() -> bool {
    refused_with_efault(AttachMode::KprobeMulti, libbpf_sys::BPF_TRACE_KPROBE_MULTI)
}

/// Whether this kernel has kprobe session links (Linux 6.10), found out as [`multi_supported`] finds out.
pub(crate) fn session_supported() -> bool {
    refused_with_efault(AttachMode::KprobeSession, libbpf_sys::BPF_TRACE_KPROBE_SESSION)
}

/// Whether a kprobe_multi link request of `attach_type` naming its functions at an unreadable pointer fails
/// only on copying them.
fn refused_with_efault(mode: AttachMode, attach_type: libbpf_sys::bpf_attach_type) -> bool {
    let mut opts = link::options();
    opts.__bindgen_anon_1.kprobe_multi = libbpf_sys::bpf_link_create_opts__bindgen_ty_1__bindgen_ty_2 {
        cnt: 1,
        // Non-null but in page zero, which is never mapped: copying from it fails.
        addrs: std::ptr::dangling(),
        ..Default::default()
    };
    // The kernel reads the address array with copy_from_user, which fails safely on a bad pointer.
    link::refused_with(mode, attach_type, &opts, libc::EFAULT)
}

/// Where a kprobe_multi link runs its program in each function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MultiKind {
    Entry,
    Return,
    /// Both, one session per call ([`AttachMode::KprobeSession`]).
    Session,
}

/// Attaches `prog` (loaded with [`AttachMode::KprobeMulti`], or [`AttachMode::KprobeSession`] for a
/// session) to every function in `functions`, where `kind` says, through one link; closing the link detaches it from all
/// of them. `cookies`, when not empty, has one value per function, which the program reads with
/// `bpf_get_attach_cookie` when that function fires. The kernel refuses the whole link when any function
/// cannot be attached: ESRCH when one is no function ftrace can patch (`ftrace_lookup_symbols`).
pub fn attach_multi(
    prog: BorrowedFd<'_>,
    functions: &[&str],
    cookies: &[u64],
    kind: MultiKind,
) -> io::Result<OwnedFd> {
    let names = functions
        .iter()
        .map(|f| CString::new(*f))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| io::Error::other("a function name has a NUL byte"))?;
    if !cookies.is_empty() && cookies.len() != names.len() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut pointers: Vec<*const libc::c_char> = names.iter().map(|n| n.as_ptr()).collect();
    let cnt = u32::try_from(pointers.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?;
    let mut opts = link::options();
    opts.__bindgen_anon_1.kprobe_multi = libbpf_sys::bpf_link_create_opts__bindgen_ty_1__bindgen_ty_2 {
        flags: if kind == MultiKind::Return { libbpf_sys::BPF_F_KPROBE_MULTI_RETURN } else { 0 },
        cnt,
        syms: pointers.as_mut_ptr(),
        cookies: if cookies.is_empty() { std::ptr::null() } else { cookies.as_ptr() },
        ..Default::default()
    };
    // The pointer array, the names it points to and the cookies outlive the call.
    let attach_type = match kind {
        MultiKind::Session => libbpf_sys::BPF_TRACE_KPROBE_SESSION,
        _ => libbpf_sys::BPF_TRACE_KPROBE_MULTI,
    };
    link::create(prog, attach_type, &opts)
}
