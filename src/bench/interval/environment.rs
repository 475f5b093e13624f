//! What the benchmark does to the machine around the engines: Ctrl-C, real-time priority, busy threads
//! and CPU hotplug.

use crate::bench::cli::Flap;
use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Set by SIGINT or SIGTERM: every loop of the benchmark ends soon after, and the CPU is put back.
pub struct Interrupt(Arc<AtomicBool>);

impl Interrupt {
    pub fn install() -> io::Result<Interrupt> {
        let flag = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&flag))?;
        signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&flag))?;
        Ok(Interrupt(flag))
    }

    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.0)
    }
}

/// `--rt PRIO` when this process may use SCHED_FIFO; otherwise says so on stderr and gives `None`.
pub fn check_realtime(priority: Option<u8>) -> Option<u8> {
    let priority = priority?;
    // Tried on a thread of its own, which ends at once: the main thread keeps its scheduling.
    let tried = std::thread::spawn(move || crate::sys::set_fifo_priority(priority)).join();
    match tried {
        Ok(Ok(())) => Some(priority),
        Ok(Err(e)) => {
            crate::stderr!(
                "steadytrace: --rt {priority}: SCHED_FIFO is not permitted here ({e}); the engines' threads run as ordinary threads"
            );
            None
        }
        Err(_) => None,
    }
}

/// Prepares the calling thread to sleep until deadlines: 1 ns of timer slack (as the tracer's timer
/// thread has) and SCHED_FIFO at `rt`.
pub fn prepare_pacing_thread(rt: Option<u8>) {
    let _ = nix::sys::prctl::set_timerslack(1);
    if let Some(priority) = rt {
        let _ = crate::sys::set_fifo_priority(priority);
    }
}

/// `--load N`: N threads spinning until dropped.
pub struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Load {
    pub fn start(threads: u32) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..threads)
            .filter_map(|i| {
                let stop = Arc::clone(&stop);
                std::thread::Builder::new()
                    .name(format!("load{i}"))
                    .spawn(move || {
                        while !stop.load(Ordering::Relaxed) {
                            std::hint::spin_loop();
                        }
                    })
                    .ok()
            })
            .collect();
        Load { stop, threads }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// The lock every user of CPU hotplug on this machine holds (the tests, benches/hotplug.py, `flock`).
pub const HOTPLUG_LOCK: &str = "/tmp/steadytrace-hotplug.lock";

fn online_file(cpu: u32) -> String {
    format!("/sys/devices/system/cpu/cpu{cpu}/online")
}

/// Waits (at most `limit`) until `cpu` is online, so that an engine bound to a CPU starts on the one that
/// `--flap` takes offline; whether it came online in time.
pub fn wait_online(cpu: u32, limit: Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    loop {
        // A CPU with no `online` file (cpu0 here) is always online.
        let online = std::fs::read_to_string(online_file(cpu)).map_or(true, |text| text.trim() == "1");
        if online || std::time::Instant::now() >= deadline {
            return online;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Runs `start` on `cpu` (the calling thread pinned there meanwhile, then free again), so that what it
/// arms in the kernel (a bpf_timer's hrtimer) lives on that CPU; where pinning fails, wherever it runs.
pub fn on_cpu<T>(cpu: u32, start: impl FnOnce() -> T) -> T {
    use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    let before = sched_getaffinity(Pid::from_raw(0)).ok();
    let mut only = CpuSet::new();
    let pinned = only.set(cpu as usize).is_ok() && sched_setaffinity(Pid::from_raw(0), &only).is_ok();
    let result = start();
    if let (true, Some(before)) = (pinned, before) {
        let _ = sched_setaffinity(Pid::from_raw(0), &before);
    }
    result
}

/// `--flap CPU:MS`: a thread taking the CPU offline and online every MS ms, under the hotplug lock,
/// which it holds until the CPU is back online for good, whatever ended the run.
pub struct Flapper {
    stop: Arc<AtomicBool>,
    flaps: Arc<AtomicU64>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl Flapper {
    pub fn start(flap: Flap, lock_wait: Duration, interrupt: &Interrupt) -> Result<Flapper, String> {
        let path = online_file(flap.cpu);
        let state = std::fs::read_to_string(&path)
            .map_err(|_| format!("cpu{} cannot be taken offline on this machine (no {path})", flap.cpu))?;
        if state.trim() != "1" {
            return Err(format!("cpu{} is offline; bring it online first", flap.cpu));
        }
        let lock = lock_hotplug(lock_wait, interrupt)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flaps = Arc::new(AtomicU64::new(0));
        let stops = [Arc::clone(&stop), interrupt.flag()];
        let counter = Arc::clone(&flaps);
        let thread = std::thread::Builder::new()
            .name("flap".into())
            .spawn(move || {
                let result = flap_until(flap, &stops, &counter);
                // Back online before the lock is let go, also when flapping failed.
                let restored = set_online(flap.cpu, true);
                drop(lock);
                result.and(restored)
            })
            .map_err(|e| format!("cannot start the flapping thread: {e}"))?;
        Ok(Flapper { stop, flaps, thread: Some(thread) })
    }

    /// Stops flapping; the CPU is online again when this returns. Gives the number of flaps.
    pub fn finish(mut self) -> Result<u64, String> {
        self.end().map_err(|e| format!("hotplug failed: {e}"))?;
        Ok(self.flaps.load(Ordering::Relaxed))
    }

    fn end(&mut self) -> io::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take() {
            Some(thread) => {
                thread.join().unwrap_or_else(|_| Err(io::Error::other("the flapping thread failed")))
            }
            None => Ok(()),
        }
    }
}

impl Drop for Flapper {
    /// A run that ends on an error puts the CPU back too.
    fn drop(&mut self) {
        let _ = self.end();
    }
}

fn flap_until(flap: Flap, stops: &[Arc<AtomicBool>; 2], flaps: &AtomicU64) -> io::Result<()> {
    let stopped = || stops.iter().any(|s| s.load(Ordering::Relaxed));
    // Sleeps in small steps, so that a stop is seen within a few milliseconds.
    let wait = |time: Duration| {
        let until = Instant::now() + time;
        while !stopped() && Instant::now() < until {
            std::thread::sleep((until - Instant::now()).min(Duration::from_millis(5)));
        }
    };
    while !stopped() {
        wait(flap.every);
        if stopped() {
            break;
        }
        set_online(flap.cpu, false)?;
        flaps.fetch_add(1, Ordering::Relaxed);
        wait(flap.every);
        set_online(flap.cpu, true)?;
    }
    Ok(())
}

/// Writes the CPU's `online` file; the kernel may refuse for a moment while another transition
/// completes, so it is tried for up to two seconds.
fn set_online(cpu: u32, online: bool) -> io::Result<()> {
    let mut last = Ok(());
    for _ in 0..100 {
        last = std::fs::write(online_file(cpu), if online { "1" } else { "0" });
        if last.is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    last
}

/// Takes the hotplug lock, waiting at most `lock_wait` for whoever holds it.
fn lock_hotplug(lock_wait: Duration, interrupt: &Interrupt) -> Result<Flock<File>, String> {
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(HOTPLUG_LOCK)
        .map_err(|e| format!("cannot open {HOTPLUG_LOCK}: {e}"))?;
    let since = Instant::now();
    let mut said = false;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(lock),
            Err((returned, nix::errno::Errno::EWOULDBLOCK)) => file = returned,
            Err((_, e)) => return Err(format!("cannot lock {HOTPLUG_LOCK}: {e}")),
        }
        if !said {
            crate::stderr!(
                "steadytrace: waiting for {HOTPLUG_LOCK}: another process is using CPU hotplug (at most {} s)",
                lock_wait.as_secs()
            );
            said = true;
        }
        if interrupt.is_set() {
            return Err("interrupted while waiting for the hotplug lock".into());
        }
        if since.elapsed() >= lock_wait {
            return Err(format!(
                "the hotplug lock {HOTPLUG_LOCK} stayed busy for {} s (another process is using CPU hotplug); not flapping",
                lock_wait.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
