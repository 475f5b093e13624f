//! The hotplug thread: watches the online CPUs and keeps every per-CPU perf event alive through CPU
//! hotplug. It is a thread of its own, so that nothing else the tracer does (writing output to a stalled
//! pipe, formatting a burst of records) can delay a revival. It stays an ordinary thread: at SCHED_FIFO
//! its retries while a CPU comes up delayed the CPU's bring-up and so the revival (measured with
//! benches/hotplug.py, docs/HOTPLUG.md: max 8–16 ms to the first sample instead of 1–2 ms). Transitions it could not see as they happened (the process was stopped, or no
//! uevents arrive and the CPU came back between two looks) are found by their queued uevents and by a
//! liveness check of every event.

use super::cpus::{Change, CpuWatcher};
use super::health::Health;
use super::percpu::{Opener, PerfProbes, Revivals};
use nix::poll::PollTimeout;
use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the online CPUs are read when no uevent comes (rootless containers).
const POLL_CPUS: Duration = Duration::from_millis(10);
/// How often every event is checked for having died unseen.
const LIVENESS_EVERY: Duration = Duration::from_millis(50);

pub struct HotplugThread {
    /// Closing (or writing to) it tells the thread to stop.
    stop: UnixStream,
    /// Writing to it tells the thread to look at `retiring`.
    wake: UnixStream,
    /// Probes whose events are to be closed for good (watchpoints `unwatch()` removed).
    retiring: Arc<Mutex<Vec<String>>>,
    thread: JoinHandle<PerfProbes>,
}

impl HotplugThread {
    /// Starts keeping `perf`'s events (already enabled) alive; what it sees and does goes into `health`.
    pub fn start(perf: PerfProbes, watcher: CpuWatcher, health: Arc<Health>) -> io::Result<HotplugThread> {
        let (stop, stopped) = UnixStream::pair()?;
        let (wake, woken) = UnixStream::pair()?;
        woken.set_nonblocking(true)?;
        let retiring: Arc<Mutex<Vec<String>>> = Arc::default();
        let requests = Requests { woken, retiring: Arc::clone(&retiring) };
        health.watching_cpus();
        let thread = std::thread::Builder::new()
            .name("steadytrace-cpus".into())
            .spawn(move || run(perf, watcher, stopped, requests, &health))?;
        Ok(HotplugThread { stop, wake, retiring, thread })
    }

    /// Has the thread close the events of the probes named, for good.
    pub fn retire(&self, names: impl IntoIterator<Item = String>) {
        self.retiring.lock().unwrap_or_else(|e| e.into_inner()).extend(names);
        let _ = (&self.wake).write_all(&[1]);
    }

    /// Stops the thread and closes every perf event; what hotplug made it do.
    pub fn stop(self) -> Revivals {
        drop(self.stop);
        match self.thread.join() {
            Ok(perf) => perf.revivals,
            Err(_) => Revivals::default(),
        }
    }
}

/// What the thread is asked besides stopping.
struct Requests {
    woken: UnixStream,
    retiring: Arc<Mutex<Vec<String>>>,
}

/// The online CPUs as the hotplug thread reads them: [`CpuWatcher`] in a run.
pub trait OnlineCpus {
    fn online(&self) -> &BTreeSet<u32>;
    /// Reads the online CPUs again: what changed since the last look.
    fn poll(&mut self) -> io::Result<Change>;
}

impl OnlineCpus for CpuWatcher {
    fn online(&self) -> &BTreeSet<u32> {
        CpuWatcher::online(self)
    }

    fn poll(&mut self) -> io::Result<Change> {
        CpuWatcher::poll(self)
    }
}

fn run(
    perf: PerfProbes,
    watcher: CpuWatcher,
    mut stopped: UnixStream,
    mut requests: Requests,
    health: &Health,
) -> PerfProbes {
    let mut fds = vec![stopped.as_raw_fd(), requests.woken.as_raw_fd()];
    fds.extend(watcher.wake_fd());
    let mut keeper = Keeper::new(perf, watcher, Instant::now());
    loop {
        // Rounded up to poll(2)'s milliseconds: rounded down, the last millisecond before a sweep was spent
        // polling with a zero timeout, some 600 wake-ups a second and 1.3% of a CPU on an idle tracer
        // (benches/cpu_scale.py --host-cost).
        let millis = keeper.timeout(Instant::now()).as_micros().div_ceil(1000);
        let timeout = PollTimeout::try_from(millis).unwrap_or(PollTimeout::MAX);
        match crate::sys::poll_readable(&fds, timeout) {
            // The other end was closed (or written to): stop.
            Ok(readable) if readable[0] => {
                let _ = stopped.read(&mut [0u8; 1]);
                return keeper.perf;
            }
            Ok(readable) if readable[1] => {
                while requests.woken.read(&mut [0u8; 64]).is_ok_and(|n| n > 0) {}
                let names = std::mem::take(&mut *requests.retiring.lock().unwrap_or_else(|e| e.into_inner()));
                names.iter().for_each(|name| keeper.perf.retire(name));
            }
            Ok(_) => {}
            Err(_) => std::thread::sleep(POLL_CPUS),
        }
        keeper.look(Instant::now(), health);
    }
}

/// What the hotplug thread keeps: the per-CPU events, the online CPUs as last read, and when every event is
/// next checked for having died unseen.
struct Keeper<O: Opener, C: OnlineCpus> {
    perf: PerfProbes<O>,
    cpus: C,
    online: Vec<u32>,
    next_sweep: Instant,
    /// Whether the last read of the online CPUs failed (said once until one succeeds).
    read_failed: bool,
}

impl<O: Opener, C: OnlineCpus> Keeper<O, C> {
    fn new(perf: PerfProbes<O>, cpus: C, now: Instant) -> Keeper<O, C> {
        let online = cpus.online().iter().copied().collect();
        Keeper { perf, cpus, online, next_sweep: now + LIVENESS_EVERY, read_failed: false }
    }

    /// How long the thread may wait before its next look.
    fn timeout(&self, now: Instant) -> Duration {
        let due = self.perf.next_due().map_or(self.next_sweep, |due| due.min(self.next_sweep));
        due.saturating_duration_since(now).min(POLL_CPUS)
    }

    /// Reads the online CPUs, and revives, opens, moves and checks the events as that and the time call for.
    fn look(&mut self, now: Instant, health: &Health) {
        match self.cpus.poll() {
            Ok(change) => {
                self.read_failed = false;
                if change != Change::default() {
                    self.online = self.cpus.online().iter().copied().collect();
                    self.perf.cpus_changed(&change.went_offline, &change.came_online, &self.online, now);
                    health.cpus_changed(change.went_offline.len(), change.came_online.len());
                }
            }
            Err(e) if !self.read_failed => {
                self.read_failed = true;
                crate::stderr!("steadytrace: cannot read the online CPUs ({e}); trying again");
            }
            Err(_) => {}
        }
        self.perf.check_due(now);
        if now >= self.next_sweep {
            self.perf.check_alive(&self.online, now);
            self.next_sweep = now + LIVENESS_EVERY;
        }
        health.revived(self.perf.revivals);
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::{Call, FakeCpus, FakeKernel};
    use super::super::percpu::Placement;
    use super::*;

    /// The hotplug thread's keeper of two probes on every CPU, on a machine of 2 CPUs with `online`.
    fn keeper(kernel: &FakeKernel, online: &[u32]) -> (Keeper<FakeKernel, FakeCpus>, Instant) {
        let probes =
            vec![("profile".to_string(), Placement::EveryCpu), ("software".to_string(), Placement::EveryCpu)];
        let perf = PerfProbes::open(kernel.clone(), probes, online.iter().copied(), None, false)
            .unwrap_or_else(|(name, cpu, e)| panic!("{name} on cpu{cpu}: {e}"));
        perf.enable().unwrap();
        let t0 = Instant::now();
        (Keeper::new(perf, kernel.cpus(), t0), t0)
    }

    fn ms(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    /// The CPUs of the calls of one kind.
    fn cpus_of(calls: &[Call], kind: fn(&Call) -> Option<(usize, u32)>) -> Vec<(usize, u32)> {
        calls.iter().filter_map(kind).collect()
    }

    fn opened(call: &Call) -> Option<(usize, u32)> {
        match *call {
            Call::Open { probe, cpu } => Some((probe, cpu)),
            _ => None,
        }
    }

    fn closed(call: &Call) -> Option<(usize, u32)> {
        match *call {
            Call::Close { probe, cpu } => Some((probe, cpu)),
            _ => None,
        }
    }

    #[test]
    fn a_cpu_that_returns_gets_exactly_its_own_events_reopened() {
        let kernel = FakeKernel::with_cpus(2, &[0, 1], false);
        let (mut keeper, t0) = keeper(&kernel, &[0, 1]);
        let health = Health::default();
        kernel.clear_calls();
        kernel.take_offline(1);
        keeper.look(ms(t0, 10), &health);
        assert!(kernel.calls().is_empty(), "nothing to do while cpu1 is away: {:?}", kernel.calls());
        kernel.bring_online(1);
        keeper.look(ms(t0, 20), &health);
        // Re-enabled first; a millisecond later found dead (this kernel does not revive them), reopened.
        assert_eq!(kernel.calls(), [Call::Enable { probe: 0, cpu: 1 }, Call::Enable { probe: 1, cpu: 1 }]);
        keeper.look(ms(t0, 21), &health);
        let calls = kernel.calls();
        assert_eq!(cpus_of(&calls, closed), [(0, 1), (1, 1)]);
        assert_eq!(cpus_of(&calls, opened), [(0, 1), (1, 1)]);
        assert_eq!(keeper.perf.revivals.reopened, 2);
        assert_eq!(health.revivals().reopened, 2, "told to --metrics");
        assert_eq!(kernel.state().open_events, 4, "one event per probe and CPU, none leaked");
    }

    #[test]
    fn a_cpu_that_comes_online_for_the_first_time_gets_events_at_once() {
        let kernel = FakeKernel::with_cpus(2, &[0], false);
        let (mut keeper, t0) = keeper(&kernel, &[0]);
        let health = Health::default();
        kernel.clear_calls();
        kernel.bring_online(1);
        keeper.look(ms(t0, 5), &health);
        assert_eq!(cpus_of(&kernel.calls(), opened), [(0, 1), (1, 1)]);
        assert_eq!(keeper.perf.revivals.new_cpu, 2);
    }

    #[test]
    fn a_cpu_that_went_and_came_back_between_two_looks_is_found_by_the_sweep() {
        let kernel = FakeKernel::with_cpus(2, &[0, 1], false);
        let (mut keeper, t0) = keeper(&kernel, &[0, 1]);
        let health = Health::default();
        keeper.look(ms(t0, 50), &health); // the first sweep notes every event's enabled time
        kernel.take_offline(1);
        kernel.bring_online(1);
        kernel.clear_calls();
        keeper.look(ms(t0, 60), &health);
        assert!(kernel.calls().is_empty(), "the online CPUs look the same");
        assert_eq!(keeper.timeout(ms(t0, 60)), POLL_CPUS);
        keeper.look(ms(t0, 100), &health);
        assert_eq!(cpus_of(&kernel.calls(), opened), [(0, 1), (1, 1)], "only cpu1's events, found frozen");
    }

    #[test]
    fn a_sweep_reads_a_bounded_number_of_cpus_and_still_finds_every_frozen_event() {
        let all: Vec<u32> = (0..40).collect();
        let kernel = FakeKernel::with_cpus(40, &all, false);
        let (mut keeper, t0) = keeper(&kernel, &all);
        let health = Health::default();
        // Sweeps of 16 CPUs of two events each, going round: the third takes cpu32-39 and cpu0-7.
        for (sweep, reads) in [(1, 32), (2, 32), (3, 32)] {
            let before = kernel.state().time_reads;
            keeper.look(ms(t0, 50 * sweep), &health);
            assert_eq!(kernel.state().time_reads - before, reads, "sweep {sweep}");
        }
        kernel.take_offline(37);
        kernel.bring_online(37);
        kernel.clear_calls();
        for sweep in 4..=6 {
            keeper.look(ms(t0, 50 * sweep), &health);
        }
        assert_eq!(cpus_of(&kernel.calls(), opened), [(0, 37), (1, 37)], "found within one round of sweeps");
        assert_eq!(kernel.state().open_events, 80, "none leaked");
    }
}
