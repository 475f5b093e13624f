//! The timer thread: serves every interval probe by calling the interval trigger at absolute
//! CLOCK_MONOTONIC deadlines `start + k * period`. It is pinned to no CPU, so hotplug cannot stop it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::load::Firing;

/// One interval probe as the timer sees it: how to fire it, and its period.
#[derive(Clone)]
pub struct Interval {
    pub firing: Firing,
    pub period: Duration,
}

struct Shared {
    /// Held while firing; `false` once stopped, so that no firing starts after [`Timer::stop`].
    running: Mutex<bool>,
    /// Periods skipped because the thread woke up too late, per interval.
    skipped: Vec<AtomicU64>,
    /// Firings the kernel refused to run, per interval (counted here, reported at exit).
    failed: Vec<AtomicU64>,
    /// Whether the thread got its real-time priority.
    realtime: AtomicBool,
}

pub struct Timer {
    shared: Arc<Shared>,
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of `bpf_ktime_get_ns`.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    // An absolute deadline does not drift, and a signal only makes us sleep again until it.
    // SAFETY: ts is a valid timespec; no remaining time is asked for with TIMER_ABSTIME.
    while unsafe {
        libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut())
    } == libc::EINTR
    {}
}

impl Timer {
    /// Starts serving `intervals`; their first deadlines are one period from now. `priority` is the
    /// thread's SCHED_FIFO priority, 0 for none.
    pub fn start(intervals: Vec<Interval>, priority: u8) -> std::io::Result<Timer> {
        let shared = Arc::new(Shared {
            running: Mutex::new(true),
            skipped: intervals.iter().map(|_| AtomicU64::new(0)).collect(),
            failed: intervals.iter().map(|_| AtomicU64::new(0)).collect(),
            realtime: AtomicBool::new(false),
        });
        let thread_shared = Arc::clone(&shared);
        let start = monotonic_ns();
        thread::Builder::new()
            .name("steadytrace".into())
            .spawn(move || run(&thread_shared, &intervals, start, priority))?;
        Ok(Timer { shared })
    }

    /// Stops firing; when this returns, no trigger call is in progress and none will start.
    pub fn stop(&self) {
        *self.shared.running.lock().unwrap_or_else(|e| e.into_inner()) = false;
    }

    /// Whether the timer thread runs at real-time priority (known once it has started).
    pub fn is_realtime(&self) -> bool {
        self.shared.realtime.load(Ordering::Relaxed)
    }

    /// Periods skipped so far, per interval (in the order given to `start`).
    pub fn skipped(&self) -> Vec<u64> {
        self.shared.skipped.iter().map(|s| s.load(Ordering::Relaxed)).collect()
    }

    /// Firings that failed so far, per interval.
    pub fn failed(&self) -> Vec<u64> {
        self.shared.failed.iter().map(|s| s.load(Ordering::Relaxed)).collect()
    }
}

/// Gives the calling thread SCHED_FIFO at `priority` (1-99); `false` when not permitted.
fn set_realtime(priority: u8) -> bool {
    let param = libc::sched_param { sched_priority: priority as libc::c_int };
    // SAFETY: sched_setscheduler on this thread (tid 0) with a valid parameter.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 }
}

impl Drop for Timer {
    /// A run that ends on an error stops firing too.
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(shared: &Shared, intervals: &[Interval], start: u64, priority: u8) {
    // SAFETY: prctl with PR_SET_TIMERSLACK only changes this thread's timer slack; 1 ns instead of the
    // default 50 us keeps wake-ups close to their deadlines.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    // Busy CPUs would otherwise delay a SCHED_OTHER timer by tens of milliseconds, and by seconds while
    // a CPU goes offline; the lowest real-time priority is enough to go first, and still yields to
    // every real-time task of the machine.
    let realtime = priority > 0 && set_realtime(priority);
    shared.realtime.store(realtime, Ordering::Relaxed);
    let periods: Vec<u64> =
        intervals.iter().map(|i| u64::try_from(i.period.as_nanos()).unwrap_or(u64::MAX).max(1)).collect();
    let mut next: Vec<u64> = vec![1; intervals.len()];
    loop {
        let Some((which, deadline)) = (0..intervals.len())
            .map(|i| (i, start.saturating_add(next[i].saturating_mul(periods[i]))))
            .min_by_key(|&(_, deadline)| deadline)
        else {
            return;
        };
        sleep_until(deadline);
        let running = shared.running.lock().unwrap_or_else(|e| e.into_inner());
        if !*running {
            return;
        }
        // Woken a whole period or more late: fire once, and count (never hide) the periods skipped,
        // instead of a burst of catch-up firings.
        let late = monotonic_ns().saturating_sub(deadline);
        let skipped = late / periods[which];
        if skipped > 0 {
            shared.skipped[which].fetch_add(skipped, Ordering::Relaxed);
        }
        next[which] += 1 + skipped;
        if intervals[which].firing.fire().is_err() {
            shared.failed[which].fetch_add(1, Ordering::Relaxed);
        }
        drop(running);
    }
}
