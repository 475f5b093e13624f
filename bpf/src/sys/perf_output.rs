//! The rings `bpf_perf_event_output` and `bpf_skb_output` write into: a `PERF_COUNT_SW_BPF_OUTPUT` event per
//! CPU, its descriptor stored at the CPU's index of a perf event array map, and its ring read here
//! (`code/perf_output.rs` decodes what it holds).

use crate::code::perf_output::{decode, Output};
use crate::sys::perf_ring::PerfRing;
use std::io;

/// The output event of one CPU and its ring.
pub struct PerfOutput {
    ring: PerfRing,
}

impl PerfOutput {
    /// Opens `cpu`'s event with a ring of `pages` data pages (rounded up to a power of two).
    pub fn open(cpu: u32, pages: usize) -> io::Result<PerfOutput> {
        let mut attr = libbpf_sys::perf_event_attr {
            type_: libbpf_sys::PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<libbpf_sys::perf_event_attr>() as u32,
            config: libbpf_sys::PERF_COUNT_SW_BPF_OUTPUT as u64,
            sample_type: libbpf_sys::PERF_SAMPLE_RAW as u64,
            // A read gives the time enabled, which tells a live event from one its CPU's hotplug stopped.
            read_format: libbpf_sys::PERF_FORMAT_TOTAL_TIME_ENABLED as u64,
            ..Default::default()
        };
        attr.set_disabled(1);
        // Wake a poller at every sample: the reader also drains on a timer, so this only makes it prompt.
        attr.__bindgen_anon_2.wakeup_events = 1;
        Ok(PerfOutput { ring: PerfRing::open(&attr, cpu, pages)? })
    }

    /// The event and its ring: its CPU, its descriptor (the value stored in the perf event array, readable when
    /// samples wait), whether it still runs.
    pub fn ring(&self) -> &PerfRing {
        &self.ring
    }

    /// Hands every sample and loss waiting in the ring to `each`, in order, and frees their room.
    pub fn drain(&mut self, mut each: impl FnMut(Output<'_>)) {
        self.ring.drain(|record| {
            if let Some(output) = decode(record) {
                each(output);
            }
        });
    }
}
