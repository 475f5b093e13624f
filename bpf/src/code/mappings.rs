//! The kernel's journal of what processes map, exec, fork and exit, decoded: the side-band records
//! (`PERF_RECORD_MMAP2`, `COMM`, `FORK`, `EXIT`) a perf "dummy" software event writes into its ring, as
//! `perf record` and samply track processes (`sys/mappings.rs` opens the events and reads their rings).
//! A process's mappings are known from them even after the process exited, when `/proc/PID/maps` is gone.

use crate::code::perf::{RECORD_COMM, RECORD_EXIT, RECORD_FORK, RECORD_LOST, RECORD_MMAP2};

/// `PERF_RECORD_MISC_COMM_EXEC`: a comm record written by an exec.
pub(crate) const MISC_COMM_EXEC: u16 = 1 << 13;
/// `PERF_RECORD_MISC_MMAP_BUILD_ID`: an mmap2 record carrying a build id in place of the device.
pub(crate) const MISC_MMAP_BUILD_ID: u16 = 1 << 14;

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

/// A record's time (CLOCK_MONOTONIC nanoseconds): `sample_id_all` puts the sample id (here tid and time) at
/// the end of every record.
pub(crate) fn time(record: &[u8]) -> u64 {
    record.len().checked_sub(8).and_then(|at| u64_at(record, at)).unwrap_or(0)
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
}
