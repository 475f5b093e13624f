//! The `bpf-timer` engine: an in-kernel hrtimer (`bpf_timer`, Linux 5.15; absolute expiry, 6.7) armed
//! once from userspace and re-armed by its own callback for each absolute deadline. Tracing program
//! types may not use `bpf_timer`, so the timer lives in a classifier program run once on request.

use super::programs::{timer_starter, TimerFields};
use super::scheduling::Scheduling;
use super::{collect, entry, hotplug, Measured, Setup, START_ON_CPU_WAIT};
use crate::runtime::timer::monotonic_ns;
use bpf::timer::TimerMap;
use bpf::{AttachMode, ProgType};
use std::os::fd::AsFd;

/// Where the callback runs: a BPF timer is a soft hrtimer, expired in the timer softirq.
const CONTEXT: &str = "bpf_timer callback (hrtimer softirq)";

pub fn run(setup: &Setup<'_>) -> Result<Measured, String> {
    if !setup.features.has(bpf::features::Feature::BpfTimer) {
        return Err(format!("this kernel ({}) has no bpf_timer (Linux 5.15)", crate::kernel::release()));
    }
    let window = setup.window;
    let ring = collect::ring_buffer(&window)?;
    // The value: struct bpf_timer, then next deadline, period, last deadline.
    let timers = TimerMap::create("bench_timer", 1, 3)
        .map_err(|e| format!("cannot create an array map holding a bpf_timer: {e}"))?;
    let fields = TimerFields {
        next_deadline: timers.fields[0],
        period: timers.fields[1],
        last_deadline: timers.fields[2],
    };
    let value = timers.value(&[window.deadline(1), window.period_ns, window.end_ns()]);
    timers
        .map
        .update(&0u32.to_ne_bytes(), &value)
        .map_err(|e| format!("cannot set up the timer's map: {e}"))?;
    let starter = bpf::load(
        "bench_bpftimer",
        ProgType::SchedCls,
        AttachMode::PerfEvent,
        &timer_starter(&fields),
        &[ring.as_fd(), timers.map.as_fd()],
    )
    .map_err(|e| format!("the kernel refused the bpf_timer program: {} ({})", e.reason, e.error))?;
    // An Ethernet header's worth of packet: all a classifier run on request needs.
    // Armed on the CPU that runs the program: the flapped CPU under --flap, to see whether the timer
    // survives that CPU going offline.
    hotplug::wait_online(setup.perf_cpu, START_ON_CPU_WAIT);
    let run = || starter.run_on_packet(&[0u8; 14]);
    // Where the thread cannot be pinned there, wherever it runs.
    let started = crate::online_cpus::on_cpu(setup.perf_cpu, run)
        .unwrap_or_else(|_| run())
        .map_err(|e| format!("cannot run the bpf_timer program: {e}"))?;
    if started != 0 {
        let errno = -(started as i32);
        return Err(match errno {
            libc::EINVAL => {
                "bpf_timer_start refused an absolute expiry (BPF_F_TIMER_ABS needs Linux 6.7)".into()
            }
            _ => format!("arming the bpf_timer failed: {}", std::io::Error::from_raw_os_error(errno)),
        });
    }
    // The callback stops re-arming after the last deadline; a timer that stopped firing (or was lost
    // with its CPU) shows as missed periods.
    let end = window.end_ns() + window.period_ns + 20_000_000;
    let records = collect::records(
        &ring,
        &window,
        &setup.progress,
        || monotonic_ns() >= end || setup.interrupt.is_set(),
        None,
    )?;
    // Dropping the map (its last user) cancels the timer if it is still armed.
    drop(starter);
    drop(timers);
    Ok(Measured {
        firings: entry::deadline_firings(&records, &window),
        skipped: records.iter().map(|r| r.skipped).sum(),
        entry_cost_ns: None,
        to_program_ns: None,
        thread_cpu_share: None,
        cpus: entry::cpus(&records),
        moved: None,
        scheduling: Some(Scheduling::Kernel(CONTEXT)),
        latencies_only: false,
    })
}
