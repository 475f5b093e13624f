//! Attaching BEGIN, END and interval programs to the trigger functions of this very process.

use super::ProbeKind;
use bpf::{AttachMode, Uprobe, UprobeTarget};
use std::io;
use std::os::fd::BorrowedFd;
use trigger::{Location, Trigger};

/// Offset of the first argument register in the uprobe context (`struct pt_regs`).
#[cfg(target_arch = "x86_64")]
pub const FIRST_ARG_OFFSET: i16 = 14 * 8; // rdi
#[cfg(target_arch = "aarch64")]
pub const FIRST_ARG_OFFSET: i16 = 0; // regs[0]

/// Where each trigger lives in this process, and how uprobes are attached on this kernel.
pub struct Triggers {
    begin: Location,
    end: Location,
    interval: Location,
    pub mode: AttachMode,
}

impl Triggers {
    pub fn locate() -> io::Result<Triggers> {
        let begin = Trigger::Begin.location()?;
        let mode = probe_attach_mode(&begin);
        Ok(Triggers { begin, end: Trigger::End.location()?, interval: Trigger::Interval.location()?, mode })
    }

    /// Attaches `prog` to the trigger that fires `kind`, for this process only: another tracer calling
    /// its own copy of the trigger never runs our programs.
    pub fn attach(&self, kind: &ProbeKind, prog: BorrowedFd<'_>) -> io::Result<Uprobe> {
        let location = match kind {
            ProbeKind::Begin => &self.begin,
            ProbeKind::End => &self.end,
            ProbeKind::Interval { .. } => &self.interval,
        };
        let target = UprobeTarget {
            path: &location.path,
            offset: location.offset,
            retprobe: false,
            pid: Some(std::process::id()),
        };
        Uprobe::attach(prog, self.mode, &target)
    }
}

/// uprobe_multi links need no `perf_event_open` (so they work where a container denies it); kernels
/// before 6.6 lack them. One trial attach of an empty program tells which this kernel is.
fn probe_attach_mode(location: &Location) -> AttachMode {
    let mut asm = bpf::Asm::new();
    asm.mov64_imm(bpf::Reg::R0, 0);
    asm.exit();
    let Ok(code) = asm.finish() else { return AttachMode::PerfEvent };
    let Ok(prog) = bpf::load("st_probe", bpf::ProgType::Kprobe, AttachMode::UprobeMulti, &code, &[]) else {
        return AttachMode::PerfEvent;
    };
    let target = UprobeTarget {
        path: &location.path,
        offset: location.offset,
        retprobe: false,
        pid: Some(std::process::id()),
    };
    use std::os::fd::AsFd;
    match Uprobe::attach(prog.as_fd(), AttachMode::UprobeMulti, &target) {
        Ok(_) => AttachMode::UprobeMulti,
        Err(_) => AttachMode::PerfEvent,
    }
}
