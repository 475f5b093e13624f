//! The `timer` and `trigger` engines: a thread sleeping until each deadline enters BPF from userspace,
//! through `BPF_PROG_TEST_RUN` or through a call of the trigger function carrying a uprobe. The deadline
//! travels as the program's first argument; the program takes the time and sends both.

use super::environment::prepare_pacing_thread;
use super::pace::{pace, thread_cpu_ns};
use super::programs::{recorder, Record};
use super::{collect, Firing, Measured, Setup, Window};
use crate::probes::trigger as trigger_probe;
use crate::runtime::timer::{monotonic_ns, Approach};
use bpf::{AttachMode, Map, ProgType, Program};
use std::os::fd::AsFd;
use std::time::Duration;

pub fn run_timer(setup: &Setup<'_>) -> Result<Measured, String> {
    if !setup.features.has(bpf::features::Feature::RunOnRequest) {
        return Err(
            "this kernel cannot run raw tracepoint programs on request (BPF_PROG_TEST_RUN, Linux 5.10)"
                .into(),
        );
    }
    let ring = collect::ring_buffer(&setup.window)?;
    let program = load(&ring, ProgType::RawTracepoint, AttachMode::PerfEvent, Some(0))?;
    enter_at_deadlines(setup, &ring, true, |deadline| {
        // The raw tracepoint context: its first argument.
        let _ = program.run_with_context(&deadline.to_ne_bytes());
    })
}

pub fn run_trigger(setup: &Setup<'_>) -> Result<Measured, String> {
    let ring = collect::ring_buffer(&setup.window)?;
    let mode = trigger_probe::attach_mode(setup.features);
    let program = load(&ring, ProgType::Kprobe, mode, Some(trigger_probe::FIRST_ARG_OFFSET))?;
    let _uprobe = trigger_probe::attach(program.as_fd(), mode)
        .map_err(|e| format!("cannot attach a uprobe to the trigger function: {e}"))?;
    // The tracer fires through the trigger where programs cannot run on request: nothing to warm with.
    enter_at_deadlines(setup, &ring, false, ::trigger::fire)
}

fn load(ring: &Map, kind: ProgType, mode: AttachMode, deadline_at: Option<i16>) -> Result<Program, String> {
    bpf::load("bench_record", kind, mode, &recorder(deadline_at), &[ring.as_fd()])
        .map_err(|e| format!("the kernel refused the recording program: {} ({})", e.reason, e.error))
}

/// Runs `enter(deadline)` at each deadline on a thread of its own, arriving at the deadlines as the
/// tracer's timer thread does (`runtime::timer::Approach`) and timing each entry; reads the records
/// meanwhile.
fn enter_at_deadlines(
    setup: &Setup<'_>,
    ring: &Map,
    warm: bool,
    enter: impl Fn(u64) + Sync,
) -> Result<Measured, String> {
    let window = setup.window;
    let stop = setup.interrupt.flag();
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name("bench-enter".into())
            .spawn_scoped(scope, || {
                let scheduling = prepare_pacing_thread(setup.rt);
                let periods = [Duration::from_nanos(window.period_ns)];
                let mut approach = Approach::for_periods(&periods);
                if warm {
                    approach = approach.warming_up(&periods);
                }
                // Allocated before the first deadline: the loop only writes into them. `entered[k]`:
                // when the entry for period k began.
                let mut costs: Vec<u64> = Vec::with_capacity(window.count as usize);
                let mut entered = vec![0u64; window.count as usize + 1];
                let (cpu_before, wall_before) = (thread_cpu_ns(), monotonic_ns());
                let skipped = pace(&window, &stop, &mut approach, |k, deadline, _| {
                    let before = monotonic_ns();
                    enter(deadline);
                    costs.push(monotonic_ns() - before);
                    entered[k as usize] = before;
                });
                let cpu_share = (thread_cpu_ns() - cpu_before) as f64
                    / monotonic_ns().saturating_sub(wall_before).max(1) as f64;
                (skipped, median(&mut costs), entered, cpu_share, scheduling)
            })
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        let records = collect::records(ring, &window, &setup.progress, || thread.is_finished(), None)?;
        let (skipped, entry_cost, entered, cpu_share, scheduling) =
            thread.join().map_err(|_| "the firing thread failed".to_string())?;
        let firings = deadline_firings(&records, &window);
        // From the call to the program's own clock read: the part of the entry before the program.
        let mut to_program: Vec<u64> = firings
            .iter()
            .filter_map(|f| {
                entered.get(f.index as usize).filter(|&&b| b > 0).map(|&b| f.at_ns.saturating_sub(b))
            })
            .collect();
        Ok(Measured {
            firings,
            skipped,
            entry_cost_ns: Some(entry_cost),
            to_program_ns: (!to_program.is_empty()).then(|| median(&mut to_program)),
            thread_cpu_share: Some(cpu_share),
            cpus: cpus(&records),
            moved: None,
            scheduling: Some(scheduling),
            latencies_only: false,
        })
    })
}

/// The median entry: the typical cost, which a few entries preempted on a busy machine do not move.
fn median(costs: &mut [u64]) -> f64 {
    costs.sort_unstable();
    costs.get(costs.len() / 2).map_or(0.0, |&c| c as f64)
}

/// Firings of records that carry their deadline, in the window.
pub fn deadline_firings(records: &[Record], window: &Window) -> Vec<Firing> {
    records
        .iter()
        .filter(|r| r.deadline_ns > window.start_ns && r.deadline_ns <= window.end_ns())
        .map(|r| Firing {
            index: (r.deadline_ns - window.start_ns) / window.period_ns,
            at_ns: r.at_ns,
            deadline_ns: Some(r.deadline_ns),
        })
        .collect()
}

/// The CPUs the records were taken on.
pub fn cpus(records: &[Record]) -> Vec<u32> {
    let set: std::collections::BTreeSet<u32> = records.iter().map(|r| r.cpu).collect();
    set.into_iter().collect()
}
