//! A BPF token (Linux 6.9): the use of `bpf()` that a host delegates to a user namespace through a BPF
//! filesystem mounted there with `delegate_*` options. Created once from that filesystem, it is handed to
//! every map creation, program load and BTF load (the feature probes included); the kernel then checks
//! the token's delegated commands and types, and capabilities in the token's user namespace, instead of
//! capabilities in the initial one. Links need none: the kernel checks the program's token.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::OnceLock;

/// The process's token: one for all its `bpf()` calls, as libbpf keeps one per object.
static TOKEN: OnceLock<OwnedFd> = OnceLock::new();

/// Creates a token from the BPF filesystem mounted at `bpffs` and hands it to every later `bpf()` call
/// of this process. The kernel refuses with EOPNOTSUPP where that filesystem delegates nothing, and
/// with EPERM where it belongs to another user namespace or the caller lacks CAP_BPF in its own.
pub fn create(bpffs: &Path) -> io::Result<()> {
    let dir = std::fs::File::open(bpffs)?;
    let mut opts = libbpf_sys::bpf_token_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_token_create_opts>() as _,
        ..Default::default()
    };
    // SAFETY: the directory's descriptor and the options outlive the call.
    let fd = unsafe { libbpf_sys::bpf_token_create(dir.as_raw_fd(), &mut opts) };
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: a non-negative return is a new file descriptor that we own.
    let token = unsafe { OwnedFd::from_raw_fd(fd) };
    TOKEN
        .set(token)
        .map_err(|_| io::Error::new(io::ErrorKind::AlreadyExists, "a BPF token is already in use"))
}

/// Whether this process's `bpf()` calls carry a token.
pub fn in_use() -> bool {
    TOKEN.get().is_some()
}

/// The token's descriptor and the `BPF_F_TOKEN_FD` flag that says it is given, for the `token_fd` and
/// flags fields of libbpf's options; zeros without a token.
pub(crate) fn fd_and_flag() -> (u32, u32) {
    match TOKEN.get() {
        Some(token) => (token.as_raw_fd() as u32, libbpf_sys::BPF_F_TOKEN_FD),
        None => (0, 0),
    }
}
