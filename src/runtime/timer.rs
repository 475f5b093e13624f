//! The timer thread: serves every interval probe by firing its program (`BPF_PROG_TEST_RUN`; a call of the
//! trigger function, which its uprobe runs, only before Linux 5.10 or with `STEADYTRACE_TRIGGER=uprobe`:
//! see `probes/trigger.rs`) at absolute CLOCK_MONOTONIC deadlines `start + k * period`. It is pinned to no
//! CPU, so hotplug cannot stop it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::time::TimeSpec;
use nix::time::{clock_nanosleep, ClockId, ClockNanosleepFlags};

use super::load::Firing;

/// One interval probe as the timer sees it: its name, how to fire it, and its period.
#[derive(Clone)]
pub struct Interval {
    pub name: String,
    pub firing: Firing,
    pub period: Duration,
}

/// What befell one interval probe's firings so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntervalCounts {
    /// The probe's name (`interval:ms:100`).
    pub name: String,
    /// Periods skipped because the thread woke up more than a period late.
    pub skipped: u64,
    /// Firings the kernel refused to run.
    pub failed: u64,
}

/// One interval's counters, written by the timer thread.
struct Counters {
    name: String,
    skipped: AtomicU64,
    failed: AtomicU64,
}

struct Shared {
    /// Held while firing; `false` once stopped, so that no firing starts after [`Timer::stop`].
    running: Mutex<bool>,
    /// Per interval, in the order given to [`Timer::start`] (counted here, reported at exit and to metrics).
    counters: Vec<Counters>,
    /// Whether the thread got its real-time priority.
    realtime: AtomicBool,
}

/// A handle on the timer thread (a clone reads the same counts).
#[derive(Clone)]
pub struct Timer {
    shared: Arc<Shared>,
}

/// The timer thread's SCHED_FIFO priority unless `--timer-priority` says otherwise: the lowest real-time
/// priority, above every ordinary thread and below the kernel's own real-time threads.
pub const DEFAULT_PRIORITY: u8 = 1;

pub use crate::clocks::monotonic_ns;

/// Sleeps until `deadline_ns` (CLOCK_MONOTONIC), or a little later.
pub fn sleep_until(deadline_ns: u64) {
    let ts = TimeSpec::from(Duration::from_nanos(deadline_ns));
    // An absolute deadline does not drift, and a signal only makes us sleep again until it.
    while clock_nanosleep(ClockId::CLOCK_MONOTONIC, ClockNanosleepFlags::TIMER_ABSTIME, &ts)
        == Err(Errno::EINTR)
    {}
}

/// How the timer thread arrives at a deadline so that the program it enters runs as soon as a thread
/// sleeping until that deadline would be awake, not one cold entry later (docs/TIMER-BENCHMARK.md,
/// "Entry cost"). Entering BPF from a thread that has just woken costs microseconds before the
/// program's first instruction, a tenth of that once the path is warm. So, where programs run on
/// request, the thread wakes [`Warming::lead_ns`] early, runs an empty program (the same system call,
/// the same kernel path), and sleeps again until the deadline: that short sleep is woken sooner than a
/// long one, and the entry after it is warm. Woken too late for that, it goes on at once. Either way it
/// then wakes the median of its last entries' costs early (at most [`MAX_LEAD_NS`] and 1% of the mean
/// time between firings) and spins until the deadline: no program runs before its deadline, and the
/// spinning takes at most 1% of a CPU.
pub struct Approach {
    /// The longest lead of the last sleep; 0: sleep until the deadline itself.
    cap_ns: u64,
    /// The last entries' costs (ns), a ring of `RECENT`.
    recent: [u64; RECENT],
    entries: usize,
    warming: Option<Warming>,
}

/// Entries the lead is the median of: enough that one preempted entry does not move it.
const RECENT: usize = 15;

/// The longest lead, whatever the entries cost: a thread preempted while entering does not make the
/// next wake-ups early by milliseconds.
pub const MAX_LEAD_NS: u64 = 50_000;

/// Warming up the path into BPF before each deadline.
pub struct Warming {
    /// An empty raw tracepoint program.
    program: bpf::Program,
    /// The longest warming lead: a quarter of the mean time between firings, at most 1 ms.
    cap_ns: u64,
    /// How late the last early wake-ups were (ns), a ring of `RECENT`.
    woke: [u64; RECENT],
    wakes: usize,
}

/// The shortest mean time between firings that warm up: a warm-up (an empty program run and one more
/// wake-up, under 10 µs) takes at most 1% of a CPU.
pub const WARMING_MIN_GAP_NS: u64 = 1_000_000;

fn median(values: &[u64; RECENT], count: usize) -> Option<u64> {
    let seen = count.min(RECENT);
    let mut sorted = *values;
    let sorted = &mut sorted[..seen];
    sorted.sort_unstable();
    sorted.get(seen / 2).copied()
}

impl Warming {
    /// How early to wake up to warm: twice the median lateness of the last early wake-ups, plus 30 µs
    /// for the warm-up itself, at least 60 µs and at most the cap.
    pub fn lead_ns(&self) -> u64 {
        let woke = median(&self.woke, self.wakes).unwrap_or(30_000);
        (2 * woke + 30_000).clamp(60_000, self.cap_ns.max(60_000)).min(self.cap_ns)
    }
}

impl Approach {
    /// Wakes at the deadline itself: the plain sleep.
    pub fn exact() -> Approach {
        Approach { cap_ns: 0, recent: [0; RECENT], entries: 0, warming: None }
    }

    /// For firings `periods` apart (one per interval): leads of at most 1% of the mean time between
    /// firings, and [`MAX_LEAD_NS`]; no warming up (see [`Approach::warming_up`]).
    pub fn for_periods(periods: &[Duration]) -> Approach {
        let rate: f64 = periods.iter().map(|p| 1.0 / p.as_nanos().max(1) as f64).sum();
        let cap_ns = if rate > 0.0 { ((0.01 / rate).round() as u64).min(MAX_LEAD_NS) } else { 0 };
        Approach { cap_ns, ..Approach::exact() }
    }

    /// Also warms up before each deadline (see [`Approach`]) when firings are on average at least
    /// [`WARMING_MIN_GAP_NS`] apart and this kernel runs an empty raw tracepoint program on request
    /// (Linux 5.10); else as it was.
    pub fn warming_up(mut self, periods: &[Duration]) -> Approach {
        let rate: f64 = periods.iter().map(|p| 1.0 / p.as_nanos().max(1) as f64).sum();
        if rate <= 0.0 || ((1.0 / rate) as u64) < WARMING_MIN_GAP_NS {
            return self;
        }
        let mut asm = bpf::Asm::new();
        asm.mov64_imm(bpf::Reg::R0, 0);
        asm.exit();
        let Ok(code) = asm.finish() else { return self };
        let Ok(program) =
            bpf::load("st_warm_up", bpf::ProgType::RawTracepoint, bpf::AttachMode::PerfEvent, &code, &[])
        else {
            return self;
        };
        if program.run_with_context(&[0; 8]).is_err() {
            return self;
        }
        let cap_ns = ((0.25 / rate) as u64).min(1_000_000);
        self.warming = Some(Warming { program, cap_ns, woke: [0; RECENT], wakes: 0 });
        self
    }

    /// How early the last sleep before the deadline ends: the median of the last entries' costs, capped.
    pub fn lead_ns(&self) -> u64 {
        if self.cap_ns == 0 {
            return 0;
        }
        median(&self.recent, self.entries).unwrap_or(0).min(self.cap_ns)
    }

    /// Returns at `deadline_ns` or later (see [`Approach`]).
    pub fn arrive(&mut self, deadline_ns: u64) {
        if let Some(warming) = self.warming.as_mut() {
            let early = deadline_ns.saturating_sub(warming.lead_ns());
            sleep_until(early);
            let woke = monotonic_ns();
            warming.woke[warming.wakes % RECENT] = woke.saturating_sub(early);
            warming.wakes = warming.wakes.wrapping_add(1);
            // Time to warm up and sleep again; else straight on.
            if woke + 20_000 < deadline_ns {
                let _ = warming.program.run_with_context(&[0; 8]);
            }
        }
        let lead = self.lead_ns();
        if monotonic_ns() + lead < deadline_ns {
            sleep_until(deadline_ns - lead);
        }
        if lead > 0 || self.warming.is_some() {
            while monotonic_ns() < deadline_ns {
                std::hint::spin_loop();
            }
        }
    }

    /// Notes what an entry into BPF cost, from the moment the thread was at its deadline to the return.
    pub fn entered(&mut self, cost_ns: u64) {
        if self.cap_ns > 0 {
            self.recent[self.entries % RECENT] = cost_ns;
            self.entries = self.entries.wrapping_add(1);
        }
    }
}

impl Timer {
    /// Starts serving `intervals`; their first deadlines are one period from now. `priority` is the
    /// thread's SCHED_FIFO priority, 0 for none.
    pub fn start(intervals: Vec<Interval>, priority: u8) -> std::io::Result<Timer> {
        let shared = Arc::new(Shared {
            running: Mutex::new(true),
            counters: intervals
                .iter()
                .map(|i| Counters {
                    name: i.name.clone(),
                    skipped: AtomicU64::new(0),
                    failed: AtomicU64::new(0),
                })
                .collect(),
            realtime: AtomicBool::new(false),
        });
        let thread_shared = Arc::clone(&shared);
        let start = monotonic_ns();
        thread::Builder::new()
            .name("steadytrace".into())
            .spawn(move || run(&thread_shared, &intervals, start, priority))?;
        Ok(Timer { shared })
    }

    /// Stops firing; when this returns, no firing is in progress and none will start.
    pub fn stop(&self) {
        *self.shared.running.lock().unwrap_or_else(|e| e.into_inner()) = false;
    }

    /// Whether the timer thread runs at real-time priority (known once it has started).
    pub fn is_realtime(&self) -> bool {
        self.shared.realtime.load(Ordering::Relaxed)
    }

    /// What befell each interval's firings so far, in the order given to `start`.
    pub fn counts(&self) -> Vec<IntervalCounts> {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let counts = self.shared.counters.iter();
        counts
            .map(|c| IntervalCounts {
                name: c.name.clone(),
                skipped: load(&c.skipped),
                failed: load(&c.failed),
            })
            .collect()
    }
}

/// Prepares the calling thread to fire at deadlines as the timer thread does: 1 ns of timer slack instead
/// of the default 50 us keeps wake-ups close to their deadlines, and SCHED_FIFO at `priority` (0: none)
/// keeps busy CPUs from delaying them by tens of milliseconds, and by seconds while a CPU goes offline.
/// The lowest real-time priority is enough to go first, and still yields to every real-time task of the
/// machine. Whether the thread got real-time priority (`false` when not permitted). `steadytrace bench
/// interval` prepares its threads with this too, so that it measures what the tracer runs.
pub fn prepare_timer_thread(priority: u8) -> bool {
    let _ = nix::sys::prctl::set_timerslack(1);
    priority > 0 && crate::sys::set_fifo_priority(priority).is_ok()
}

impl Drop for Timer {
    /// A run that ends on an error stops firing too.
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(shared: &Shared, intervals: &[Interval], start: u64, priority: u8) {
    let realtime = prepare_timer_thread(priority);
    shared.realtime.store(realtime, Ordering::Relaxed);
    let periods: Vec<Duration> = intervals.iter().map(|i| i.period).collect();
    let mut schedule = Schedule::new(start, &periods);
    let warm = intervals.iter().any(|i| matches!(i.firing, Firing::OnRequest(_)));
    let mut approach = Approach::for_periods(&periods);
    if warm {
        approach = approach.warming_up(&periods);
    }
    let mut clock = Monotonic { approach };
    serve(&mut clock, &mut schedule, |due| {
        let running = shared.running.lock().unwrap_or_else(|e| e.into_inner());
        if !*running {
            return false;
        }
        if due.skipped > 0 {
            shared.counters[due.interval].skipped.fetch_add(due.skipped, Ordering::Relaxed);
        }
        if intervals[due.interval].firing.fire().is_err() {
            shared.counters[due.interval].failed.fetch_add(1, Ordering::Relaxed);
        }
        true
    });
}

/// Where the timer thread reads the time and sleeps: CLOCK_MONOTONIC for real, a made-up clock in tests.
trait Clock {
    /// Now, in nanoseconds.
    fn now(&mut self) -> u64;
    /// Returns at `deadline_ns` or later.
    fn sleep_until(&mut self, deadline_ns: u64);
    /// What a firing cost, from the moment it was due (`now` after the sleep) to its end.
    fn fired(&mut self, _cost_ns: u64) {}
}

/// CLOCK_MONOTONIC, the clock of `bpf_ktime_get_ns`, arrived at as `approach` says.
struct Monotonic {
    approach: Approach,
}

impl Clock for Monotonic {
    fn now(&mut self) -> u64 {
        monotonic_ns()
    }

    fn sleep_until(&mut self, deadline_ns: u64) {
        self.approach.arrive(deadline_ns);
    }

    fn fired(&mut self, cost_ns: u64) {
        self.approach.entered(cost_ns);
    }
}

/// An interval that is due, and the periods it skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Due {
    interval: usize,
    skipped: u64,
}

/// The deadlines of every interval, in one heap: interval `i` is due at `start + k * period[i]` for
/// k = 1, 2, ... Deadlines are absolute, so lateness never accumulates into drift.
struct Schedule {
    start: u64,
    periods: Vec<u64>,
    /// (deadline, interval, k) of each interval's next firing; the earliest first.
    heap: BinaryHeap<Reverse<(u64, usize, u64)>>,
}

impl Schedule {
    fn new(start: u64, periods: &[Duration]) -> Schedule {
        let periods: Vec<u64> =
            periods.iter().map(|p| u64::try_from(p.as_nanos()).unwrap_or(u64::MAX).max(1)).collect();
        let heap =
            periods.iter().enumerate().map(|(i, &p)| Reverse((start.saturating_add(p), i, 1))).collect();
        Schedule { start, periods, heap }
    }

    /// The earliest deadline, if there is any interval.
    fn next_deadline(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((deadline, ..))| *deadline)
    }

    /// Takes the earliest deadline, which has passed at `now`. Woken a whole period or more late, the
    /// interval fires once and the periods in between are skipped (counted, never hidden) instead of a
    /// burst of catch-up firings; its next deadline is the first one after `now`.
    fn take_due(&mut self, now: u64) -> Option<Due> {
        let Reverse((deadline, interval, k)) = self.heap.pop()?;
        let period = self.periods[interval];
        let skipped = now.saturating_sub(deadline) / period;
        let k = k + 1 + skipped;
        self.heap.push(Reverse((self.start.saturating_add(k.saturating_mul(period)), interval, k)));
        Some(Due { interval, skipped })
    }
}

/// Sleeps until each deadline of `schedule` and calls `fire` with what is due, until `fire` says stop.
fn serve(clock: &mut impl Clock, schedule: &mut Schedule, mut fire: impl FnMut(Due) -> bool) {
    while let Some(deadline) = schedule.next_deadline() {
        clock.sleep_until(deadline);
        let now = clock.now();
        let Some(due) = schedule.take_due(now) else { return };
        if !fire(due) {
            return;
        }
        let cost = clock.now().saturating_sub(now);
        clock.fired(cost);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    const MS: u64 = 1_000_000;

    /// A clock that wakes up late by the amounts it is given, one per sleep, and records every deadline
    /// it was asked to sleep until.
    struct Scripted {
        now: u64,
        lateness: VecDeque<u64>,
        deadlines: Vec<u64>,
    }

    impl Scripted {
        fn new(now: u64, lateness: &[u64]) -> Scripted {
            Scripted { now, lateness: lateness.iter().copied().collect(), deadlines: vec![] }
        }
    }

    impl Clock for Scripted {
        fn now(&mut self) -> u64 {
            self.now
        }

        fn sleep_until(&mut self, deadline: u64) {
            self.deadlines.push(deadline);
            self.now = self.now.max(deadline) + self.lateness.pop_front().unwrap_or(0);
        }
    }

    /// Serves `periods` (ms) from `start` for `firings` firings; returns what fired, at what time.
    fn serve_for(clock: &mut Scripted, periods: &[u64], firings: usize) -> Vec<(u64, Due)> {
        let periods: Vec<Duration> = periods.iter().map(|&p| Duration::from_millis(p)).collect();
        let mut schedule = Schedule::new(clock.now, &periods);
        let mut fired = vec![];
        serve(clock, &mut schedule, |due| {
            fired.push(due);
            fired.len() < firings
        });
        clock.deadlines.iter().copied().zip(fired).collect()
    }

    fn due(interval: usize, skipped: u64) -> Due {
        Due { interval, skipped }
    }

    #[test]
    fn deadlines_are_absolute_so_lateness_does_not_drift() {
        // Every wake-up 3 ms late, under a 10 ms period: the deadlines stay on the 10 ms grid.
        let mut clock = Scripted::new(1000 * MS, &[3 * MS; 5]);
        let fired = serve_for(&mut clock, &[10], 5);
        let deadlines: Vec<u64> = fired.iter().map(|(t, _)| (t - 1000 * MS) / MS).collect();
        assert_eq!(deadlines, [10, 20, 30, 40, 50]);
        assert!(fired.iter().all(|(_, d)| *d == due(0, 0)), "nothing skipped: {fired:?}");
    }

    #[test]
    fn waking_periods_late_fires_once_and_counts_the_skipped_periods() {
        // The second wake-up is 35 ms late: periods 3, 4 and 5 (at 30, 40, 50 ms) are skipped, not
        // fired in a burst, and the next deadline is the first after the late wake-up (60 ms).
        let mut clock = Scripted::new(0, &[0, 35 * MS, 0, 0]);
        let fired = serve_for(&mut clock, &[10], 4);
        assert_eq!(
            fired,
            [(10 * MS, due(0, 0)), (20 * MS, due(0, 3)), (60 * MS, due(0, 0)), (70 * MS, due(0, 0))]
        );
    }

    #[test]
    fn late_by_less_than_a_period_skips_nothing() {
        let mut clock = Scripted::new(0, &[9 * MS, 0]);
        let fired = serve_for(&mut clock, &[10], 2);
        assert_eq!(fired, [(10 * MS, due(0, 0)), (20 * MS, due(0, 0))]);
    }

    #[test]
    fn several_intervals_are_served_from_one_heap_in_deadline_order() {
        let mut clock = Scripted::new(0, &[]);
        let fired = serve_for(&mut clock, &[10, 25], 7);
        let order: Vec<(u64, usize)> = fired.iter().map(|(t, d)| (t / MS, d.interval)).collect();
        // At 50 ms both are due: one firing each, the lower index first.
        assert_eq!(order, [(10, 0), (20, 0), (25, 1), (30, 0), (40, 0), (50, 0), (50, 1)]);
    }

    #[test]
    fn a_late_wake_up_skips_only_for_the_interval_that_was_due() {
        // Woken at 32 ms for the 10 ms interval's first deadline: it skips 2 periods (20, 30 ms); the
        // 25 ms interval, due at 25 ms, is then served late by 7 ms, less than its period.
        let mut clock = Scripted::new(0, &[22 * MS]);
        let fired = serve_for(&mut clock, &[10, 25], 3);
        assert_eq!(fired, [(10 * MS, due(0, 2)), (25 * MS, due(1, 0)), (40 * MS, due(0, 0))]);
    }

    #[test]
    fn the_lead_is_the_median_recent_entry_capped_at_1_percent_of_the_time_between_firings() {
        let mut approach = Approach::for_periods(&[Duration::from_millis(10)]);
        assert_eq!(approach.lead_ns(), 0, "no entry yet: wake at the deadline");
        for cost in [16_000, 15_000, 900_000, 17_000, 14_000] {
            approach.entered(cost);
        }
        assert_eq!(approach.lead_ns(), 16_000, "one preempted entry does not move it");
        // Only the last 15 entries count.
        for _ in 0..15 {
            approach.entered(3_000);
        }
        assert_eq!(approach.lead_ns(), 3_000);
        for _ in 0..15 {
            approach.entered(5_000_000);
        }
        assert_eq!(approach.lead_ns(), MAX_LEAD_NS, "never more than MAX_LEAD_NS");
        // 1 ms and 4 ms: 1.25 firings a ms, so at most 1% of 0.8 ms.
        let mut fast = Approach::for_periods(&[Duration::from_millis(1), Duration::from_millis(4)]);
        fast.entered(20_000);
        assert_eq!(fast.lead_ns(), 8_000);
    }

    #[test]
    fn the_exact_approach_and_no_interval_never_lead() {
        let mut exact = Approach::exact();
        exact.entered(16_000);
        assert_eq!(exact.lead_ns(), 0);
        let mut none = Approach::for_periods(&[]);
        none.entered(16_000);
        assert_eq!(none.lead_ns(), 0);
    }

    #[test]
    fn arriving_early_returns_at_the_deadline_not_before() {
        let mut approach = Approach::for_periods(&[Duration::from_millis(10)]);
        approach.entered(50_000);
        for _ in 0..20 {
            let deadline = monotonic_ns() + 200_000;
            approach.arrive(deadline);
            assert!(monotonic_ns() >= deadline);
        }
    }

    #[test]
    fn serving_ends_when_stopped_or_when_there_is_nothing_to_serve() {
        let mut clock = Scripted::new(0, &[]);
        assert_eq!(serve_for(&mut clock, &[10], 1).len(), 1, "stops at the first `false`");
        let mut clock = Scripted::new(0, &[]);
        assert!(serve_for(&mut clock, &[], 1).is_empty());
        assert!(clock.deadlines.is_empty(), "no interval: no sleep");
    }
}
