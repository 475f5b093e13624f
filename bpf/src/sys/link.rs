//! `bpf_link_create` for the multi-attach links (uprobe_multi, kprobe_multi) and iterators, pinning a link,
//! and the trivial program
//! the feature probes of those links load.

use crate::code::prog::AttachMode;
use crate::sys::prog::Program;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Options with their size set and everything else zero.
pub(crate) fn options() -> libbpf_sys::bpf_link_create_opts {
    libbpf_sys::bpf_link_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_link_create_opts>() as _,
        ..Default::default()
    }
}

/// Creates a link of `attach_type` for `prog`; closing the returned descriptor detaches it. The caller
/// keeps whatever `opts` points to alive for the call.
pub(crate) fn create(
    prog: BorrowedFd<'_>,
    attach_type: libbpf_sys::bpf_attach_type,
    opts: &libbpf_sys::bpf_link_create_opts,
) -> io::Result<OwnedFd> {
    // SAFETY: opts is valid for the call; the kernel copies what it points to before returning.
    let fd = unsafe { libbpf_sys::bpf_link_create(prog.as_raw_fd(), 0, attach_type, opts) };
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: a non-negative return is a new link fd that we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens an iterator of the iterator link `link` (`BPF_ITER_CREATE`): reading it runs the link's program.
pub(crate) fn iterator(link: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: a plain call on a link fd the caller holds.
    let fd = unsafe { libbpf_sys::bpf_iter_create(link.as_raw_fd()) };
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: a non-negative return is a new fd that we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Pins `link` at `path` on the BPF filesystem (`BPF_OBJ_PIN`): it outlives its descriptors until the file is
/// removed.
pub(crate) fn pin(link: BorrowedFd<'_>, path: &Path) -> io::Result<()> {
    let path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the path holds a NUL byte"))?;
    // SAFETY: a plain call with a link fd the caller holds and a NUL-terminated path the kernel copies.
    match unsafe { libbpf_sys::bpf_obj_pin(link.as_raw_fd(), path.as_ptr()) } {
        0 => Ok(()),
        error => Err(io::Error::from_raw_os_error(-error)),
    }
}

/// Whether a link request the kernel must refuse fails with `errno`, the answer of a kernel that knows
/// the link type: the feature probe of a multi-attach link, with a do-nothing kprobe program loaded for
/// `mode`. Nothing stays attached (an unexpected success is closed at once).
pub(crate) fn refused_with(
    mode: AttachMode,
    attach_type: libbpf_sys::bpf_attach_type,
    opts: &libbpf_sys::bpf_link_create_opts,
    errno: i32,
) -> bool {
    let Some(prog) = trivial_program(mode) else { return false };
    match create(prog.as_fd(), attach_type, opts) {
        Ok(_link) => false,
        Err(error) => error.raw_os_error() == Some(errno),
    }
}

fn trivial_program(mode: AttachMode) -> Option<Program> {
    let mut asm = crate::code::insn::Asm::new();
    asm.mov64_imm(crate::code::insn::Reg::R0, 0);
    asm.exit();
    let code = asm.finish().ok()?;
    crate::sys::prog::load("st_feature", crate::code::prog::ProgType::Kprobe, mode, &code, &[]).ok()
}
