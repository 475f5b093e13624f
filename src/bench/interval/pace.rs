//! Firing at absolute CLOCK_MONOTONIC deadlines from a thread, as the tracer's timer thread does; and
//! the `sleep` engine, which only sleeps until each deadline and notes when it woke up: the floor every
//! userspace engine stands on.

use super::environment::prepare_pacing_thread;
use super::{Firing, Measured, Setup, Window};
use crate::runtime::timer::{monotonic_ns, Approach};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Calls `fire(k, deadline, at)` at each deadline of `window` until its end or `stop`, arriving at each
/// as `approach` says (`at`: when it was there, at or after the deadline). Woken a whole period or more
/// late, it fires once and skips the periods in between, like the timer thread; returns the periods
/// skipped.
pub fn pace(
    window: &Window,
    stop: &AtomicBool,
    approach: &mut Approach,
    mut fire: impl FnMut(u64, u64, u64),
) -> u64 {
    let (mut k, mut skipped) = (1, 0);
    while k <= window.count && !stop.load(Ordering::Relaxed) {
        let deadline = window.deadline(k);
        approach.arrive(deadline);
        let now = monotonic_ns();
        fire(k, deadline, now);
        approach.entered(monotonic_ns() - now);
        let late_periods = (now - deadline) / window.period_ns;
        skipped += late_periods.min(window.count - k);
        k += 1 + late_periods;
    }
    skipped
}

/// The CPU time of the calling thread.
pub fn thread_cpu_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map_or(0, |t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
}

/// The `sleep` engine: no BPF, the wake-up time itself is the firing.
pub fn run_sleep(setup: &Setup<'_>) -> Result<Measured, String> {
    let window = setup.window;
    let rt = setup.rt;
    let stop = setup.interrupt.flag();
    let thread = std::thread::Builder::new()
        .name("bench-sleep".into())
        .spawn(move || {
            let scheduling = prepare_pacing_thread(rt);
            // Allocated before the first deadline: the loop only writes into it.
            let mut firings = Vec::with_capacity(window.count as usize);
            let (cpu_before, wall_before) = (thread_cpu_ns(), monotonic_ns());
            let skipped = pace(&window, &stop, &mut Approach::exact(), |index, deadline, woke| {
                firings.push(Firing { index, at_ns: woke, deadline_ns: Some(deadline) });
            });
            let cpu_share = (thread_cpu_ns() - cpu_before) as f64
                / monotonic_ns().saturating_sub(wall_before).max(1) as f64;
            (firings, skipped, cpu_share, scheduling)
        })
        .map_err(|e| format!("cannot start a thread: {e}"))?;
    while !thread.is_finished() {
        std::thread::sleep(Duration::from_millis(200));
        setup.progress.show(&window, 0);
    }
    let (firings, skipped, cpu_share, scheduling) =
        thread.join().map_err(|_| "the sleeping thread failed".to_string())?;
    Ok(Measured {
        firings,
        skipped,
        thread_cpu_share: Some(cpu_share),
        scheduling: Some(scheduling),
        ..Measured::default()
    })
}
