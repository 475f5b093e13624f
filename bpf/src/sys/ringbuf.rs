//! Reading the BPF ring buffer that carries every event record to userspace, by the kernel's protocol
//! (kernel/bpf/ringbuf.c): the consumer position on a page of its own that the reader writes; the producer
//! position and the data pages mapped read-only, the data twice in a row so that a record wrapping round the
//! end reads as one slice. Each record starts with an 8-byte header whose first word is its length, with a
//! busy bit (still being written) and a discard bit; records are 8-byte aligned.
//!
//! libbpf's reader publishes the consumer position after every record. The programs read that position on
//! every reservation, so a reader running on another CPU made the writer fetch the cache line back on every
//! record: printf's cost per event doubled (measured: benches/event_cost.py, docs/BENCHMARKS.md). This one
//! publishes it once per drain, and every [`PUBLISH_FRACTION`]th of the ring within a long one, so that the
//! programs see room freed while a large backlog is read.

use crate::sys::map::Map;
use libbpf_rs::MapCore;
use std::cell::RefCell;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const BUSY_BIT: u32 = 1 << 31;
const DISCARD_BIT: u32 = 1 << 30;
const HEADER_BYTES: u64 = 8;
/// Within one drain, the consumer position is published each time this share of the ring has been read.
const PUBLISH_FRACTION: u64 = 8;

/// What sees each record: in a cell, since draining needs only `&self`.
type OnRecord<'a> = RefCell<Box<dyn FnMut(&[u8]) + 'a>>;

/// A consumer of one ring buffer map; `on_record` sees each record in order.
pub struct RingBufReader<'a> {
    map: BorrowedFd<'a>,
    page: usize,
    data_len: u64,
    /// The consumer page, ours to write.
    consumer: *mut u8,
    /// The producer page followed by the data, twice.
    producer: *const u8,
    on_record: OnRecord<'a>,
}

impl<'a> RingBufReader<'a> {
    pub fn new(map: &'a Map, on_record: impl FnMut(&[u8]) + 'a) -> io::Result<RingBufReader<'a>> {
        let data_len = u64::from(map.handle().max_entries());
        if !data_len.is_power_of_two() {
            return Err(io::Error::other(format!("a ring buffer of {data_len} bytes: not a power of two")));
        }
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let map = map.as_fd();
        let consumer = map_pages(map, page, libc::PROT_READ | libc::PROT_WRITE, 0)?;
        let producer = match map_pages(map, page + 2 * data_len as usize, libc::PROT_READ, page) {
            Ok(producer) => producer,
            Err(error) => {
                // SAFETY: unmaps exactly the consumer page mapped above, which nothing refers to yet.
                unsafe { libc::munmap(consumer.cast(), page) };
                return Err(error);
            }
        };
        Ok(RingBufReader {
            map,
            page,
            data_len,
            consumer,
            producer,
            on_record: RefCell::new(Box::new(on_record)),
        })
    }

    /// Hands every record already in the buffer to the callback, without waiting.
    pub fn drain(&self) -> io::Result<()> {
        let mut on_record = self
            .on_record
            .try_borrow_mut()
            .map_err(|_| io::Error::other("the ring buffer was read again from its own record handler"))?;
        let (consumer, producer) = self.positions();
        let publish_every = (self.data_len / PUBLISH_FRACTION).max(HEADER_BYTES);
        let mut at = consumer.load(Ordering::Relaxed);
        let mut published = at;
        let end = producer.load(Ordering::Acquire);
        while at < end {
            let header = self.header(at).load(Ordering::Acquire);
            if header & BUSY_BIT != 0 {
                break;
            }
            let len = u64::from(header & !(BUSY_BIT | DISCARD_BIT));
            if header & DISCARD_BIT == 0 {
                // SAFETY: the record lies within the data's second copy, which follows the first: a record is
                // at most the ring's size, and starts within the first copy.
                let record = unsafe {
                    std::slice::from_raw_parts(
                        self.data().add(self.offset(at) + HEADER_BYTES as usize),
                        len as usize,
                    )
                };
                on_record(record);
            }
            at += (len + HEADER_BYTES + 7) & !7;
            if at - published >= publish_every {
                consumer.store(at, Ordering::Release);
                published = at;
            }
        }
        if at != published {
            consumer.store(at, Ordering::Release);
        }
        Ok(())
    }

    /// The map's descriptor, readable when a record that wakes the reader arrives (poll it).
    pub fn wait_fd(&self) -> RawFd {
        self.map.as_raw_fd()
    }

    fn positions(&self) -> (&AtomicU64, &AtomicU64) {
        // SAFETY: both pages stay mapped while `self` lives; each position is the first, 8-byte aligned
        // u64 of its page, shared with the kernel and accessed atomically as the ring's protocol says.
        unsafe { (&*self.consumer.cast::<AtomicU64>(), &*self.producer.cast::<AtomicU64>()) }
    }

    fn data(&self) -> *const u8 {
        // SAFETY: the data follows the producer page within the one mapping.
        unsafe { self.producer.add(self.page) }
    }

    fn offset(&self, position: u64) -> usize {
        (position & (self.data_len - 1)) as usize
    }

    fn header(&self, position: u64) -> &AtomicU32 {
        // SAFETY: records are 8-byte aligned within the mapped data; the length word is written by the
        // kernel with release ordering and read here with acquire.
        unsafe { &*self.data().add(self.offset(position)).cast::<AtomicU32>() }
    }
}

impl Drop for RingBufReader<'_> {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the two mappings made in `new`, which nothing else refers to.
        unsafe {
            libc::munmap(self.consumer.cast(), self.page);
            libc::munmap(self.producer.cast_mut().cast(), self.page + 2 * self.data_len as usize);
        }
    }
}

/// A shared mapping of `len` bytes of the ring buffer map at `offset`.
fn map_pages(map: BorrowedFd<'_>, len: usize, protection: i32, offset: usize) -> io::Result<*mut u8> {
    // SAFETY: a new shared mapping of the map's own pages, at the offsets its mmap handler accepts
    // (the consumer page read-write, the rest read-only); checked for failure below.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            protection,
            libc::MAP_SHARED,
            map.as_raw_fd(),
            offset as libc::off_t,
        )
    };
    if at == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(at.cast())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::helper::Helper;
    use crate::code::insn::{Asm, Reg, Size};
    use crate::code::map::{MapKind, MapSpec};
    use crate::code::prog::{AttachMode, ProgType};

    /// Records that wrap round the end of a one-page ring, written over four laps and read between them,
    /// arrive whole and in order, and the room read is given back (else the later laps could not be written);
    /// a discarded reservation between each two is skipped, its room given back too.
    #[test]
    fn records_wrapping_round_the_ring_arrive_whole_and_in_order() {
        const RECORD: usize = 40;
        let spec = MapSpec {
            name: "test_ring".into(),
            kind: MapKind::RingBuf,
            key_size: 0,
            value_size: 0,
            max_entries: 4096,
        };
        let ring = match Map::create(&spec) {
            Ok(ring) => ring,
            Err(error) if error.kind() == io::ErrorKind::PermissionDenied => {
                return crate::sys::testing::skip(
                    "ringbuf::records_wrapping",
                    "creating BPF maps needs root",
                );
            }
            Err(error) => panic!("cannot create the ring buffer: {error}"),
        };
        // A raw tracepoint program writing RECORD bytes: its context's first word, then copies of it.
        let mut asm = Asm::new();
        asm.load(Size::DW, Reg::R2, Reg::R1, 0);
        for word in 0..RECORD / 8 {
            asm.store(Size::DW, Reg::FP, -(RECORD as i16) + 8 * word as i16, Reg::R2);
        }
        asm.ld_map(Reg::R1, 0);
        asm.mov64_reg(Reg::R2, Reg::FP);
        asm.alu64_imm(crate::code::insn::Alu::Add, Reg::R2, -(RECORD as i32));
        asm.mov64_imm(Reg::R3, RECORD as i32);
        asm.mov64_imm(Reg::R4, 1);
        asm.call(Helper::RingbufOutput.id());
        asm.exit();
        let code = asm.finish().unwrap();
        let program = crate::sys::prog::load(
            "test_ring",
            ProgType::RawTracepoint,
            AttachMode::PerfEvent,
            &code,
            &[ring.as_fd()],
        )
        .unwrap_or_else(|error| panic!("cannot load the writer: {}", error.reason));
        // A program that reserves 24 bytes and discards them.
        let mut asm = Asm::new();
        let skip = asm.new_label();
        asm.ld_map(Reg::R1, 0);
        asm.mov64_imm(Reg::R2, 24);
        asm.mov64_imm(Reg::R3, 0);
        asm.call(Helper::RingbufReserve.id());
        asm.jump_imm(crate::code::insn::Cond::Eq, Reg::R0, 0, skip);
        asm.mov64_reg(Reg::R1, Reg::R0);
        asm.mov64_imm(Reg::R2, 1);
        asm.call(Helper::RingbufDiscard.id());
        asm.bind(skip);
        asm.mov64_imm(Reg::R0, 0);
        asm.exit();
        let code = asm.finish().unwrap();
        let discarder = crate::sys::prog::load(
            "test_discard",
            ProgType::RawTracepoint,
            AttachMode::PerfEvent,
            &code,
            &[ring.as_fd()],
        )
        .unwrap_or_else(|error| panic!("cannot load the discarder: {}", error.reason));
        let seen = RefCell::new(Vec::new());
        let reader = RingBufReader::new(&ring, |record| {
            assert_eq!(record.len(), RECORD);
            let first = u64::from_ne_bytes(record[..8].try_into().unwrap());
            assert!(record.chunks(8).all(|word| word == first.to_ne_bytes()), "a torn record: {record:?}");
            seen.borrow_mut().push(first);
        })
        .unwrap();
        // A written record and a discarded one take 48 + 32 bytes.
        let per_lap = 4096 / (RECORD + 8 + 32) as u64;
        for number in 0..4 * per_lap {
            assert_eq!(
                program.run_with_context(&number.to_ne_bytes()).unwrap(),
                0,
                "record {number} was refused"
            );
            discarder.run_with_context(&[0; 8]).unwrap();
            if number % per_lap == per_lap - 1 {
                reader.drain().unwrap();
            }
        }
        assert_eq!(*seen.borrow(), (0..4 * per_lap).collect::<Vec<_>>());
    }
}
