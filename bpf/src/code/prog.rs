//! What a program is to the kernel, as plain data: its type and how it will be attached (both named at
//! load time), and the verifier's log read back when it refuses one (`sys/prog.rs` loads).

/// The program types steadytrace loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgType {
    /// kprobes and uprobes, attached through perf events or multi links.
    Kprobe,
    Tracepoint,
    PerfEvent,
    RawTracepoint,
    /// fentry and fexit programs on a BPF trampoline (`BPF_PROG_TYPE_TRACING`).
    Tracing,
    /// Traffic control classifiers: run here only through `BPF_PROG_TEST_RUN` on a made-up packet, as
    /// a program type that may use `bpf_timer` (tracing types may not).
    SchedCls,
}

/// How a kprobe-type program will be attached; the kernel wants to know at load time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachMode {
    PerfEvent,
    UprobeMulti,
    KprobeMulti,
    /// A kprobe_multi link of the session kind (Linux 6.10): the program runs at each function's entry and,
    /// unless its entry run returned non-zero, at its return; `bpf_session_is_return()` tells which.
    KprobeSession,
    /// A trampoline on the function with this BTF id, at its entry or at its exit; `target` says whose BTF
    /// the id is in.
    Trampoline {
        btf_id: u32,
        exit: bool,
        target: TrampolineTarget,
    },
    /// An iterator over the kernel's objects of the kind whose `bpf_iter_NAME` has this BTF id.
    Iterator {
        btf_id: u32,
    },
}

/// Whose function a trampoline is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrampolineTarget {
    /// The kernel's own.
    Kernel,
    /// A kernel module's (its name).
    Module(&'static str),
    /// A loaded BPF program's (its id): the program itself or one of its callbacks.
    Program(u32),
}

impl ProgType {
    /// Its name in a BPF filesystem's `delegate_progs` option (`BPF_PROG_TYPE_*`, in lower case).
    pub fn delegation_name(self) -> &'static str {
        match self {
            ProgType::Kprobe => "kprobe",
            ProgType::Tracepoint => "tracepoint",
            ProgType::PerfEvent => "perf_event",
            ProgType::RawTracepoint => "raw_tracepoint",
            ProgType::Tracing => "tracing",
            ProgType::SchedCls => "sched_cls",
        }
    }
}

impl AttachMode {
    /// The name of the attach type its programs load with, in a BPF filesystem's `delegate_attachs` option
    /// (`BPF_*`, in lower case). Programs that need none load with 0, which is `cgroup_inet_ingress`.
    pub fn delegation_name(self) -> &'static str {
        match self {
            AttachMode::UprobeMulti => "trace_uprobe_multi",
            AttachMode::KprobeMulti => "trace_kprobe_multi",
            AttachMode::KprobeSession => "trace_kprobe_session",
            AttachMode::Trampoline { exit: false, .. } => "trace_fentry",
            AttachMode::Trampoline { exit: true, .. } => "trace_fexit",
            AttachMode::Iterator { .. } => "trace_iter",
            AttachMode::PerfEvent => "cgroup_inet_ingress",
        }
    }
}

/// The instruction the verifier gave up at: the one its reason names, else the last it printed.
pub(crate) fn rejected_insn(reason: &str, log: &str) -> Option<usize> {
    insn_named_in(reason).or_else(|| failing_insn(log))
}

/// An instruction the reason names (`infinite loop detected at insn 17`).
fn insn_named_in(reason: &str) -> Option<usize> {
    let (_, after) = reason.split_once("insn ")?;
    after.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// The index of the last instruction the verifier printed (`12: (85) call ...`).
fn failing_insn(log: &str) -> Option<usize> {
    log.lines().rev().find_map(|line| {
        let (index, rest) = line.split_once(": (")?;
        index.trim().parse().ok().filter(|_| rest.len() > 2)
    })
}

/// What [`reason`] gives for a log that holds no reason.
pub(crate) const NO_REASON: &str = "the verifier gave no reason";

/// The verifier's last words, without its statistics.
pub(crate) fn reason(log: &str) -> String {
    log.lines()
        .rev()
        .map(str::trim)
        .find(|line| {
            // Statistics and register-state dumps come after the reason.
            !line.is_empty()
                && !line.starts_with("processed ")
                && !line.starts_with("verification time")
                && !line.starts_with("stack depth")
                && !line.starts_with("max_states")
                && !line.starts_with("cur state:")
                && !line.starts_with("old state:")
        })
        .unwrap_or(NO_REASON)
        .to_string()
}

/// Whether the verifier's log says it does not know a helper, or does not allow it in the program's
/// type: "program of this type cannot use helper" (6.x), "unknown func", "invalid func" (before 5.x).
pub(crate) fn helper_refused(log: &str) -> bool {
    ["program of this type cannot use helper", "unknown func", "invalid func"]
        .iter()
        .any(|says| log.contains(says))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "0: R1=ctx() R10=fp0
0: (b7) r0 = 0                        ; R0_w=0
1: (79) r2 = *(u64 *)(r10 -8)
invalid read from stack off -8+0 size 8
processed 2 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0
";

    #[test]
    fn skips_state_dumps_after_the_reason() {
        let log = "16: (85) call bpf_ringbuf_output#130\ninfinite loop detected at insn 17\ncur state: R0=scalar()\nold state: R0=scalar()\nprocessed 38 insns\n";
        assert_eq!(reason(log), "infinite loop detected at insn 17");
        assert_eq!(insn_named_in(&reason(log)), Some(17));
    }

    #[test]
    fn finds_the_rejected_instruction_and_the_reason() {
        assert_eq!(failing_insn(LOG), Some(1));
        assert_eq!(reason(LOG), "invalid read from stack off -8+0 size 8");
    }
}
