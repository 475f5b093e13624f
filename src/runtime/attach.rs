//! Attaching the programs of tracepoint, raw tracepoint, uprobe and kprobe probes (a perf kprobe event
//! per function, or one kprobe_multi link for a wildcard). None of these is tied to a CPU: the kernel
//! runs a trace event's programs on whatever CPU it fires, so CPU hotplug does not affect them.

use super::load::{Firing, Loaded};
use super::{system, Failure};
use crate::codegen::Compiled;
use crate::probes::ProbeKind;
use bpf::kprobe::attach_multi;
use bpf::perf::{attach_raw_tracepoint, attach_trace_event, TraceEvent};
use bpf::uprobe::{refusal_reason, refuses_offset, MultiTarget};
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
    // Functions of one-function uprobes (a wildcard without uprobe_multi links) the kernel refused.
    let (mut refused, mut uprobes) = (vec![], 0);
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
            ProbeKind::UprobeMulti { path, functions, offsets, retprobe } => {
                let target = MultiTarget { path, offsets, retprobe: *retprobe, pid };
                let attached = bpf::uprobe::attach_multi(prog, &target).map_err(failed)?;
                if !attached.refused.is_empty() {
                    eprintln!("steadytrace: {}", refused_warning(&code.point.name, functions, &attached.refused));
                }
                Attachment::new(attached.links)
            }
            ProbeKind::Uprobe { path, offset, retprobe, .. } => {
                let target = UprobeTarget { path, offset: *offset, retprobe: *retprobe, pid, cpu };
                match Uprobe::attach(prog, loaded.script_uprobe_mode, &target) {
                    Ok(uprobe) => {
                        uprobes += 1;
                        Attachment::new(uprobe)
                    }
                    Err(e) if refuses_offset(&e) => {
                        refused.push((code.point.name.clone(), e));
                        continue;
                    }
                    Err(e) => return Err(failed(e)),
                }
            }
            // Per-CPU perf probes and perf-engine intervals are attached by `PerfProbes`.
            _ => continue,
        };
        attachments.push(attachment);
    }
    if let Some((name, error)) = refused.first() {
        if uprobes == 0 {
            return Err(Failure::System(format!("cannot attach `{name}`: {}", refusal_reason(error))));
        }
        let names: Vec<String> =
            refused.iter().map(|(name, error)| format!("{name} ({})", refusal_reason(error))).collect();
        eprintln!(
            "steadytrace: the kernel refused to probe {} of {} functions, skipped: {}",
            refused.len(),
            refused.len() + uprobes,
            names.join(", ")
        );
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
        ProbeKind::UprobeMulti { functions, .. } => {
            let n = functions.len();
            format!("runs on one uprobe_multi link on {n} function{}", if n == 1 { "" } else { "s" })
        }
        ProbeKind::Kprobe { .. } => "runs on a perf kprobe event".into(),
        ProbeKind::KprobeMulti { functions, .. } => {
            let n = functions.len();
            format!("runs on one kprobe_multi link on {n} function{}", if n == 1 { "" } else { "s" })
        }
        ProbeKind::Begin | ProbeKind::End => "is run by steadytrace".into(),
    }
}

/// The one warning about the functions of a uprobe_multi probe that the kernel refused to probe (each
/// with the reason, grouped by reason).
fn refused_warning(probe: &str, functions: &[String], refused: &[(usize, std::io::Error)]) -> String {
    let mut by_reason: Vec<(String, Vec<&str>)> = vec![];
    for (index, error) in refused {
        let reason = refusal_reason(error);
        match by_reason.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, names)) => names.push(&functions[*index]),
            None => by_reason.push((reason, vec![&functions[*index]])),
        }
    }
    let reasons: Vec<String> =
        by_reason.into_iter().map(|(reason, names)| format!("{} ({reason})", names.join(", "))).collect();
    format!(
        "the kernel refused to probe {} of the {} functions of `{probe}`, which runs on the others: {}",
        refused.len(),
        functions.len(),
        reasons.join("; ")
    )
}
