//! Attaching programs to user-space functions: a uprobe_multi link where the kernel has them
//! (no `perf_event_open` needed), a perf uprobe event otherwise.

use crate::link;
use crate::perf::{pmu_type, PerfEvent, PerfEventSpec, Sample};
use crate::prog::AttachMode;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
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
    let offsets = [0 as libc::c_ulong];
    let mut opts = link::options();
    opts.__bindgen_anon_1.uprobe_multi = libbpf_sys::bpf_link_create_opts__bindgen_ty_1__bindgen_ty_3 {
        cnt: u32::MAX,
        path: c"/".as_ptr(),
        offsets: offsets.as_ptr(),
        ..Default::default()
    };
    // The kernel rejects the count before reading the arrays; the pointers are valid anyway.
    link::refused_with(AttachMode::UprobeMulti, libbpf_sys::BPF_TRACE_UPROBE_MULTI, &opts, libc::E2BIG)
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::other("path contains a NUL byte"))
}

fn multi_link(prog: BorrowedFd<'_>, target: &UprobeTarget<'_>) -> io::Result<OwnedFd> {
    let path = c_path(target.path)?;
    let offsets = [target.offset as libc::c_ulong];
    let mut opts = link::options();
    opts.__bindgen_anon_1.uprobe_multi = libbpf_sys::bpf_link_create_opts__bindgen_ty_1__bindgen_ty_3 {
        flags: if target.retprobe { libbpf_sys::BPF_F_UPROBE_MULTI_RETURN } else { 0 },
        cnt: 1,
        path: path.as_ptr(),
        offsets: offsets.as_ptr(),
        pid: target.pid.unwrap_or(0),
        ..Default::default()
    };
    // The path and offsets outlive the call.
    link::create(prog, libbpf_sys::BPF_TRACE_UPROBE_MULTI, &opts)
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
