//! The `perf` engine: a CPU-clock perf event on one CPU samples every period and runs the recording
//! program, as bpftrace's interval probes (and `--interval-engine perf`) do. When its CPU goes offline
//! the event is reopened on another online CPU, as the tracer does; the periods in between are lost.
//! There is no intended deadline, only the period, so lateness is not defined.

use super::programs::{recorder, Record};
use super::scheduling::Scheduling;
use super::{collect, entry, hotplug, Firing, Measured, Setup, Window, START_ON_CPU_WAIT};
use crate::runtime::cpus::CpuWatcher;
use crate::runtime::timer::monotonic_ns;
use bpf::perf::{PerfEvent, PerfEventSpec, Sample, SW_CPU_CLOCK, TYPE_SOFTWARE};
use bpf::{AttachMode, ProgType, Program};
use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::os::fd::AsFd;

/// Where a cpu-clock sample runs: the perf event's hrtimer, in interrupt context on its CPU.
const CONTEXT: &str = "perf cpu-clock sample (hrtimer interrupt)";

pub fn run(setup: &Setup<'_>) -> Result<Measured, String> {
    let window = setup.window;
    let ring = collect::ring_buffer(&window)?;
    let program =
        bpf::load("bench_perf", ProgType::PerfEvent, AttachMode::PerfEvent, &recorder(None), &[ring.as_fd()])
            .map_err(|e| format!("the kernel refused the perf event program: {} ({})", e.reason, e.error))?;
    let spec = PerfEventSpec {
        type_: TYPE_SOFTWARE,
        config: SW_CPU_CLOCK,
        config1: 0,
        config2: 0,
        sample: Sample::Period(window.period_ns),
        bp_type: 0,
        inherit: false,
    };
    let mut watcher = CpuWatcher::new().map_err(|e| format!("cannot watch the online CPUs: {e}"))?;
    // The window starts when sampling does: the first sample is due one period later.
    let start = monotonic_ns();
    // The CPU asked for (waited for while --flap has it offline), or, when it is still offline, any online
    // one.
    hotplug::wait_online(setup.perf_cpu, START_ON_CPU_WAIT);
    let (event, first_cpu) = open_on_any(&spec, &program, setup.perf_cpu, watcher.online())
        .map_err(|e| format!("cannot open a cpu-clock perf event on any online CPU: {e}"))?;
    let home = Cell::new(first_cpu);
    let event = RefCell::new(event);
    let moved = Cell::new(0u64);
    let window = Window { start_ns: start, ..window };
    let wake_fd = watcher.wake_fd();
    let watch = collect::Watch {
        fd: wake_fd,
        every_ms: 5,
        on_wake: Box::new(|| {
            let Ok(change) = watcher.poll() else { return };
            if !change.went_offline.contains(&home.get()) {
                return;
            }
            // Its CPU went offline (and may be back already: a dead event either way). Any online CPU
            // will do, the same one first if it is back.
            if let Ok((new, cpu)) = open_on_any(&spec, &program, home.get(), watcher.online()) {
                *event.borrow_mut() = new;
                home.set(cpu);
                moved.set(moved.get() + 1);
            }
        }),
    };
    let end = window.end_ns() + window.period_ns / 2;
    let records = collect::records(
        &ring,
        &window,
        &setup.progress,
        || monotonic_ns() >= end || setup.interrupt.is_set(),
        Some(watch),
    )?;
    drop(event);
    Ok(Measured {
        firings: numbered(&records, &window),
        skipped: 0,
        entry_cost_ns: None,
        to_program_ns: None,
        thread_cpu_share: None,
        cpus: entry::cpus(&records),
        moved: Some(moved.get()),
        scheduling: Some(Scheduling::Kernel(CONTEXT)),
        latencies_only: false,
    })
}

/// An enabled event on `preferred` if it is online and takes one, else on the first online CPU that
/// does.
fn open_on_any(
    spec: &PerfEventSpec,
    program: &Program,
    preferred: u32,
    online: &BTreeSet<u32>,
) -> std::io::Result<(PerfEvent, u32)> {
    let mut cpus: Vec<u32> = online.iter().copied().collect();
    cpus.sort_by_key(|&cpu| cpu != preferred);
    let mut last = std::io::Error::other("no CPU is online");
    for cpu in cpus {
        let opened = PerfEvent::open(spec, -1, cpu as i32)
            .and_then(|e| e.attach(program.as_fd()))
            .and_then(|e| e.enable().map(|()| e));
        match opened {
            Ok(event) => return Ok((event, cpu)),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Numbers the samples by period: each one is as many periods after the one before as the time
/// between them holds, rounded (at least one). Samples past the window's count are left out.
fn numbered(records: &[Record], window: &Window) -> Vec<Firing> {
    let mut firings: Vec<Firing> = Vec::with_capacity(records.len());
    let mut last: Option<(u64, u64)> = None;
    for record in records.iter().filter(|r| r.at_ns > window.start_ns) {
        let index = match last {
            None => ((record.at_ns - window.start_ns + window.period_ns / 2) / window.period_ns).max(1),
            Some((index, at)) => {
                index + ((record.at_ns.saturating_sub(at) + window.period_ns / 2) / window.period_ns).max(1)
            }
        };
        if index > window.count {
            break;
        }
        firings.push(Firing { index, at_ns: record.at_ns, deadline_ns: None });
        last = Some((index, record.at_ns));
    }
    firings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(at_ns: u64) -> Record {
        Record { deadline_ns: 0, at_ns, skipped: 0, cpu: 0 }
    }

    #[test]
    fn samples_are_numbered_by_the_periods_between_them() {
        let window = Window { start_ns: 1000, period_ns: 100, count: 5 };
        // On time, slightly late, then two periods missing, then one past the window.
        let records: Vec<Record> = [1100, 1203, 1299, 1601, 1700].into_iter().map(record).collect();
        let indices: Vec<u64> = numbered(&records, &window).iter().map(|f| f.index).collect();
        assert_eq!(indices, [1, 2, 3]);
        let window = Window { count: 10, ..window };
        let indices: Vec<u64> = numbered(&records, &window).iter().map(|f| f.index).collect();
        assert_eq!(indices, [1, 2, 3, 6, 7]);
    }
}
