//! The kernel's journal of what processes map, exec, fork and exit: a perf "dummy" software event per CPU
//! that counts nothing and only writes side-band records (`PERF_RECORD_MMAP2`, `COMM`, `FORK`, `EXIT`)
//! into its mmap'd ring, as `perf record` and samply track processes. A process's mappings are known from
//! it even after the process exited, when `/proc/PID/maps` is gone.
//!
//! The ring is read as [`PerfRing`] reads any.

use crate::perf_ring::PerfRing;
use std::io;
const RECORD_LOST: u32 = libbpf_sys::PERF_RECORD_LOST;
const RECORD_COMM: u32 = libbpf_sys::PERF_RECORD_COMM;
const RECORD_EXIT: u32 = libbpf_sys::PERF_RECORD_EXIT;
const RECORD_FORK: u32 = libbpf_sys::PERF_RECORD_FORK;
const RECORD_MMAP2: u32 = libbpf_sys::PERF_RECORD_MMAP2;
const MISC_COMM_EXEC: u16 = libbpf_sys::PERF_RECORD_MISC_COMM_EXEC as u16;
const MISC_MMAP_BUILD_ID: u16 = libbpf_sys::PERF_RECORD_MISC_MMAP_BUILD_ID as u16;

/// One side-band record, as far as process tracking needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// A file (or anonymous memory, a `[heap]`...) mapped at `[start, start + len)` from file offset `pgoff`.
    Mmap { pid: u32, start: u64, len: u64, pgoff: u64, build_id: Option<Vec<u8>>, path: String },
    /// `pid` exec'd (its mappings start anew), or a thread was renamed (`exec` false).
    Comm { pid: u32, tid: u32, comm: String, exec: bool },
    /// A new process `pid` (thread group) forked from `parent`; threads (`pid` unchanged) are left out.
    Fork { pid: u32, parent: u32 },
    /// The process `pid` exited (its last thread).
    Exit { pid: u32 },
    /// The ring was full: the kernel dropped `count` records.
    Lost { count: u64 },
}

/// Decodes one record (header included); `None` for kinds not tracked here and malformed ones.
pub fn decode(bytes: &[u8]) -> Option<Record> {
    let kind = u32_at(bytes, 0)?;
    let misc = u16::from_ne_bytes(bytes.get(4..6)?.try_into().ok()?);
    let body = bytes.get(8..)?;
    match kind {
        RECORD_MMAP2 => {
            let build_id = (misc & MISC_MMAP_BUILD_ID != 0).then(|| {
                let size = usize::from(*body.get(32).unwrap_or(&0)).min(20);
                body.get(36..36 + size).map(<[u8]>::to_vec).unwrap_or_default()
            });
            Some(Record::Mmap {
                pid: u32_at(body, 0)?,
                start: u64_at(body, 8)?,
                len: u64_at(body, 16)?,
                pgoff: u64_at(body, 24)?,
                build_id,
                // After pid/tid, addr, len, pgoff (32 bytes), the device or build id (24), prot and flags (8).
                path: c_string(body.get(64..)?),
            })
        }
        RECORD_COMM => Some(Record::Comm {
            pid: u32_at(body, 0)?,
            tid: u32_at(body, 4)?,
            comm: c_string(body.get(8..)?),
            exec: misc & MISC_COMM_EXEC != 0,
        }),
        RECORD_FORK | RECORD_EXIT => {
            let (pid, ppid, tid) = (u32_at(body, 0)?, u32_at(body, 4)?, u32_at(body, 8)?);
            match kind {
                // A new thread group: its leader is the new task.
                RECORD_FORK if pid == tid => Some(Record::Fork { pid, parent: ppid }),
                RECORD_EXIT if pid == tid => Some(Record::Exit { pid }),
                _ => None,
            }
        }
        RECORD_LOST => Some(Record::Lost { count: u64_at(body, 8)? }),
        _ => None,
    }
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// The journal's event on one CPU and its ring.
pub struct MappingEvents {
    ring: PerfRing,
}

impl MappingEvents {
    /// Opens the journal of every process on `cpu` with a ring of `pages` data pages (a power of two), with
    /// build ids in its mmap records where the kernel gives them (Linux 5.12; older kernels refuse the flag,
    /// and it is then opened without).
    pub fn open(cpu: u32, pages: usize) -> io::Result<MappingEvents> {
        let ring = PerfRing::open(&attributes(true), cpu, pages)
            .or_else(|_| PerfRing::open(&attributes(false), cpu, pages))?;
        Ok(MappingEvents { ring })
    }

    /// The event and its ring: its CPU, its descriptor, whether it still runs.
    pub fn ring(&self) -> &PerfRing {
        &self.ring
    }

    /// Hands every record waiting in the ring to `each` with its time (CLOCK_MONOTONIC nanoseconds), in order,
    /// and frees their room. Records of different CPUs interleave: a process that moved between CPUs while it
    /// exec'd has its records on both, so they are to be merged by time.
    pub fn drain(&mut self, mut each: impl FnMut(u64, Record)) {
        self.ring.drain(|record| {
            if let Some(decoded) = decode(record) {
                // `sample_id_all` puts the sample id (here tid and time) at the end of every record.
                let time = record.len().checked_sub(8).and_then(|at| u64_at(record, at)).unwrap_or(0);
                each(time, decoded);
            }
        });
    }
}

/// A dummy software event writing mmap2, comm (with exec), fork and exit records.
fn attributes(build_id: bool) -> libbpf_sys::perf_event_attr {
    let mut attr = libbpf_sys::perf_event_attr {
        type_: libbpf_sys::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<libbpf_sys::perf_event_attr>() as u32,
        config: libbpf_sys::PERF_COUNT_SW_DUMMY as u64,
        ..Default::default()
    };
    attr.set_disabled(1);
    attr.set_mmap(1);
    attr.set_mmap2(1);
    attr.set_comm(1);
    attr.set_comm_exec(1);
    attr.set_task(1);
    attr.set_build_id(u64::from(build_id));
    // Every record ends with its thread and time, so that the rings of all CPUs can be merged in order.
    attr.sample_type = (libbpf_sys::PERF_SAMPLE_TID | libbpf_sys::PERF_SAMPLE_TIME) as u64;
    attr.set_sample_id_all(1);
    // A read gives the time enabled, which tells a live event from one its CPU's hotplug stopped.
    attr.read_format = libbpf_sys::PERF_FORMAT_TOTAL_TIME_ENABLED as u64;
    // Times on CLOCK_MONOTONIC, comparable with the reader's own clock.
    attr.set_use_clockid(1);
    attr.clockid = libc::CLOCK_MONOTONIC;
    // Wake a poller once a page of records waits.
    attr.__bindgen_anon_2.wakeup_watermark = 4096;
    attr.set_watermark(1);
    attr
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut bytes = kind.to_ne_bytes().to_vec();
        bytes.extend(misc.to_ne_bytes());
        bytes.extend(((8 + body.len()) as u16).to_ne_bytes());
        bytes.extend(body);
        bytes
    }

    #[test]
    fn mmap2_records_give_the_range_offset_build_id_and_path() {
        let mut body = vec![];
        for v in [41u32, 42] {
            body.extend(v.to_ne_bytes());
        }
        for v in [0x5555_0000u64, 0x2000, 0x1000] {
            body.extend(v.to_ne_bytes());
        }
        let mut id = vec![3u8, 0, 0, 0];
        id.extend([0xab, 0xcd, 0xef]);
        id.resize(24, 0);
        body.extend(&id);
        body.extend([0u8; 8]);
        body.extend(b"/usr/bin/true\0\0\0");
        assert_eq!(
            decode(&header(RECORD_MMAP2, MISC_MMAP_BUILD_ID, &body)),
            Some(Record::Mmap {
                pid: 41,
                start: 0x5555_0000,
                len: 0x2000,
                pgoff: 0x1000,
                build_id: Some(vec![0xab, 0xcd, 0xef]),
                path: "/usr/bin/true".into()
            })
        );
        let Some(Record::Mmap { build_id, .. }) = decode(&header(RECORD_MMAP2, 0, &body)) else { panic!() };
        assert_eq!(build_id, None);
    }

    #[test]
    fn comm_fork_exit_and_lost_records() {
        let mut body = 7u32.to_ne_bytes().to_vec();
        body.extend(8u32.to_ne_bytes());
        body.extend(b"true\0\0\0\0");
        assert_eq!(
            decode(&header(RECORD_COMM, MISC_COMM_EXEC, &body)),
            Some(Record::Comm { pid: 7, tid: 8, comm: "true".into(), exec: true })
        );
        let task = |pid: u32, ppid: u32, tid: u32| {
            let mut body = vec![];
            for v in [pid, ppid, tid, ppid] {
                body.extend(v.to_ne_bytes());
            }
            body.extend(0u64.to_ne_bytes());
            body
        };
        assert_eq!(decode(&header(RECORD_FORK, 0, &task(9, 1, 9))), Some(Record::Fork { pid: 9, parent: 1 }));
        assert_eq!(decode(&header(RECORD_FORK, 0, &task(9, 9, 10))), None, "a new thread");
        assert_eq!(decode(&header(RECORD_EXIT, 0, &task(9, 1, 9))), Some(Record::Exit { pid: 9 }));
        let mut lost = 1u64.to_ne_bytes().to_vec();
        lost.extend(5u64.to_ne_bytes());
        assert_eq!(decode(&header(RECORD_LOST, 0, &lost)), Some(Record::Lost { count: 5 }));
        assert_eq!(decode(&[1, 2]), None);
    }

    /// Random records (a fixed-seed xorshift, 200,000 of them, with valid kinds and sizes mixed in): decoding
    /// never panics, whatever the kernel (or a bug of ours reading the ring) hands it.
    #[test]
    fn random_records_never_panic() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let kinds = [RECORD_LOST, RECORD_COMM, RECORD_EXIT, RECORD_FORK, RECORD_MMAP2, 99];
        for _ in 0..200_000 {
            let len = (next() % 120) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if len >= 8 && next() % 2 == 0 {
                bytes[..4].copy_from_slice(&kinds[(next() % kinds.len() as u64) as usize].to_ne_bytes());
            }
            let _ = decode(&bytes);
        }
    }

    #[test]
    fn the_journal_records_a_new_process_exec_mappings_and_exit() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            crate::testing::skip("the_journal_records_a_new_process_exec_mappings_and_exit", "needs root");
            return;
        }
        let online = std::fs::read_to_string("/sys/devices/system/cpu/online").expect("online CPUs");
        let cpus: Vec<u32> = online
            .trim()
            .split(',')
            .flat_map(|range| {
                let (a, b) = range.split_once('-').unwrap_or((range, range));
                a.parse().unwrap()..=b.parse().unwrap()
            })
            .collect();
        let mut events: Vec<MappingEvents> =
            cpus.iter().map(|&cpu| MappingEvents::open(cpu, 64).expect("the journal's event")).collect();
        let child = std::process::Command::new("/bin/true").spawn().expect("run true");
        let pid = child.id();
        let status = { child }.wait().expect("wait");
        assert!(status.success());
        let mut records = vec![];
        for event in &mut events {
            event.drain(|_, record| records.push(record));
        }
        let mapped: Vec<&Record> = records
            .iter()
            .filter(
                |r| matches!(r, Record::Mmap { pid: p, path, .. } if *p == pid && path.ends_with("/true")),
            )
            .collect();
        assert!(!mapped.is_empty(), "no mapping of true by {pid} among {} records", records.len());
        assert!(records.iter().any(|r| matches!(r, Record::Comm { pid: p, exec: true, .. } if *p == pid)));
        assert!(records.iter().any(|r| matches!(r, Record::Exit { pid: p } if *p == pid)));
        assert!(records.iter().any(|r| matches!(r, Record::Fork { pid: p, .. } if *p == pid)));
        // Linux 5.12 and later give build ids.
        if let Record::Mmap { build_id: Some(id), .. } = mapped[0] {
            assert_eq!(id.len(), 20, "a GNU build id");
        }
        // A live event's enabled time grows (what tells it from one stopped by hotplug).
        let before: Vec<u64> =
            events.iter().map(|e| e.ring().enabled_time().expect("read the event")).collect();
        std::thread::sleep(std::time::Duration::from_millis(5));
        for (event, before) in events.iter().zip(before) {
            let now = event.ring().enabled_time().expect("read the event");
            assert!(now > before, "cpu{}: enabled time {before} then {now}", event.ring().cpu());
        }
    }
}
