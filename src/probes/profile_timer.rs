//! `profile:*` where perf events are refused (a rootless container: `kernel.perf_event_paranoid` 2 and no
//! capability that counts; a seccomp profile denying perf_event_open): a BPF timer on every online CPU,
//! pinned there (Linux 6.7), whose expiry runs the probe's program as a raw tracepoint program on
//! `hrtimer_expire_entry`, in the context the timer interrupted (`bpf::cpu_timer`). `pid`, `comm`,
//! `ustack`, `cpu`, maps and output are those of the interrupted task, as with perf events; `kstack`
//! starts after the softirq's frames, at the interrupted code ([`super::softirq_frames`]). The runtime arms,
//! revives and cancels the timers as it keeps perf events (`runtime/cpu_timers.rs`).

use super::{AttachPoint, CpuTimer, KernelStackStart, Provider};
use crate::kernel::KernelTypes;
use crate::lang::{Diagnostic, Span};
use bpf::features::{Feature, Features};
use bpf::ProgType;

/// What samples `profile` probes in this run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// A CPU-clock perf event on each CPU, as bpftrace samples.
    Perf,
    /// A BPF timer on each CPU.
    Timer,
}

/// The variable that chooses the engine (`perf` or `timer`) whatever perf_event_open allows.
const ENGINE_VAR: &str = "STEADYTRACE_PROFILE_ENGINE";

/// The shortest period a BPF timer samples at: 100,000 samples a second, perf_event_max_sample_rate's
/// default.
const SHORTEST_PERIOD_NS: u64 = 10_000;

/// Which engine samples `profile` probes in this run, and why: `STEADYTRACE_PROFILE_ENGINE` decides,
/// else perf events where perf_event_open is allowed, else BPF timers where the kernel pins them.
pub fn chosen(features: &Features) -> (Engine, String) {
    match std::env::var(ENGINE_VAR).as_deref() {
        Ok("timer") => (Engine::Timer, format!("{ENGINE_VAR}=timer")),
        Ok("perf") => (Engine::Perf, format!("{ENGINE_VAR}=perf")),
        _ => match crate::privilege::perf_event_open_denied() {
            None => (Engine::Perf, "perf_event_open is allowed".into()),
            Some(error) if features.has(Feature::TimerCpuPin) => {
                (Engine::Timer, format!("perf_event_open is refused: {error}"))
            }
            Some(error) => (
                Engine::Perf,
                format!(
                    "perf_event_open is refused ({error}), and this kernel ({}) does not pin BPF timers to a CPU (Linux 6.7)",
                    crate::kernel::release()
                ),
            ),
        },
    }
}

/// What a refused perf_event_open adds for `profile` probes on a kernel that lacks the other way.
pub fn when_perf_denied(features: &Features) -> &'static str {
    if features.has(Feature::TimerCpuPin) {
        ""
    } else {
        " Linux 6.7 and later would sample profile probes without perf events, on a BPF timer per CPU \
         (BPF_F_TIMER_CPU_PIN; through a BPF token, one that also delegates sched_cls programs, which arm \
         the timers)."
    }
}

/// `profile` on BPF timers.
#[derive(Debug)]
pub struct ProfileTimer {
    timer: CpuTimer,
    /// Why this engine, for `-v`.
    reason: String,
}

impl ProfileTimer {
    /// Samples every `period_ns`; an error at `span` where this kernel cannot.
    pub fn new(
        period_ns: u64,
        reason: String,
        span: Span,
        kernel: &KernelTypes,
    ) -> Result<ProfileTimer, Diagnostic> {
        if !kernel.features.has(Feature::TimerCpuPin) {
            let construct = "`profile` on BPF timers";
            return Err(crate::kernel::needs(&kernel.features, Feature::TimerCpuPin, construct, span));
        }
        if period_ns < SHORTEST_PERIOD_NS {
            return Err(Diagnostic::error(
                span,
                "BPF timers sample at most 100000 times a second (a period of 10 us)",
            )
            .with_help("for example `profile:hz:999`"));
        }
        let softexpires = kernel
            .vmlinux
            .record_id(false, "hrtimer")
            .and_then(|id| kernel.vmlinux.member(id, "_softexpires").ok())
            .and_then(|member| i16::try_from(member.offset).ok())
            .ok_or_else(|| {
                Diagnostic::error(
                    span,
                    "`profile` on BPF timers needs the kernel's BTF (struct hrtimer), which this kernel lacks",
                )
            })?;
        Ok(ProfileTimer { timer: CpuTimer { period_ns, softexpires }, reason })
    }
}

/// The attach point of `profile:UNIT:N` on BPF timers.
pub fn point(
    period_ns: u64,
    reason: String,
    name: String,
    span: Span,
    kernel: &KernelTypes,
) -> Result<AttachPoint, Diagnostic> {
    Ok(AttachPoint::new(ProfileTimer::new(period_ns, reason, span, kernel)?, name, span))
}

impl Provider for ProfileTimer {
    fn kind(&self) -> &'static str {
        "profile"
    }

    fn prog_type(&self) -> ProgType {
        ProgType::RawTracepoint
    }

    fn fires_in_any_process(&self) -> bool {
        true
    }

    fn cpu_timer(&self) -> Option<CpuTimer> {
        Some(self.timer)
    }

    fn kernel_stack_start(&self) -> Option<KernelStackStart> {
        super::softirq_frames::end(self.timer.softexpires).map(|after| KernelStackStart { after })
    }

    fn describe(&self) -> String {
        format!(
            "runs on a BPF timer on every online CPU, re-armed after hotplug, sampling in the timer's softirq \
             through the raw tracepoint {} ({})",
            bpf::cpu_timer::TRACEPOINT,
            self.reason
        )
    }
}
