//! The timer thread: serves every interval probe by calling the interval trigger at absolute
//! CLOCK_MONOTONIC deadlines `start + k * period`. It is pinned to no CPU, so hotplug cannot stop it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::time::TimeSpec;
use nix::time::{clock_nanosleep, ClockId, ClockNanosleepFlags};

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
    let ts = ClockId::CLOCK_MONOTONIC.now().expect("CLOCK_MONOTONIC exists on every Linux");
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}

fn sleep_until(deadline_ns: u64) {
    let ts = TimeSpec::from(Duration::from_nanos(deadline_ns));
    // An absolute deadline does not drift, and a signal only makes us sleep again until it.
    while clock_nanosleep(ClockId::CLOCK_MONOTONIC, ClockNanosleepFlags::TIMER_ABSTIME, &ts)
        == Err(Errno::EINTR)
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
    crate::sys::set_fifo_priority(priority).is_ok()
}

impl Drop for Timer {
    /// A run that ends on an error stops firing too.
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(shared: &Shared, intervals: &[Interval], start: u64, priority: u8) {
    // 1 ns of timer slack instead of the default 50 us keeps wake-ups close to their deadlines.
    let _ = nix::sys::prctl::set_timerslack(1);
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
