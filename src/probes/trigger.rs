//! Running probes on steadytrace's own request: BEGIN, END and interval probes.
//!
//! Where the kernel can (Linux 5.10 and later) they run through `BPF_PROG_TEST_RUN`: nothing is
//! attached, so there is no uprobe registration at start-up and no detach to wait for at exit, and a
//! firing costs about 0.5 µs. Elsewhere one uprobe on this process's trigger function runs a
//! dispatcher program, which tail-calls the program in the slot the trigger was called with: one
//! attachment serves every such probe (each uprobe attach and detach waits for an RCU grace period,
//! tens of milliseconds), and a firing runs one program (about 10 µs, the cost of the uprobe).

use bpf::features::{Feature, Features};
use bpf::{AttachMode, Uprobe, UprobeTarget};
use std::io;
use std::os::fd::BorrowedFd;

/// Offset of the first argument register in the uprobe context (`struct pt_regs`).
pub const FIRST_ARG_OFFSET: i16 = bpf::arch::HOST.args[0];

/// Whether probes can run on request (`BPF_PROG_TEST_RUN` of raw tracepoint programs, Linux 5.10).
/// `STEADYTRACE_TRIGGER=uprobe` sends them through the trigger's uprobe on any kernel, so that tests
/// and benchmarks cover that path too.
pub fn on_request_supported(features: &Features) -> bool {
    let forced_uprobe = std::env::var("STEADYTRACE_TRIGGER").is_ok_and(|v| v == "uprobe");
    !forced_uprobe && features.has(Feature::RunOnRequest)
}

/// How uprobes attach on this kernel: uprobe_multi links need no `perf_event_open`, so they also work
/// where a container denies it; kernels before 6.6 lack them and get perf uprobe events.
/// `STEADYTRACE_UPROBE_ATTACH=perf` takes the perf path on any kernel, so that tests cover it.
pub fn attach_mode(features: &Features) -> AttachMode {
    let forced_perf = std::env::var("STEADYTRACE_UPROBE_ATTACH").is_ok_and(|v| v == "perf");
    if !forced_perf && features.has(Feature::UprobeMulti) {
        AttachMode::UprobeMulti
    } else {
        AttachMode::PerfEvent
    }
}

/// Attaches the dispatcher to the trigger, for this process only: another tracer calling its own copy
/// of the trigger never runs our programs.
pub fn attach(dispatcher: BorrowedFd<'_>, mode: AttachMode) -> io::Result<Uprobe> {
    let location = trigger::location()?;
    let target = UprobeTarget {
        path: &location.path,
        offset: location.offset,
        retprobe: false,
        pid: Some(std::process::id()),
        cpu: 0,
        ref_ctr_offset: 0,
    };
    Uprobe::attach(dispatcher, mode, &target)
}
