//! The journal thread: keeps what every process maps (the kernel's side-band records, [`bpf::mappings`]) while
//! a script takes user stacks, so that the frames of a process that exited before its stacks are printed
//! still get names ([`crate::symbols::journal`]). Started before anything is attached, so that a `-c`
//! command's exec, and every later process, is in it; drained every [`DRAIN_EVERY`] and once more when it
//! stops, before the maps are printed. Its per-CPU events are kept alive through CPU hotplug as the probes'
//! are ([`CpuRings`]).

use super::cpu_rings::CpuRings;
use crate::symbols::journal::{Journal, ProcessMaps};
use bpf::mappings::{MappingEvents, Record};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the rings are read: before a page of records (64 per ring) fills them, in most loads.
const DRAIN_EVERY: Duration = Duration::from_millis(10);
/// Data pages of each CPU's ring: 256 KiB.
const RING_PAGES: usize = 64;
/// The journal's event of each CPU, kept through hotplug.
struct Rings(CpuRings<MappingEvents>);

impl Rings {
    fn open(cpus: &[u32]) -> io::Result<Rings> {
        CpuRings::open(cpus, |cpu| MappingEvents::open(cpu, RING_PAGES)).map(Rings)
    }

    fn drain(&mut self, mut each: impl FnMut(u64, Record)) {
        for ring in self.0.events_mut() {
            ring.drain(&mut each);
        }
    }

    /// Opens the events of CPUs that came back or appeared ([`CpuRings::keep_alive`]); what a replaced
    /// event still held goes to `each`.
    fn keep_alive(&mut self, now: Instant, mut each: impl FnMut(u64, Record)) {
        self.0.keep_alive(now, |_, replaced| {
            if let Some(mut old) = replaced {
                old.drain(&mut each);
            }
        });
    }
}

pub struct JournalThread {
    stop: UnixStream,
    thread: JoinHandle<()>,
    /// What readers get: the maps, and catch-ups through `requests`.
    pub journal: Journal,
}

/// How many catch-ups the thread has finished, and the signal of each.
type Finished = Arc<(Mutex<u64>, Condvar)>;

/// How long a reader waits for a catch-up: a drain takes well under a millisecond.
const CATCH_UP_WAIT: Duration = Duration::from_millis(100);
/// A catch-up takes in the records stamped before its drain began, less this: a record is stamped just before
/// it is written, so one stamped earlier than that is in its ring (see [`Merge`]).
const WRITE_MARGIN_NS: u64 = 50_000;

impl JournalThread {
    /// Starts keeping the journal of `cpus`; an error when the kernel refuses the events (perf_event_open
    /// denied, as in some containers).
    pub fn start(cpus: &[u32]) -> io::Result<JournalThread> {
        let mut rings = Rings::open(cpus)?;
        let maps = Arc::new(Mutex::new(ProcessMaps::default()));
        let (stop, stopped) = UnixStream::pair()?;
        let (requests, mut requested) = UnixStream::pair()?;
        requested.set_nonblocking(true)?;
        let finished: Finished = Arc::default();
        let (kept, done) = (Arc::clone(&maps), Arc::clone(&finished));
        let thread = std::thread::Builder::new().name("steadytrace-maps".into()).spawn(move || {
            let timeout =
                nix::poll::PollTimeout::try_from(DRAIN_EVERY).unwrap_or(nix::poll::PollTimeout::MAX);
            let mut merge = Merge::default();
            loop {
                let woken = crate::sys::poll_readable(&[stopped.as_raw_fd(), requested.as_raw_fd()], timeout)
                    .unwrap_or_default();
                let stopping = woken.first().copied().unwrap_or(false);
                let catch_up =
                    woken.get(1).copied().unwrap_or(false) && requested.read(&mut [0u8; 64]).is_ok();
                let started = super::timer::monotonic_ns();
                rings.drain(|time, record| merge.pending.push((time, record)));
                rings.keep_alive(Instant::now(), |time, record| merge.pending.push((time, record)));
                let before = match (stopping, catch_up) {
                    (true, _) => u64::MAX,
                    (false, true) => started.saturating_sub(WRITE_MARGIN_NS).max(merge.safe_before),
                    (false, false) => merge.safe_before,
                };
                merge.apply(&mut kept.lock().unwrap_or_else(|e| e.into_inner()), before);
                merge.safe_before = started;
                if catch_up {
                    let (count, signal) = &*done;
                    *count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                    signal.notify_all();
                }
                if stopping {
                    return;
                }
            }
        })?;
        let journal = Journal::new(Arc::clone(&maps), Arc::new(move || catch_up(&requests, &finished)));
        Ok(JournalThread { stop, thread, journal })
    }

    /// Reads what is left in the rings and stops; the journal stays readable.
    pub fn stop(self) -> Journal {
        drop(self.stop);
        let _ = self.thread.join();
        self.journal
    }
}

/// Asks the thread to take in every record written so far, and waits until it has (or [`CATCH_UP_WAIT`]);
/// gives the time it asked at.
fn catch_up(mut requests: &UnixStream, finished: &Finished) -> u64 {
    let asked_at = super::timer::monotonic_ns();
    let (count, signal) = &**finished;
    let count = count.lock().unwrap_or_else(|e| e.into_inner());
    let before = *count;
    // A stopped thread reads no more: nothing to wait for.
    if requests.write_all(&[1]).is_err() {
        return asked_at;
    }
    let _ = signal.wait_timeout_while(count, CATCH_UP_WAIT, |count| *count == before);
    asked_at
}

/// Merges the CPUs' records in time order. A process's exec and its new mappings may be written on two CPUs,
/// and a record written on one CPU just after its ring was read, but stamped before a record of another CPU read
/// just after, comes in the next drain: so a drain applies only the records stamped before the previous drain
/// began (all of which had been written by then), and keeps the rest for the next.
#[derive(Default)]
struct Merge {
    pending: Vec<(u64, bpf::mappings::Record)>,
    safe_before: u64,
}

impl Merge {
    fn apply(&mut self, maps: &mut ProcessMaps, before: u64) {
        self.pending.sort_by_key(|(time, _)| *time);
        let ready = self.pending.partition_point(|(time, _)| *time < before);
        for (_, record) in self.pending.drain(..ready) {
            maps.apply(record);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bpf::mappings::Record;

    #[test]
    fn records_are_applied_in_time_order_and_only_before_the_safe_time() {
        let mmap = Record::Mmap {
            pid: 7,
            start: 0x1000,
            len: 0x1000,
            pgoff: 0,
            build_id: None,
            path: "/bin/x".into(),
        };
        let exec = Record::Comm { pid: 7, tid: 7, comm: "x".into(), exec: true };
        let mut maps = ProcessMaps::default();
        // The exec (time 5) came from one CPU's ring after the new image's mapping (time 6) from another's.
        let mut merge = Merge { pending: vec![(6, mmap), (5, exec)], safe_before: 0 };
        merge.apply(&mut maps, 6);
        assert_eq!(merge.pending.len(), 1, "the record of time 6 waits for the next drain");
        assert!(!maps.knows(7));
        merge.apply(&mut maps, u64::MAX);
        assert_eq!(maps.locate(7, 0x1010), Some(("/bin/x", 0x10)), "the mapping outlives the exec before it");
    }
}
