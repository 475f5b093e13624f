//! What each process mapped, kept from the kernel's journal ([`bpf::mappings`]) so that a process's frames can
//! be named after it exited, when `/proc/PID/maps` is gone: the stacks of a `-c` command, or of any process
//! that lived less long than the trace, are printed when the maps are, at the end.
//!
//! Bounded: the mappings of at most [`KEEP_EXITED`] exited processes are kept, the oldest dropped first.

use bpf::mappings::Record;
use std::collections::{HashMap, VecDeque};
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
    /// Takes in every record written until now; gives the time (CLOCK_MONOTONIC ns) it was asked at.
    catch_up: Arc<dyn Fn() -> u64 + Send + Sync>,
    /// By process, when the last catch-up for it was asked: a process the journal never saw (one that mapped
    /// its files before tracing began) is not asked for again for addresses seen before then.
    caught_up: Arc<Mutex<HashMap<u32, u64>>>,
}

impl Journal {
    pub fn new(maps: Arc<Mutex<ProcessMaps>>, catch_up: Arc<dyn Fn() -> u64 + Send + Sync>) -> Journal {
        Journal { maps, catch_up, caught_up: Arc::default() }
    }

    /// What the journal holds now.
    pub fn lock(&self) -> MutexGuard<'_, ProcessMaps> {
        self.maps.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the journal holds, after taking in every record written until now when it cannot place one of
    /// `addrs` in `pid`'s mappings, unless that was done for `pid` since `seen_at` (CLOCK_MONOTONIC ns: when the
    /// addresses were taken; 0 for once per process). Records are applied a drain late: the journal may hold a
    /// process's fork and not yet the mappings of the image it then executed.
    pub fn placing(&self, pid: u32, addrs: &[u64], seen_at: u64) -> MutexGuard<'_, ProcessMaps> {
        let placed = {
            let maps = self.lock();
            addrs.iter().all(|&addr| maps.locate(pid, addr).is_some())
        };
        if !placed {
            let mut caught_up = self.caught_up.lock().unwrap_or_else(|e| e.into_inner());
            if caught_up.get(&pid).is_none_or(|&at| at < seen_at) {
                caught_up.insert(pid, (self.catch_up)());
            }
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
            // A child shares its parent's image until it execs; of a parent never seen, nothing is known.
            Record::Fork { pid, parent } => match self.by_pid.get(&parent).cloned() {
                Some(inherited) => {
                    self.by_pid.insert(pid, inherited);
                }
                None => {
                    self.by_pid.remove(&pid);
                }
            },
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
    fn a_process_forked_from_one_never_seen_is_not_known() {
        let mut maps = ProcessMaps::default();
        maps.apply(mmap(12, 0x1000, "/bin/reused"));
        maps.apply(Record::Fork { pid: 12, parent: 99 });
        assert!(!maps.knows(12), "a pid used again drops what its earlier life mapped");
    }

    /// A journal whose catch-up takes in `later` and counts itself; its clock reads 100 ns.
    fn journal_catching_up(later: Vec<Record>) -> (Journal, Arc<Mutex<u32>>) {
        let maps = Arc::new(Mutex::new(ProcessMaps::default()));
        let (held, asked) = (Arc::clone(&maps), Arc::new(Mutex::new(0)));
        let counted = Arc::clone(&asked);
        let later = Mutex::new(later);
        let catch_up = move || {
            *counted.lock().unwrap() += 1;
            let mut maps = held.lock().unwrap();
            later.lock().unwrap().drain(..).for_each(|record| maps.apply(record));
            100
        };
        (Journal::new(maps, Arc::new(catch_up)), asked)
    }

    #[test]
    fn a_known_process_is_caught_up_on_when_an_address_is_not_placed() {
        let (journal, asked) = journal_catching_up(vec![mmap(7, 0x4000, "/bin/exec-ed")]);
        journal.lock().apply(mmap(6, 0x1000, "/bin/sh"));
        journal.lock().apply(Record::Fork { pid: 7, parent: 6 });
        assert!(journal.placing(7, &[0x1010], 50).locate(7, 0x1010).is_some());
        assert_eq!(*asked.lock().unwrap(), 0, "all placed: no catch-up");
        assert!(journal.placing(7, &[0x4010], 50).locate(7, 0x4010).is_some(), "caught up");
        assert_eq!(*asked.lock().unwrap(), 1);
        drop(journal.placing(7, &[0x9000], 80));
        assert_eq!(*asked.lock().unwrap(), 1, "not again for an address seen before the catch-up");
        drop(journal.placing(7, &[0x9000], 0));
        assert_eq!(*asked.lock().unwrap(), 1, "nor for one seen at no known time");
        drop(journal.placing(7, &[0x9000], 150));
        assert_eq!(*asked.lock().unwrap(), 2, "again for one seen after it");
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
