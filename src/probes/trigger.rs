//! Attaching BEGIN, END and interval programs to the trigger functions of this very process.

use super::ProbeKind;
use bpf::{AttachMode, Program, Uprobe, UprobeTarget};
use std::cell::Cell;
use std::io;
use std::os::fd::AsFd;
use trigger::{Location, Trigger};

/// Offset of the first argument register in the uprobe context (`struct pt_regs`).
#[cfg(target_arch = "x86_64")]
pub const FIRST_ARG_OFFSET: i16 = 14 * 8; // rdi
#[cfg(target_arch = "aarch64")]
pub const FIRST_ARG_OFFSET: i16 = 0; // regs[0]

/// Where each trigger lives in this process, and how uprobes attach on this kernel.
pub struct Triggers {
    begin: Location,
    end: Location,
    interval: Location,
    /// uprobe_multi links until the kernel shows it lacks them (before Linux 6.6); then perf events.
    mode: Cell<AttachMode>,
}

/// Why a trigger probe could not be attached.
pub enum AttachError<E> {
    /// Loading the program failed (the loader's own error, e.g. a verifier rejection).
    Load(E),
    Attach(io::Error),
}

impl Triggers {
    pub fn locate() -> io::Result<Triggers> {
        Ok(Triggers {
            begin: Trigger::Begin.location()?,
            end: Trigger::End.location()?,
            interval: Trigger::Interval.location()?,
            mode: Cell::new(AttachMode::UprobeMulti),
        })
    }

    pub fn mode(&self) -> AttachMode {
        self.mode.get()
    }

    /// Loads a program with `load` and attaches it to the trigger that fires `kind`, for this process
    /// only: another tracer calling its own copy of the trigger never runs our programs.
    ///
    /// uprobe_multi links need no `perf_event_open`, so they also work where a container denies it.
    /// The first program finds out whether the kernel has them: no trial attach is spent on it,
    /// since every uprobe detach waits for an RCU grace period (tens of milliseconds).
    pub fn load_and_attach<E>(
        &self,
        kind: &ProbeKind,
        load: impl Fn(AttachMode) -> Result<Program, E>,
    ) -> Result<Uprobe, AttachError<E>> {
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
        if self.mode.get() == AttachMode::UprobeMulti {
            let attached = load(AttachMode::UprobeMulti)
                .ok()
                .map(|prog| Uprobe::attach(prog.as_fd(), AttachMode::UprobeMulti, &target));
            match attached {
                Some(Ok(uprobe)) => return Ok(uprobe),
                Some(Err(e)) if !lacks_uprobe_multi(&e) => return Err(AttachError::Attach(e)),
                _ => self.mode.set(AttachMode::PerfEvent),
            }
        }
        let prog = load(AttachMode::PerfEvent).map_err(AttachError::Load)?;
        Uprobe::attach(prog.as_fd(), AttachMode::PerfEvent, &target).map_err(AttachError::Attach)
    }
}

/// The errors of a kernel that does not know uprobe_multi links.
fn lacks_uprobe_multi(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS))
}
