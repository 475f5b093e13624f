//! The kernel's journal of what processes map, exec, fork and exit, opened: a perf "dummy" software event per
//! CPU that counts nothing and only writes side-band records into its mmap'd ring, read as [`PerfRing`]
//! reads any; `code/mappings.rs` decodes the records.

use crate::code::mappings::{decode, time, Record};
use crate::sys::perf_ring::PerfRing;
use std::io;

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
                each(time(record), decoded);
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

    #[test]
    fn the_journal_records_a_new_process_exec_mappings_and_exit() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            crate::sys::testing::skip(
                "the_journal_records_a_new_process_exec_mappings_and_exit",
                "needs root",
            );
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
