//! Attaching the programs the kernel fires on events of its own (tracepoints, raw tracepoints, uprobes,
//! kprobes): each probe's provider attaches its program. Probes steadytrace fires itself attach nothing,
//! and per-CPU perf events are kept by `PerfProbes`.

use super::load::{Firing, Loaded};
use super::Failure;
use crate::codegen::Compiled;
use crate::probes::{AttachTarget, Attachment};
use std::os::fd::AsFd;

/// Attaches every program the kernel fires that its provider attaches.
pub fn attach(
    compiled: &Compiled,
    loaded: &Loaded,
    target: &AttachTarget,
) -> Result<Vec<Attachment>, Failure> {
    let mut attachments = vec![];
    for (code, firing) in compiled.programs.iter().zip(&loaded.firings) {
        let Firing::Kernel(program) = firing else { continue };
        if let Some(attachment) = code.point.provider.attach(program.as_fd(), target)? {
            attachments.push(attachment);
        }
    }
    Ok(attachments)
}
