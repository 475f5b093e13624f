//! Attaching the programs the kernel fires on events of its own (tracepoints, raw tracepoints, uprobes,
//! kprobes): each probe's provider attaches its program. Probes steadytrace fires itself attach nothing,
//! and per-CPU perf events are kept by `PerfProbes`. Detaching is dropping: the attachments go in the
//! reverse order of their making.

use super::Failure;
use crate::probes::{AttachError, AttachPoint, AttachTarget, Attachment};
use std::collections::HashSet;
use std::os::fd::BorrowedFd;

/// A program the kernel fires: its index in the script's programs, its probe, and the loaded program.
pub struct ToAttach<'a> {
    pub index: usize,
    pub point: &'a AttachPoint,
    pub program: BorrowedFd<'a>,
}

/// The kernel's attachments of a trace, each with the index of the program it runs, in the order made.
#[derive(Default)]
pub struct Attachments(Vec<(usize, Attachment)>);

impl Attachments {
    /// Detaches the programs `detach` names (watchpoints `unwatch()` removed).
    pub fn detach_where(&mut self, detach: impl Fn(usize) -> bool) {
        let (gone, kept) = std::mem::take(&mut self.0).into_iter().partition(|(index, _)| detach(*index));
        self.0 = kept;
        Attachments(gone).detach();
    }

    /// Detaches every program, the last attached first.
    pub fn detach(self) {}
}

impl Drop for Attachments {
    fn drop(&mut self) {
        while self.0.pop().is_some() {}
    }
}

/// Attaches `probes`, in their order. Functions the kernel refuses to probe (an instruction uprobes cannot
/// step over) are skipped with one warning, as long as the probe type attached somewhere else. Once
/// `stop_requested` says so (a Ctrl-C during a slow attach), the rest is left unattached, so that tracing
/// ends at once with END and the maps.
pub fn attach(
    probes: &[ToAttach<'_>],
    target: &AttachTarget,
    stop_requested: &dyn Fn() -> bool,
) -> Result<Attachments, Failure> {
    let mut attachments = Attachments::default();
    // The functions refused (with the probe naming them), and the probe types that attached.
    let mut refused: Vec<(&str, (String, String))> = vec![];
    let mut attached_kinds = HashSet::new();
    for probe in probes {
        if stop_requested() {
            break;
        }
        let kind = probe.point.provider.kind();
        match probe.point.provider.attach(probe.program, target) {
            Ok(attachment) => {
                attachments.0.extend(attachment.map(|a| (probe.index, a)));
                attached_kinds.insert(kind);
            }
            Err(AttachError::Refused { functions, attached }) => {
                refused.extend(functions.into_iter().map(|f| (probe.point.name.as_str(), f)));
                if let Some(attached) = attached {
                    attachments.0.push((probe.index, attached));
                    attached_kinds.insert(kind);
                }
            }
            Err(error) => return Err(error.into()),
        }
    }
    let named = crate::probes::list_refused(refused.iter().map(|(_, function)| function));
    let all_refused = probes.iter().map(|p| p.point).find(|point| {
        refused.iter().any(|(probe, _)| *probe == point.name)
            && !attached_kinds.contains(point.provider.kind())
    });
    if let Some(point) = all_refused {
        return Err(Failure::Other(format!("cannot attach `{}`: cannot probe {}", point.name, named)));
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

#[cfg(test)]
mod tests {
    use super::super::fake::{Call, FakeKernel};
    use super::*;

    fn attach_all(kernel: &FakeKernel, names: &[&str], stop_after: usize) -> Result<Attachments, Failure> {
        let points = kernel.probes(names);
        let program = kernel.program();
        let probes: Vec<ToAttach> =
            points.iter().enumerate().map(|(index, point)| ToAttach { index, point, program }).collect();
        let target = AttachTarget { pid: None, cpu: 0 };
        attach(&probes, &target, &|| kernel.attached() >= stop_after)
    }

    #[test]
    fn probes_attach_in_order_and_detach_in_reverse() {
        let kernel = FakeKernel::default();
        let attachments = attach_all(&kernel, &["a", "b", "c"], usize::MAX).unwrap();
        attachments.detach();
        assert_eq!(
            kernel.calls(),
            [
                Call::Attach("a".into()),
                Call::Attach("b".into()),
                Call::Attach("c".into()),
                Call::Detach("c".into()),
                Call::Detach("b".into()),
                Call::Detach("a".into()),
            ]
        );
    }

    #[test]
    fn a_stop_during_attaching_leaves_the_rest_unattached() {
        let kernel = FakeKernel::default();
        let attachments = attach_all(&kernel, &["a", "b", "c"], 1).unwrap();
        drop(attachments);
        assert_eq!(kernel.calls(), [Call::Attach("a".into()), Call::Detach("a".into())]);
    }

    #[test]
    fn unwatching_detaches_only_the_probes_named() {
        let kernel = FakeKernel::default();
        let mut attachments = attach_all(&kernel, &["a", "b", "c"], usize::MAX).unwrap();
        attachments.detach_where(|index| index != 1);
        assert_eq!(kernel.calls()[3..], [Call::Detach("c".into()), Call::Detach("a".into())]);
        drop(attachments);
        assert_eq!(kernel.calls().last(), Some(&Call::Detach("b".into())));
    }

    #[test]
    fn a_refused_probe_stops_the_trace_and_detaches_what_attached() {
        let kernel = FakeKernel::default();
        kernel.refuse("b");
        let Err(failure) = attach_all(&kernel, &["a", "b", "c"], usize::MAX) else { panic!("b attached") };
        assert!(failure.to_string().contains("refused"), "{failure}");
        assert_eq!(kernel.calls(), [Call::Attach("a".into()), Call::Detach("a".into())]);
    }
}
