//! What `bpf_perf_event_output` and `bpf_skb_output` leave in a perf ring, decoded: a sample's raw bytes or
//! the count of samples lost (`sys/perf_output.rs` opens the events and reads their rings).

use crate::code::perf::{RECORD_LOST, RECORD_SAMPLE};

/// What a program wrote, or what the kernel dropped because the ring was full.
#[derive(Debug, PartialEq, Eq)]
pub enum Output<'a> {
    /// The bytes written, padded by the kernel to a multiple of 8 with the size field before them.
    Sample(&'a [u8]),
    Lost(u64),
}

/// A sample's raw bytes (`PERF_SAMPLE_RAW`: a u32 size, then the bytes) or a loss (id, then the count).
pub(crate) fn decode(record: &[u8]) -> Option<Output<'_>> {
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
    use crate::code::perf::RECORD_COMM;

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
        assert_eq!(decode(&record(RECORD_COMM, &sample)), None, "a record of another kind");
    }
}
