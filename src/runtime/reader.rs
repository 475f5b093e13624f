//! The reading side of the events ring buffer: each look hands every waiting record on, in the order the
//! programs wrote them; the records the ring had no room for (the programs count them per CPU in the `Lost`
//! map) are found since the last time asked, so that they are reported as they happen. What it asks of the
//! kernel is a [`Ring`]: the BPF ring buffer in a run, a fake one in the unit tests.

use super::control::Control;
use super::health;
use bpf::ringbuf::RingBufReader;
use bpf::Map;
use std::cell::Cell;
use std::io;
use std::os::fd::RawFd;

/// Records found by one look that mean a burst: the next look comes at once.
const BURST_RECORDS: u64 = 1024;
/// Copied user stacks found by one look that mean a burst: about a sixteenth of what the ring buffer holds.
const BURST_STACK_COPIES: u64 = 32;

/// A ring of records and its count of records lost.
pub trait Ring {
    /// Hands every record waiting to the receiver the ring was made with, in order, without waiting.
    fn drain(&self) -> io::Result<()>;
    /// Becomes readable when a record that wakes the reader arrives.
    fn wait_fd(&self) -> RawFd;
    /// Records lost so far.
    fn lost(&self) -> u64;
}

/// The events ring buffer and the `Lost` map.
pub struct KernelRing<'a> {
    reader: RingBufReader<'a>,
    lost: &'a Map,
}

impl<'a> KernelRing<'a> {
    pub fn new(events: &'a Map, lost: &'a Map, on_record: impl FnMut(&[u8]) + 'a) -> io::Result<Self> {
        Ok(KernelRing { reader: RingBufReader::new(events, on_record)?, lost })
    }
}

impl Ring for KernelRing<'_> {
    fn drain(&self) -> io::Result<()> {
        self.reader.drain()
    }

    fn wait_fd(&self) -> RawFd {
        self.reader.wait_fd()
    }

    fn lost(&self) -> u64 {
        health::lost_records(self.lost)
    }
}

/// What one look found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Look {
    pub records: u64,
    pub stack_copies: u64,
}

impl Look {
    /// Whether the ring is filling: look again at once.
    pub fn burst(&self) -> bool {
        self.records >= BURST_RECORDS || self.stack_copies >= BURST_STACK_COPIES
    }
}

/// A ring, and the losses found so far.
pub struct Reader<R> {
    ring: R,
    lost: Cell<u64>,
}

impl<R: Ring> Reader<R> {
    pub fn new(ring: R) -> Reader<R> {
        Reader { ring, lost: Cell::new(0) }
    }

    pub fn ring(&self) -> &R {
        &self.ring
    }

    /// Hands every waiting record on; what `control` counted of them.
    pub fn look(&self, control: &Control) -> io::Result<Look> {
        let (records, stack_copies) = control.read();
        self.ring.drain()?;
        let (after, copies_after) = control.read();
        Ok(Look { records: after - records, stack_copies: copies_after - stack_copies })
    }

    /// Records lost since the last call.
    pub fn newly_lost(&self) -> u64 {
        let lost = self.ring.lost().saturating_sub(self.lost.get());
        self.lost.set(self.lost.get() + lost);
        lost
    }

    /// Every record lost so far, as [`Reader::newly_lost`] found them.
    pub fn lost(&self) -> u64 {
        self.lost.get()
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::FakeRing;
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn records_are_handed_on_in_order_and_losses_said_once() {
        let control = Control::default();
        let seen = RefCell::new(vec![]);
        let reader = Reader::new(FakeRing::new(|record| {
            control.record_read();
            seen.borrow_mut().push(record.to_vec());
        }));
        reader.ring().write(&[b"a", b"b"]);
        reader.ring().overflow(2);
        reader.ring().write(&[b"c"]);
        let look = reader.look(&control).unwrap();
        assert_eq!(*seen.borrow(), [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(look, Look { records: 3, stack_copies: 0 });
        assert_eq!(reader.newly_lost(), 2);

        assert_eq!(reader.look(&control).unwrap(), Look::default(), "nothing new");
        assert_eq!(reader.newly_lost(), 0, "the same 2 losses are not said again");
        reader.ring().overflow(3);
        assert_eq!(reader.newly_lost(), 3);
        assert_eq!(reader.lost(), 5);
    }

    #[test]
    fn a_look_that_finds_many_records_is_a_burst() {
        let control = Control::default();
        let reader = Reader::new(FakeRing::new(|_| control.record_read()));
        let record: &[u8] = b"r";
        reader.ring().write(&vec![record; 1023]);
        assert!(!reader.look(&control).unwrap().burst());
        reader.ring().write(&vec![record; 1024]);
        assert!(reader.look(&control).unwrap().burst());
    }
}
