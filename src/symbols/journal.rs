//! What each process mapped, kept from the kernel's journal ([`bpf::mappings`]) so that a process's frames can
//! be named after it exited, when `/proc/PID/maps` is gone: the stacks of a `-c` command, or of any process
//! that lived less long than the trace, are printed when the maps are, at the end.
//!
//! Bounded: the mappings of at most [`KEEP_EXITED`] exited processes are kept, the oldest dropped first.

use bpf::mappings::Record;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

/// Exited processes whose mappings are kept.
pub const KEEP_EXITED: usize = 4096;

/// One executable file mapping of a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// The file offset mapped at `start`.
    pub pgoff: u64,
    pub path: String,
}

/// The journal as its readers see it: what it holds, and a way to have it take in what the kernel has recorded
/// until now (it applies records a drain late, 10 to 20 ms after they were written).
#[derive(Clone)]
pub struct Journal {
    maps: Arc<Mutex<ProcessMaps>>,
    catch_up: Arc<dyn Fn() + Send + Sync>,
    /// Processes a catch-up was already asked for: a process the journal never saw (one that mapped its files
    /// before tracing began) is not asked for again.
    caught_up: Arc<Mutex<HashSet<u32>>>,
}

impl Journal {
    pub fn new(maps: Arc<Mutex<ProcessMaps>>, catch_up: Arc<dyn Fn() + Send + Sync>) -> Journal {
        Journal { maps, catch_up, caught_up: Arc::default() }
    }

    /// What the journal holds now.
    pub fn lock(&self) -> MutexGuard<'_, ProcessMaps> {
        self.maps.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the journal holds, after taking in every record written until now when it knows nothing of `pid`
    /// (once per process).
    pub fn knowing(&self, pid: u32) -> MutexGuard<'_, ProcessMaps> {
        if !self.lock().knows(pid) && self.caught_up.lock().unwrap_or_else(|e| e.into_inner()).insert(pid) {
            (self.catch_up)();
        }
        self.lock()
    }
}

#[derive(Debug, Default)]
pub struct ProcessMaps {
    by_pid: HashMap<u32, Vec<Mapping>>,
    exited: VecDeque<u32>,
    /// Records the kernel dropped because the ring was full: some mappings may be missing.
    pub lost: u64,
}

impl ProcessMaps {
    /// Takes one record of the journal into account.
    pub fn apply(&mut self, record: Record) {
        match record {
            // Only files can be symbolized; `[vdso]`, `//anon` and the like cannot be read as files.
            Record::Mmap { pid, start, len, pgoff, path, .. } if path.starts_with('/') => {
                let mapping = Mapping { start, end: start.saturating_add(len), pgoff, path };
                self.by_pid.entry(pid).or_default().push(mapping);
            }
            Record::Mmap { .. } => {}
            // A new image: what was mapped before is gone.
            Record::Comm { pid, exec: true, .. } => {
                self.by_pid.remove(&pid);
            }
            Record::Comm { .. } => {}
            // A child shares its parent's image until it execs.
            Record::Fork { pid, parent } => {
                let inherited = self.by_pid.get(&parent).cloned().unwrap_or_default();
                self.by_pid.insert(pid, inherited);
            }
            Record::Exit { pid } => {
                self.exited.push_back(pid);
                if self.exited.len() > KEEP_EXITED {
                    if let Some(oldest) = self.exited.pop_front() {
                        // Unless the pid was used again meanwhile (its new life is not in `exited`).
                        if !self.exited.contains(&oldest) {
                            self.by_pid.remove(&oldest);
                        }
                    }
                }
            }
            Record::Lost { count } => self.lost += count,
        }
    }

    /// The file and file offset of `addr` in process `pid`, by its latest mapping covering `addr`.
    pub fn locate(&self, pid: u32, addr: u64) -> Option<(&str, u64)> {
        let mapping = self.by_pid.get(&pid)?.iter().rev().find(|m| m.start <= addr && addr < m.end)?;
        Some((&mapping.path, addr - mapping.start + mapping.pgoff))
    }

    /// The file mappings of `pid`, oldest first.
    pub fn mappings(&self, pid: u32) -> Option<&[Mapping]> {
        self.by_pid.get(&pid).map(Vec::as_slice)
    }

    /// Whether anything is known of `pid`.
    pub fn knows(&self, pid: u32) -> bool {
        self.by_pid.contains_key(&pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mmap(pid: u32, start: u64, path: &str) -> Record {
        Record::Mmap { pid, start, len: 0x1000, pgoff: 0x2000, build_id: None, path: path.into() }
    }

    #[test]
    fn addresses_are_located_in_the_latest_mapping_and_forks_inherit() {
        let mut maps = ProcessMaps::default();
        maps.apply(mmap(10, 0x1000, "/bin/old"));
        maps.apply(mmap(10, 0x1000, "/bin/new"));
        maps.apply(mmap(10, 0x8000, "[vdso]"));
        assert_eq!(maps.locate(10, 0x1010), Some(("/bin/new", 0x2010)));
        assert_eq!(maps.locate(10, 0x8010), None);
        maps.apply(Record::Fork { pid: 11, parent: 10 });
        assert_eq!(maps.locate(11, 0x1010), Some(("/bin/new", 0x2010)));
        maps.apply(Record::Comm { pid: 11, tid: 11, comm: "x".into(), exec: true });
        assert_eq!(maps.locate(11, 0x1010), None, "exec drops the old image");
        maps.apply(Record::Exit { pid: 10 });
        assert_eq!(maps.locate(10, 0x1010), Some(("/bin/new", 0x2010)), "kept after exit");
    }

    #[test]
    fn only_so_many_exited_processes_are_kept() {
        let mut maps = ProcessMaps::default();
        for pid in 0..=KEEP_EXITED as u32 {
            maps.apply(mmap(pid, 0x1000, "/bin/x"));
            maps.apply(Record::Exit { pid });
        }
        assert!(!maps.knows(0), "the oldest exited process is dropped");
        assert!(maps.knows(1) && maps.knows(KEEP_EXITED as u32));
    }
}
