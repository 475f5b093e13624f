//! Attaching the programs the kernel fires on events of its own (tracepoints, raw tracepoints, uprobes,
//! kprobes): each probe's provider attaches its program. Probes steadytrace fires itself attach nothing,
//! and per-CPU perf events are kept by `PerfProbes`.

use super::load::{Firing, Loaded};
use super::Failure;
use crate::codegen::Compiled;
use crate::probes::{AttachError, AttachTarget, Attachment};
use std::collections::HashSet;
use std::os::fd::AsFd;

/// An attachment, and the program (its index in the script's programs) it runs.
pub type Attached = (usize, Attachment);

/// Attaches every program the kernel fires that its provider attaches. Functions the kernel refuses to
/// probe (an instruction uprobes cannot step over) are skipped with one warning, as long as the probe
/// type attached somewhere else. Once `stop_requested` says so (a Ctrl-C during a slow attach), the rest
/// is left unattached, so that tracing ends at once with END and the maps.
pub fn attach(
    compiled: &Compiled,
    loaded: &Loaded,
    target: &AttachTarget,
    stop_requested: &dyn Fn() -> bool,
) -> Result<Vec<Attached>, Failure> {
    let mut attachments = vec![];
    // The functions refused (with the probe naming them), and the probe types that attached.
    let mut refused: Vec<(String, (String, String))> = vec![];
    let mut attached_kinds = HashSet::new();
    for (index, (code, firing)) in compiled.programs.iter().zip(&loaded.firings).enumerate() {
        let Firing::Kernel(program) = firing else { continue };
        if stop_requested() {
            break;
        }
        let kind = code.point.provider.kind();
        match code.point.provider.attach(program.as_fd(), target) {
            Ok(attachment) => {
                attachments.extend(attachment.map(|a| (index, a)));
                attached_kinds.insert(kind);
            }
            Err(AttachError::Refused { functions, attached }) => {
                refused.extend(functions.into_iter().map(|f| (code.point.name.clone(), f)));
                if let Some(attached) = attached {
                    attachments.push((index, attached));
                    attached_kinds.insert(kind);
                }
            }
            Err(error) => return Err(error.into()),
        }
    }
    let named = crate::probes::list_refused(refused.iter().map(|(_, function)| function));
    let all_refused = compiled.programs.iter().find(|code| {
        refused.iter().any(|(probe, _)| *probe == code.point.name)
            && !attached_kinds.contains(code.point.provider.kind())
    });
    if let Some(code) = all_refused {
        return Err(Failure::Other(format!("cannot attach `{}`: cannot probe {}", code.point.name, named)));
    }
    if !refused.is_empty() {
        crate::stderr!(
            "steadytrace: cannot probe {} function{}, skipped: {named}",
            refused.len(),
            if refused.len() == 1 { "" } else { "s" },
        );
    }
    Ok(attachments)
}
