//! Attaching the programs of tracepoint, raw tracepoint, uprobe and kprobe probes (a perf kprobe event
//! per function, or one kprobe_multi link for a wildcard). None of these is tied to a CPU: the kernel
//! runs a trace event's programs on whatever CPU it fires, so CPU hotplug does not affect them.

use super::load::{Firing, Loaded};
use super::{system, Failure};
use crate::codegen::Compiled;
use crate::probes::ProbeKind;
use bpf::kprobe::attach_multi;
use bpf::perf::{attach_raw_tracepoint, attach_trace_event, TraceEvent};
use bpf::{AttachMode, Uprobe, UprobeTarget};
use std::os::fd::AsFd;

/// An attachment (a perf event, a link, a uprobe), held only to be dropped: dropping it detaches.
pub struct Attachment {
    _held: Box<dyn std::any::Any>,
}

impl Attachment {
    fn new(held: impl std::any::Any) -> Attachment {
        Attachment { _held: Box::new(held) }
    }
}

/// Attaches every tracepoint, raw tracepoint, uprobe and kprobe program. `pid` limits uprobes to one
/// process (`-p`, `-c`); `cpu` is an online CPU to open trace events on.
pub fn attach(
    compiled: &Compiled,
    loaded: &Loaded,
    pid: Option<u32>,
    cpu: u32,
) -> Result<Vec<Attachment>, Failure> {
    let mut attachments = vec![];
    for (code, firing) in compiled.programs.iter().zip(&loaded.firings) {
        let Firing::Kernel(program) = firing else { continue };
        let prog = program.as_fd();
        let failed = |e: std::io::Error| system(&format!("cannot attach `{}`", code.point.name), e);
        let attachment = match &code.point.kind {
            ProbeKind::Tracepoint(format) => Attachment::new(
                attach_trace_event(prog, TraceEvent::Tracepoint { id: format.id.into() }, cpu)
                    .map_err(failed)?,
            ),
            ProbeKind::RawTracepoint { name } => {
                Attachment::new(attach_raw_tracepoint(prog, name).map_err(|e| match e.raw_os_error() {
                    Some(libc::ENOENT) => Failure::System(format!(
                        "there is no raw tracepoint `{name}` (`steadytrace -l 'tracepoint:*'` lists the tracepoints)"
                    )),
                    Some(libc::EINVAL) => Failure::System(format!(
                        "cannot attach `{}`: the probe reads an argument (argN) the tracepoint does not have",
                        code.point.name
                    )),
                    _ => failed(e),
                })?)
            }
            ProbeKind::Kprobe { function, offset, retprobe } => {
                let event = TraceEvent::Kprobe { function, offset: *offset, retprobe: *retprobe };
                Attachment::new(attach_trace_event(prog, event, cpu).map_err(|e| match e.raw_os_error() {
                    Some(libc::ENOENT) | Some(libc::EINVAL) => Failure::System(format!(
                        "cannot attach `{}`: the kernel has no function `{function}` that can be probed ({e})",
                        code.point.name
                    )),
                    _ => failed(e),
                })?)
            }
            ProbeKind::KprobeMulti { functions, retprobe } => Attachment::new(
                attach_multi(prog, functions, *retprobe).map_err(|e| match e.raw_os_error() {
                    Some(libc::ENOENT) => {
                        let (_, pattern) = code.point.name.split_once(':').unwrap_or_default();
                        Failure::System(format!(
                            "cannot attach `{}` to its {} functions through a kprobe_multi link: the kernel could not find or trace one of them ({e}); `steadytrace -l 'kprobe:{pattern}'` lists them",
                            code.point.name,
                            functions.len()
                        ))
                    }
                    _ => failed(e),
                })?,
            ),
            ProbeKind::Uprobe { path, offset, retprobe, .. } => {
                let target = UprobeTarget { path, offset: *offset, retprobe: *retprobe, pid, cpu };
                Attachment::new(Uprobe::attach(prog, loaded.script_uprobe_mode, &target).map_err(failed)?)
            }
            // Per-CPU perf probes and perf-engine intervals are attached by `PerfProbes`.
            _ => continue,
        };
        attachments.push(attachment);
    }
    Ok(attachments)
}

/// How the kernel fires a probe of `kind` (attached here, or by `PerfProbes`), for `-v`.
pub fn describe(kind: &ProbeKind, uprobe_mode: AttachMode) -> String {
    match kind {
        ProbeKind::Interval { .. } => {
            "runs on a CPU-clock perf event on one CPU, moved when that CPU goes offline".into()
        }
        ProbeKind::PerCpu(_) => "runs on perf events on every online CPU, revived after hotplug".into(),
        ProbeKind::Tracepoint(_) => "runs on a tracepoint perf event".into(),
        ProbeKind::RawTracepoint { .. } => "runs on a raw tracepoint".into(),
        ProbeKind::Uprobe { .. } if uprobe_mode == AttachMode::UprobeMulti => {
            "runs on a uprobe_multi link".into()
        }
        ProbeKind::Uprobe { .. } => "runs on a perf uprobe event".into(),
        ProbeKind::Kprobe { .. } => "runs on a perf kprobe event".into(),
        ProbeKind::KprobeMulti { functions, .. } => {
            let n = functions.len();
            format!("runs on one kprobe_multi link on {n} function{}", if n == 1 { "" } else { "s" })
        }
        ProbeKind::Begin | ProbeKind::End => "is run by steadytrace".into(),
    }
}
