//! Probes sampling on BPF timers (`profile` where perf events are refused: `probes/profile_timer.rs`,
//! `bpf::cpu_timer`), kept through CPU hotplug by `percpu.rs` as it keeps perf events: a CPU's "event" is
//! its timer. Opening it names the CPU; enabling arms it, from this thread pinned to that CPU for the
//! moment (a pinned timer stays on the CPU that armed it); its "enabled time" advances while its deadline
//! is still ahead (the kernel moves an offline CPU's timers away, where they stop); closing cancels it.

use crate::probes::CpuTimer;
use bpf::cpu_timer::CpuTimers;
use bpf::Program;
use std::collections::BTreeSet;
use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;

/// How late past its deadline and a period a timer may be before it counts as stopped: its softirq may
/// be held up (ksoftirqd busy, interrupts off). More than the liveness sweep's 50 ms, so that a stopped
/// timer's stale deadline is never mistaken for progress.
const GRACE_NS: u64 = 50_000_000;

/// One probe's timers.
pub struct TimerProbe {
    name: String,
    timers: Arc<CpuTimers>,
    /// The CPUs this process may run on, and so arm a timer from.
    allowed: BTreeSet<u32>,
    /// CPUs said to be out of reach, each said once.
    said: BTreeSet<u32>,
    /// Possible CPUs: each CPU's deadlines are offset by its share of the period, so that CPUs are not
    /// sampled all at once.
    cpus: u64,
}

/// A CPU's timer; dropping it cancels the timer.
pub struct ArmedTimer {
    timers: Arc<CpuTimers>,
    cpu: u32,
}

impl Drop for ArmedTimer {
    fn drop(&mut self) {
        let _ = self.timers.disarm(self.cpu);
    }
}

impl TimerProbe {
    /// Attaches the sampling of `name`'s `program`; no timer is armed yet.
    pub fn start(name: &str, program: &Program, timer: CpuTimer) -> io::Result<TimerProbe> {
        let timers = CpuTimers::start(program.as_fd(), timer.period_ns, timer.softexpires)
            .map_err(|e| io::Error::other(format!("cannot start the BPF timers of `{name}`: {e}")))?;
        Ok(TimerProbe {
            name: name.to_string(),
            timers: Arc::new(timers),
            allowed: crate::online_cpus::allowed()?,
            said: BTreeSet::new(),
            cpus: libbpf_rs::num_possible_cpus().unwrap_or(1).max(1) as u64,
        })
    }

    /// `cpu`'s timer, not armed yet. ENODEV (as for a CPU gone offline) where this process may not run on
    /// `cpu`, said once: its timer could not be armed.
    pub fn open(&mut self, cpu: u32) -> io::Result<ArmedTimer> {
        if !self.allowed.contains(&cpu) {
            if self.said.insert(cpu) {
                crate::stderr!(
                    "steadytrace: `{}` does not sample cpu{cpu}: its BPF timer is armed from a thread running there, and steadytrace may not run on cpu{cpu} (its CPU affinity or cpuset)",
                    self.name
                );
            }
            return Err(io::Error::from_raw_os_error(libc::ENODEV));
        }
        Ok(ArmedTimer { timers: Arc::clone(&self.timers), cpu })
    }

    /// Arms `timer` for its first deadline, a period (and the CPU's share of one) from now.
    pub fn enable(&self, timer: &ArmedTimer) -> io::Result<()> {
        let period = self.timers.period_ns();
        let first = super::timer::monotonic_ns() + period + period / self.cpus * u64::from(timer.cpu);
        match crate::online_cpus::on_cpu(timer.cpu, || self.timers.arm_here(timer.cpu, first)) {
            Ok(armed) => armed,
            // Not up yet (or gone again): tried again as an event on a CPU coming up is.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                Err(io::Error::from_raw_os_error(libc::ENODEV))
            }
            Err(e) => Err(e),
        }
    }

    /// Whether `timer` is one of this probe's.
    pub fn owns(&self, timer: &ArmedTimer) -> bool {
        Arc::ptr_eq(&self.timers, &timer.timers)
    }

    /// Now, while the timer's deadline is ahead (or only just past); else its stale deadline, which
    /// stands still, as a dead perf event's enabled time does.
    pub fn enabled_time(&self, timer: &ArmedTimer) -> io::Result<u64> {
        let next = self.timers.next_deadline(timer.cpu)?;
        let now = super::timer::monotonic_ns();
        let alive = next != 0 && now < next + self.timers.period_ns() + GRACE_NS;
        Ok(if alive { now } else { next })
    }
}
