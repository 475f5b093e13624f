//! The journal thread: keeps what every process maps (the kernel's side-band records, [`bpf::mappings`]) while
//! a script takes user stacks, so that the frames of a process that exited before its stacks are printed
//! still get names ([`crate::symbols::journal`]). Started before anything is attached, so that a `-c`
//! command's exec, and every later process, is in it; drained every [`DRAIN_EVERY`] and once more when it
//! stops, before the maps are printed.

use crate::symbols::journal::ProcessMaps;
use bpf::mappings::MappingEvents;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the rings are read: before a page of records (64 per ring) fills them, in most loads.
const DRAIN_EVERY: Duration = Duration::from_millis(10);
/// Data pages of each CPU's ring: 256 KiB.
const RING_PAGES: usize = 64;

pub struct JournalThread {
    stop: UnixStream,
    thread: JoinHandle<()>,
    pub maps: Arc<Mutex<ProcessMaps>>,
}

impl JournalThread {
    /// Starts keeping the journal of `cpus`; an error when the kernel refuses the events (perf_event_open
    /// denied, as in some containers).
    pub fn start(cpus: &[u32]) -> io::Result<JournalThread> {
        let mut events =
            cpus.iter().map(|&cpu| MappingEvents::open(cpu, RING_PAGES)).collect::<io::Result<Vec<_>>>()?;
        let maps = Arc::new(Mutex::new(ProcessMaps::default()));
        let (stop, mut stopped) = UnixStream::pair()?;
        let kept = Arc::clone(&maps);
        let thread = std::thread::Builder::new().name("steadytrace-maps".into()).spawn(move || {
            let timeout =
                nix::poll::PollTimeout::try_from(DRAIN_EVERY).unwrap_or(nix::poll::PollTimeout::MAX);
            loop {
                let stopping = crate::sys::poll_readable(&[stopped.as_raw_fd()], timeout).is_ok_and(|r| r[0]);
                let mut maps = kept.lock().unwrap_or_else(|e| e.into_inner());
                for ring in &mut events {
                    ring.drain(|record| maps.apply(record));
                }
                if stopping {
                    let _ = stopped.read(&mut [0u8; 1]);
                    return;
                }
            }
        })?;
        Ok(JournalThread { stop, thread, maps })
    }

    /// Reads what is left in the rings and stops; the journal stays readable through `maps`.
    pub fn stop(self) -> Arc<Mutex<ProcessMaps>> {
        drop(self.stop);
        let _ = self.thread.join();
        self.maps
    }
}
