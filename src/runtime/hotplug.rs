//! The hotplug thread: watches the online CPUs and keeps every per-CPU perf event alive through CPU
//! hotplug. It is a thread of its own, so that nothing else the tracer does (writing output to a stalled
//! pipe, formatting a burst of records) can delay a revival. It stays an ordinary thread: at SCHED_FIFO
//! its retries while a CPU comes up delayed the CPU's bring-up and so the revival (measured with
//! benches/hotplug.py, docs/HOTPLUG.md: max 8–16 ms to the first sample instead of 1–2 ms). Transitions it could not see as they happened (the process was stopped, or no
//! uevents arrive and the CPU came back between two looks) are found by their queued uevents and by a
//! liveness check of every event.

use super::cpus::{Change, CpuWatcher};
use super::health::Health;
use super::percpu::{PerfProbes, Revivals};
use nix::poll::PollTimeout;
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

fn run(
    mut perf: PerfProbes,
    mut watcher: CpuWatcher,
    mut stopped: UnixStream,
    mut requests: Requests,
    health: &Health,
) -> PerfProbes {
    let mut fds = vec![stopped.as_raw_fd(), requests.woken.as_raw_fd()];
    fds.extend(watcher.wake_fd());
    let mut online: Vec<u32> = watcher.online().iter().copied().collect();
    let mut next_sweep = Instant::now() + LIVENESS_EVERY;
    let mut read_failed = false;
    loop {
        let now = Instant::now();
        let due = perf.next_due().map_or(next_sweep, |due| due.min(next_sweep));
        let timeout = due.saturating_duration_since(now).min(POLL_CPUS);
        let timeout = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX);
        match crate::sys::poll_readable(&fds, timeout) {
            // The other end was closed (or written to): stop.
            Ok(readable) if readable[0] => {
                let _ = stopped.read(&mut [0u8; 1]);
                return perf;
            }
            Ok(readable) if readable[1] => {
                while requests.woken.read(&mut [0u8; 64]).is_ok_and(|n| n > 0) {}
                let names = std::mem::take(&mut *requests.retiring.lock().unwrap_or_else(|e| e.into_inner()));
                names.iter().for_each(|name| perf.retire(name));
            }
            Ok(_) => {}
            Err(_) => std::thread::sleep(POLL_CPUS),
        }
        match watcher.poll() {
            Ok(change) => {
                read_failed = false;
                if change != Change::default() {
                    online = watcher.online().iter().copied().collect();
                    perf.cpus_changed(&change.went_offline, &change.came_online, &online, Instant::now());
                    health.cpus_changed(change.went_offline.len(), change.came_online.len());
                }
            }
            Err(e) if !read_failed => {
                read_failed = true;
                crate::stderr!("steadytrace: cannot read the online CPUs ({e}); trying again");
            }
            Err(_) => {}
        }
        let now = Instant::now();
        perf.check_due(now);
        if now >= next_sweep {
            perf.check_alive(&online, now);
            next_sweep = now + LIVENESS_EVERY;
        }
        health.revived(perf.revivals);
    }
}
