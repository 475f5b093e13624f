//! `watchpoint:ADDRESS:LENGTH:MODE` (alias `w:`): a hardware breakpoint on LENGTH bytes at ADDRESS, firing
//! when they are read (`r`), written (`w`) or executed (`x`). A kernel address is watched on every CPU, its
//! events revived after hotplug as the profile probes' are; a user address is watched in the process of `-p`
//! or `-c`, in each of its threads and in the threads they create later. `unwatch(ADDRESS)` removes it.

use super::Fields;
use super::{AttachError, AttachPoint, AttachTarget, Attachment, Options, PerfEvents, Provider};
use crate::kernel::KernelTypes;
use crate::lang::{Diagnostic, Span};
use crate::privilege::{has_capability, initial_user_namespace, CAP_SYS_ADMIN};
use bpf::perf::{PerfEvent, PerfEventSpec, Sample, TYPE_BREAKPOINT};
use bpf::ProgType;
use std::os::fd::BorrowedFd;

/// `HW_BREAKPOINT_R`, `HW_BREAKPOINT_W`, `HW_BREAKPOINT_X` (include/uapi/linux/hw_breakpoint.h).
const READ: u32 = 1;
const WRITE: u32 = 2;
const EXECUTE: u32 = 4;
/// An execution breakpoint covers one instruction: the length the kernel takes for it, whatever was written.
const EXECUTE_LENGTH: u64 = bpf::arch::HOST.execute_breakpoint_length;

const HELP: &str = "write `watchpoint:ADDRESS:LENGTH:MODE`, LENGTH one of 1, 2, 4, 8 and MODE `r`, `w`, `rw` or `x` (for example `watchpoint:0x10000000:8:w`)";

#[derive(Debug)]
pub struct Watchpoint {
    address: u64,
    length: u64,
    /// `HW_BREAKPOINT_*` bits.
    mode: u32,
}

impl Watchpoint {
    /// Kernel addresses have their top bit set, on x86_64 as on arm64.
    fn in_kernel(&self) -> bool {
        self.address >> 63 == 1
    }

    fn spec(&self, inherit: bool) -> PerfEventSpec {
        let length = if self.mode == EXECUTE { EXECUTE_LENGTH } else { self.length };
        PerfEventSpec {
            type_: TYPE_BREAKPOINT,
            config: 0,
            config1: self.address,
            config2: length,
            sample: Sample::Period(1),
            bp_type: self.mode,
            inherit,
        }
    }

    /// Whether the kernel grants this kernel-address breakpoint, asked by opening it disabled on this
    /// thread and closing it at once. Linux asks CAP_SYS_ADMIN (in the initial user namespace) for
    /// breakpoints in the kernel, beyond what perf_event_paranoid asks, and some kernels refuse them even so
    /// (EPERM both ways): either is said here, at the attach point, where attaching would blame CAP_PERFMON
    /// and perf_event_paranoid. Other errors (a CPU's breakpoint slots all taken) are left to attaching,
    /// which names the CPU.
    fn check_granted(&self, span: Span) -> Result<(), Diagnostic> {
        match PerfEvent::open(&self.spec(false), 0, -1) {
            Err(error) if error.raw_os_error() == Some(libc::EPERM) => Err(refused(span)),
            _ => Ok(()),
        }
    }
}

/// The error for a kernel-address breakpoint refused with EPERM: for want of CAP_SYS_ADMIN, or by the kernel
/// itself.
fn refused(span: Span) -> Diagnostic {
    let instead = "watch a user address in a process (-p PID or -c COMMAND), or trace what writes this address with a tracepoint or kprobe";
    if !(has_capability(CAP_SYS_ADMIN) && initial_user_namespace()) {
        return Diagnostic::error(
            span,
            "watching a kernel address needs CAP_SYS_ADMIN in the initial user namespace: the kernel refuses hardware breakpoints on kernel addresses without it (EPERM), whatever kernel.perf_event_paranoid allows",
        )
        .with_help(format!(
            "run steadytrace as root on the host, or grant it CAP_SYS_ADMIN (docker/podman: --cap-add SYS_ADMIN); else {instead}"
        ));
    }
    Diagnostic::error(
        span,
        format!(
            "this kernel ({}) refuses hardware breakpoints on kernel addresses (EPERM), although steadytrace holds CAP_SYS_ADMIN, all that Linux asks for them: it is built to refuse them",
            crate::kernel::release()
        ),
    )
    .with_help(format!(
        "{instead}; kernel watchpoints need a kernel that grants them (Linux as released does, to CAP_SYS_ADMIN)"
    ))
}

impl Provider for Watchpoint {
    fn kind(&self) -> &'static str {
        "watchpoint"
    }

    fn prog_type(&self) -> ProgType {
        ProgType::PerfEvent
    }

    fn fires_in_any_process(&self) -> bool {
        self.in_kernel()
    }

    fn attach(
        &self,
        program: BorrowedFd<'_>,
        target: &AttachTarget,
    ) -> Result<Option<Attachment>, AttachError> {
        if self.in_kernel() {
            return Ok(None);
        }
        let pid = target.pid.ok_or_else(|| {
            AttachError::Explained(
                "a watchpoint on a user address needs its process: -p PID or -c COMMAND".into(),
            )
        })?;
        let what = format!("cannot watch {:#x} in process {pid}", self.address);
        let os = |error: std::io::Error| AttachError::Os { what: what.clone(), error };
        // Each thread has its own breakpoints; threads created later inherit them.
        let mut events = vec![];
        for thread in threads(pid).map_err(os)? {
            let event = PerfEvent::open(&self.spec(true), thread as i32, -1).and_then(|e| e.attach(program));
            match event {
                Ok(event) => {
                    event.enable().map_err(os)?;
                    events.push(event);
                }
                // A thread that exited since the list was read.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => return Err(os(e)),
            }
        }
        Ok(Some(Attachment::new(events)))
    }

    fn perf_events(&self) -> Option<PerfEvents> {
        self.in_kernel().then(|| PerfEvents { spec: self.spec(false), every_cpu: true })
    }

    fn watched_address(&self) -> Option<u64> {
        Some(self.address)
    }

    fn describe(&self) -> String {
        match self.in_kernel() {
            true => "runs on a hardware breakpoint on every online CPU, revived after hotplug".into(),
            false => "runs on a hardware breakpoint in each thread of the process".into(),
        }
    }
}

/// The threads of process `pid`.
fn threads(pid: u32) -> std::io::Result<Vec<u32>> {
    let mut threads = vec![];
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        if let Some(tid) = entry?.file_name().to_str().and_then(|name| name.parse().ok()) {
            threads.push(tid);
        }
    }
    Ok(threads)
}

pub fn resolve(
    _: &str,
    rest: &Fields,
    span: Span,
    options: &Options,
    _: &KernelTypes,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    let watchpoint = parse(rest, span)?;
    if !watchpoint.in_kernel() && !options.target_process {
        return Err(Diagnostic::error(
            span,
            format!("{:#x} is a user address: it is watched in one process", watchpoint.address),
        )
        .with_help("name the process with -p PID, or start it with -c COMMAND"));
    }
    if watchpoint.in_kernel() {
        watchpoint.check_granted(span)?;
    }
    let name =
        format!("watchpoint:{:#x}:{}:{}", watchpoint.address, watchpoint.length, mode_text(watchpoint.mode));
    Ok(vec![AttachPoint::new(watchpoint, name, span)])
}

fn parse(rest: &str, span: Span) -> Result<Watchpoint, Diagnostic> {
    let parts: Vec<&str> = rest.split(':').collect();
    let [address, length, mode] = parts[..] else {
        return Err(
            Diagnostic::error(span, "a watchpoint has an address, a length and a mode").with_help(HELP)
        );
    };
    let address = super::numbers::attach_number(address)
        .ok_or_else(|| Diagnostic::error(span, format!("`{address}` is not an address")).with_help(HELP))?;
    let length =
        super::numbers::attach_number(length).filter(|n| [1, 2, 4, 8].contains(n)).ok_or_else(|| {
            Diagnostic::error(span, format!("`{length}` is not a watchpoint length")).with_help(HELP)
        })?;
    let mut bits = 0;
    for c in mode.chars() {
        let bit = match c {
            'r' => READ,
            'w' => WRITE,
            'x' => EXECUTE,
            _ => 0,
        };
        if bit == 0 || bits & bit != 0 {
            bits = 0;
            break;
        }
        bits |= bit;
    }
    if bits == 0 || (bits & EXECUTE != 0 && bits != EXECUTE) {
        return Err(Diagnostic::error(span, format!("`{mode}` is not a watchpoint mode"))
            .with_help("MODE is `r`, `w` or `rw` for data, `x` alone for code"));
    }
    Ok(Watchpoint { address, length, mode: bits })
}

/// The mode as bpftrace names it in the probe's name.
fn mode_text(mode: u32) -> &'static str {
    match mode {
        READ => "r",
        WRITE => "w",
        EXECUTE => "x",
        _ => "rw",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_addresses_lengths_and_modes() {
        let w = parse("0x10000000:8:w", Span::default()).unwrap();
        assert_eq!((w.address, w.length, w.mode), (0x1000_0000, 8, WRITE));
        assert!(!w.in_kernel());
        assert_eq!(parse("0x10:4:wr", Span::default()).unwrap().mode, READ | WRITE);
        let x = parse("0x10:1:x", Span::default()).unwrap();
        assert_eq!(x.spec(false).config2, EXECUTE_LENGTH, "an execution breakpoint is one instruction");
        assert!(parse("0xffffffff81000000:4:w", Span::default()).unwrap().in_kernel());
        for bad in ["0x10:3:w", "0x10:8:rx", "0x10:8:ww", "0x10:8:q", "0x10:8", "zz:8:w", "0x10:8:"] {
            assert!(parse(bad, Span::default()).is_err(), "{bad}");
        }
    }
}
