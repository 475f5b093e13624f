//! What the running kernel offers, found out without attaching anything: libbpf's feature probes
//! (program types, map types, helpers) and, for BTF-attached programs, loading a trivial one.

use crate::insn::{Asm, Reg};
use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// BPF ring buffers (`BPF_MAP_TYPE_RINGBUF`, 5.8).
pub fn ringbuf() -> bool {
    map_type(libbpf_sys::BPF_MAP_TYPE_RINGBUF)
}

/// Raw tracepoint programs (4.17).
pub fn raw_tracepoint() -> bool {
    prog_type(libbpf_sys::BPF_PROG_TYPE_RAW_TRACEPOINT)
}

/// The `bpf_loop` helper (5.17), as a raw tracepoint program would call it.
pub fn bpf_loop() -> bool {
    helper(libbpf_sys::BPF_PROG_TYPE_RAW_TRACEPOINT, crate::Helper::Loop)
}

/// BPF timers (`bpf_timer_init`, 5.15), as a raw tracepoint program would call it.
pub fn bpf_timer() -> bool {
    helper(libbpf_sys::BPF_PROG_TYPE_RAW_TRACEPOINT, crate::Helper::TimerInit)
}

/// Whether a BTF-typed raw tracepoint program (tp_btf) loads, on `sched_switch`.
pub fn tp_btf() -> io::Result<()> {
    tracing_loads("sched_switch", libbpf_sys::BPF_TRACE_RAW_TP)
}

/// Whether an fentry program loads, on `vfs_read`.
pub fn fentry() -> io::Result<()> {
    tracing_loads("vfs_read", libbpf_sys::BPF_TRACE_FENTRY)
}

/// Whether the kernel loads programs of this type (`libbpf_sys::BPF_PROG_TYPE_*`).
fn prog_type(kind: libbpf_sys::bpf_prog_type) -> bool {
    // SAFETY: no pointers; a NULL options pointer is allowed.
    unsafe { libbpf_sys::libbpf_probe_bpf_prog_type(kind, std::ptr::null()) == 1 }
}

/// Whether the kernel has this map type (`libbpf_sys::BPF_MAP_TYPE_*`).
fn map_type(kind: libbpf_sys::bpf_map_type) -> bool {
    // SAFETY: no pointers; a NULL options pointer is allowed.
    unsafe { libbpf_sys::libbpf_probe_bpf_map_type(kind, std::ptr::null()) == 1 }
}

/// Whether programs of this type may call this helper.
fn helper(kind: libbpf_sys::bpf_prog_type, helper: crate::Helper) -> bool {
    // SAFETY: no pointers; a NULL options pointer is allowed.
    unsafe { libbpf_sys::libbpf_probe_bpf_helper(kind, helper.id() as _, std::ptr::null()) == 1 }
}

/// Loads (and closes) a trivial tracing program attached by BTF to the kernel's `target` (a function
/// for fentry, `btf_trace_NAME` for tp_btf): whether such probes can be had here, and why not.
fn tracing_loads(target: &str, attach_type: libbpf_sys::bpf_attach_type) -> io::Result<()> {
    let name = CString::new(target).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `name` is a NUL-terminated string that outlives the call.
    let id = unsafe { libbpf_sys::libbpf_find_vmlinux_btf_id(name.as_ptr(), attach_type) };
    if id < 0 {
        return Err(io::Error::from_raw_os_error(-id));
    }
    let mut asm = Asm::new();
    asm.mov64_imm(Reg::R0, 0);
    asm.exit();
    let code = asm.finish().map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut opts = libbpf_sys::bpf_prog_load_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_load_opts>() as _,
        expected_attach_type: attach_type,
        attach_btf_id: id as u32,
        ..Default::default()
    };
    // SAFETY: every pointer handed over stays valid for the duration of the call.
    let fd = unsafe {
        libbpf_sys::bpf_prog_load(
            libbpf_sys::BPF_PROG_TYPE_TRACING,
            c"probe".as_ptr(),
            c"GPL".as_ptr(),
            code.insns.as_ptr().cast(),
            code.insns.len() as _,
            &mut opts,
        )
    };
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: a non-negative return is a new file descriptor that we own; dropping it closes it.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    Ok(())
}
