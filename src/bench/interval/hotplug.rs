//! `--flap CPU[:MS]`: a CPU taken offline and back online during the run, under the machine's hotplug
//! lock, with every transition's time kept so that the report can tell the kernel's stalls from the
//! engines'.

use crate::bench::cli::Flap;
use crate::runtime::timer::monotonic_ns;
use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::environment::Interrupt;

/// One write of the CPU's `online` file: from just before it to just after it returned (CLOCK_MONOTONIC
/// ns). Taking a CPU offline runs stop_machine, which holds every CPU for its duration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Transition {
    pub online: bool,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// What `--flap` did.
#[derive(Clone, Debug)]
pub struct Flaps {
    pub flap: Flap,
    pub transitions: Vec<Transition>,
}

impl Flaps {
    /// Times the CPU went offline.
    pub fn offline_count(&self) -> u64 {
        self.transitions.iter().filter(|t| !t.online).count() as u64
    }

    /// The intervals the CPU was offline or changing state: from the start of each offline transition to
    /// the end of the online one after it (or `end_ns`).
    pub fn offline_spans(&self, end_ns: u64) -> Vec<(u64, u64)> {
        let mut spans = vec![];
        let mut since = None;
        for t in &self.transitions {
            match (t.online, since) {
                (false, None) => since = Some(t.start_ns),
                (true, Some(start)) => {
                    spans.push((start, t.end_ns));
                    since = None;
                }
                _ => {}
            }
        }
        if let Some(start) = since {
            spans.push((start, end_ns));
        }
        spans
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

/// `--flap CPU:MS`: a thread taking the CPU offline and online every MS ms, under the hotplug lock,
/// which it holds until the CPU is back online for good, whatever ended the run.
pub struct Flapper {
    flap: Flap,
    stop: Arc<AtomicBool>,
    transitions: Arc<Mutex<Vec<Transition>>>,
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
        let transitions = Arc::new(Mutex::new(vec![]));
        let stops = [Arc::clone(&stop), interrupt.flag()];
        let log = Arc::clone(&transitions);
        let thread = std::thread::Builder::new()
            .name("flap".into())
            .spawn(move || {
                let result = flap_until(flap, &stops, &log);
                // Back online before the lock is let go, also when flapping failed.
                let restored = record(&log, flap.cpu, true);
                drop(lock);
                result.and(restored)
            })
            .map_err(|e| format!("cannot start the flapping thread: {e}"))?;
        Ok(Flapper { flap, stop, transitions, thread: Some(thread) })
    }

    /// Stops flapping; the CPU is online again when this returns. Gives what was done.
    pub fn finish(mut self) -> Result<Flaps, String> {
        self.end().map_err(|e| format!("hotplug failed: {e}"))?;
        let transitions = std::mem::take(&mut *self.transitions.lock().unwrap_or_else(|e| e.into_inner()));
        Ok(Flaps { flap: self.flap, transitions })
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

fn flap_until(flap: Flap, stops: &[Arc<AtomicBool>; 2], log: &Mutex<Vec<Transition>>) -> io::Result<()> {
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
        record(log, flap.cpu, false)?;
        wait(flap.every);
        record(log, flap.cpu, true)?;
    }
    Ok(())
}

/// Sets the CPU online or offline, noting when; a write that changed nothing (online already) is not noted.
fn record(log: &Mutex<Vec<Transition>>, cpu: u32, online: bool) -> io::Result<()> {
    let was_online = std::fs::read_to_string(online_file(cpu)).is_ok_and(|text| text.trim() == "1");
    let start_ns = monotonic_ns();
    set_online(cpu, online)?;
    if was_online != online {
        let end_ns = monotonic_ns();
        log.lock().unwrap_or_else(|e| e.into_inner()).push(Transition { online, start_ns, end_ns });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offline_spans_run_from_going_offline_to_being_back() {
        let t = |online, start_ns, end_ns| Transition { online, start_ns, end_ns };
        let flaps = Flaps {
            flap: Flap { cpu: 1, every: Duration::from_millis(200) },
            transitions: vec![t(false, 100, 114), t(true, 300, 302), t(false, 500, 520)],
        };
        assert_eq!(flaps.offline_count(), 2);
        assert_eq!(flaps.offline_spans(900), [(100, 302), (500, 900)]);
    }
}
