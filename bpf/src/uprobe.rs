//! Attaching programs to user-space functions: a uprobe_multi link where the kernel has them
//! (no `perf_event_open` needed), a perf uprobe event otherwise.

use crate::perf::{pmu_type, PerfEvent, PerfEventSpec, Sample};
use crate::prog::AttachMode;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Where and for whom a uprobe fires.
#[derive(Clone, Debug)]
pub struct UprobeTarget<'a> {
    pub path: &'a Path,
    pub offset: u64,
    pub retprobe: bool,
    /// Only this process (all its threads) triggers the probe; `None`: every process.
    pub pid: Option<u32>,
    /// For a perf uprobe event of every process: an online CPU to open it on (the program runs on every
    /// CPU all the same: the kernel runs the programs of a uprobe's trace event, not of one CPU).
    pub cpu: u32,
}

/// An attached uprobe. Dropping it detaches.
pub enum Uprobe {
    Link(OwnedFd),
    Perf(PerfEvent),
}

impl Uprobe {
    pub fn attach(prog: BorrowedFd<'_>, mode: AttachMode, target: &UprobeTarget<'_>) -> io::Result<Uprobe> {
        match mode {
            AttachMode::UprobeMulti => multi_link(prog, target).map(Uprobe::Link),
            AttachMode::PerfEvent => perf_uprobe(prog, target).map(Uprobe::Perf),
            AttachMode::KprobeMulti => {
                Err(io::Error::new(io::ErrorKind::InvalidInput, "a uprobe cannot use a kprobe_multi link"))
            }
        }
    }
}

/// Whether this kernel has uprobe_multi links (Linux 6.6 and later), found out without attaching
/// anything: every uprobe detach waits for an RCU grace period, tens of milliseconds. A link request
/// with too many offsets fails with E2BIG only where the kernel knows uprobe_multi links.
pub fn multi_supported() -> bool {
    let mut asm = crate::Asm::new();
    asm.mov64_imm(crate::Reg::R0, 0);
    asm.exit();
    let Ok(code) = asm.finish() else { return false };
    let Ok(prog) = crate::load("st_feature", crate::ProgType::Kprobe, AttachMode::UprobeMulti, &code, &[])
    else {
        return false;
    };
    let offsets = [0 as libc::c_ulong];
    let mut opts = libbpf_sys::bpf_link_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_link_create_opts>() as _,
        ..Default::default()
    };
    opts.__bindgen_anon_1.uprobe_multi = libbpf_sys::bpf_link_create_opts__bindgen_ty_1__bindgen_ty_3 {
        cnt: u32::MAX,
        path: c"/".as_ptr(),
        offsets: offsets.as_ptr(),
        ..Default::default()
    };
    // SAFETY: the kernel rejects the count before reading the arrays; the pointers are valid anyway.
    let result = unsafe {
        libbpf_sys::bpf_link_create(prog.as_fd().as_raw_fd(), 0, libbpf_sys::BPF_TRACE_UPROBE_MULTI, &opts)
    };
    if result >= 0 {
        // SAFETY: an unexpected success returns a link fd that we own; closing it detaches.
        drop(unsafe { OwnedFd::from_raw_fd(result) });
    }
    result == -libc::E2BIG
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::other("path contains a NUL byte"))
}

fn multi_link(prog: BorrowedFd<'_>, target: &UprobeTarget<'_>) -> io::Result<OwnedFd> {
    let path = c_path(target.path)?;
    let offsets = [target.offset as libc::c_ulong];
    let mut opts = libbpf_sys::bpf_link_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_link_create_opts>() as _,
        ..Default::default()
    };
    opts.__bindgen_anon_1.uprobe_multi = libbpf_sys::bpf_link_create_opts__bindgen_ty_1__bindgen_ty_3 {
        flags: if target.retprobe { libbpf_sys::BPF_F_UPROBE_MULTI_RETURN } else { 0 },
        cnt: 1,
        path: path.as_ptr(),
        offsets: offsets.as_ptr(),
        pid: target.pid.unwrap_or(0),
        ..Default::default()
    };
    // SAFETY: opts and the arrays it points to outlive the call.
    let fd = unsafe {
        libbpf_sys::bpf_link_create(prog.as_raw_fd(), 0, libbpf_sys::BPF_TRACE_UPROBE_MULTI, &opts)
    };
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: a non-negative return is a new link fd that we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn perf_uprobe(prog: BorrowedFd<'_>, target: &UprobeTarget<'_>) -> io::Result<PerfEvent> {
    let path = c_path(target.path)?;
    let spec = PerfEventSpec {
        type_: pmu_type("uprobe")?,
        // Bit 0 of config is the retprobe flag (/sys/bus/event_source/devices/uprobe/format/retprobe).
        config: target.retprobe as u64,
        config1: path.as_ptr() as u64,
        config2: target.offset,
        sample: Sample::Period(1),
    };
    let (pid, cpu) = match target.pid {
        Some(pid) => (pid as i32, -1),
        None => (-1, target.cpu as i32),
    };
    let event = PerfEvent::open(&spec, pid, cpu)?.attach(prog)?;
    event.enable()?;
    Ok(event)
}

impl AsFd for Uprobe {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Uprobe::Link(fd) => fd.as_fd(),
            Uprobe::Perf(event) => event.as_fd(),
        }
    }
}
