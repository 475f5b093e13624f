//! The rings `bpf_perf_event_output` and `bpf_skb_output` write into: a `PERF_COUNT_SW_BPF_OUTPUT` event per
//! CPU, its descriptor stored at the CPU's index of a perf event array map, and its ring read here.

use crate::perf_ring::PerfRing;
use std::io;

const RECORD_SAMPLE: u32 = libbpf_sys::PERF_RECORD_SAMPLE;
const RECORD_LOST: u32 = libbpf_sys::PERF_RECORD_LOST;

/// What a program wrote, or what the kernel dropped because the ring was full.
#[derive(Debug, PartialEq, Eq)]
pub enum Output<'a> {
    /// The bytes written, padded by the kernel to a multiple of 8 with the size field before them.
    Sample(&'a [u8]),
    Lost(u64),
}

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

/// A sample's raw bytes (`PERF_SAMPLE_RAW`: a u32 size, then the bytes) or a loss (id, then the count).
fn decode(record: &[u8]) -> Option<Output<'_>> {
    let kind = u32::from_ne_bytes(record.get(..4)?.try_into().ok()?);
    let body = record.get(8..)?;
    match kind {
        RECORD_SAMPLE => {
            let size = u32::from_ne_bytes(body.get(..4)?.try_into().ok()?) as usize;
            Some(Output::Sample(body.get(4..4 + size)?))
        }
        RECORD_LOST => Some(Output::Lost(u64::from_ne_bytes(body.get(8..16)?.try_into().ok()?))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u32, body: &[u8]) -> Vec<u8> {
        let mut bytes = kind.to_ne_bytes().to_vec();
        bytes.extend(0u16.to_ne_bytes());
        bytes.extend(((8 + body.len()) as u16).to_ne_bytes());
        bytes.extend(body);
        bytes
    }

    #[test]
    fn samples_give_their_raw_bytes_and_losses_their_count() {
        let mut sample = 5u32.to_ne_bytes().to_vec();
        sample.extend(b"abcde\0\0\0");
        assert_eq!(decode(&record(RECORD_SAMPLE, &sample)), Some(Output::Sample(b"abcde")));
        let mut lost = 1u64.to_ne_bytes().to_vec();
        lost.extend(7u64.to_ne_bytes());
        assert_eq!(decode(&record(RECORD_LOST, &lost)), Some(Output::Lost(7)));
    }

    #[test]
    fn a_sample_claiming_more_than_it_holds_is_dropped() {
        let mut sample = 64u32.to_ne_bytes().to_vec();
        sample.extend(b"abc");
        assert_eq!(decode(&record(RECORD_SAMPLE, &sample)), None);
        assert_eq!(decode(&record(libbpf_sys::PERF_RECORD_MMAP, &sample)), None);
    }
}
