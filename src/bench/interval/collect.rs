//! Reading the records of a BPF engine from its ring buffer while it runs.

use super::programs::{Record, RECORD_SIZE};
use super::{Progress, Window};
use crate::runtime::timer::monotonic_ns;
use bpf::ringbuf::RingBufReader;
use bpf::{Map, MapKind, MapSpec};
use nix::poll::PollTimeout;
use std::cell::RefCell;
use std::os::fd::RawFd;

/// A ring buffer for `window`'s records, with room for all of them (so none is dropped while the
/// reader is late), between 64 KiB and 64 MiB.
pub fn ring_buffer(window: &Window) -> Result<Map, String> {
    let wanted = (window.count as usize + 64) * (RECORD_SIZE + 8);
    let size = wanted.next_power_of_two().clamp(64 << 10, 64 << 20) as u32;
    Map::create(&MapSpec {
        name: "bench_events".into(),
        kind: MapKind::RingBuf,
        key_size: 0,
        value_size: 0,
        max_entries: size,
    })
    .map_err(|e| format!("cannot create a ring buffer: {e}"))
}

/// What else the reading loop watches: a descriptor to wake up on and what to do at each wake-up
/// (the perf engine's mover).
pub struct Watch<'a> {
    pub fd: Option<RawFd>,
    pub every_ms: i32,
    pub on_wake: Box<dyn FnMut() + 'a>,
}

/// Reads records until `done()` says the engine has finished (checked at each wake-up), then drains.
pub fn records(
    map: &Map,
    window: &Window,
    progress: &Progress,
    mut done: impl FnMut() -> bool,
    mut watch: Option<Watch<'_>>,
) -> Result<Vec<Record>, String> {
    let records = RefCell::new(Vec::with_capacity(window.count as usize));
    let reader = RingBufReader::new(map, |bytes| {
        if let Some(record) = Record::parse(bytes) {
            records.borrow_mut().push(record);
        }
    })
    .map_err(|e| format!("cannot read the ring buffer: {e}"))?;
    let mut fds = vec![reader.wait_fd()];
    fds.extend(watch.as_ref().and_then(|w| w.fd));
    let timeout_ms = watch.as_ref().map_or(100, |w| w.every_ms);
    let mut shown = 0;
    while !done() {
        let _ = crate::sys::poll_readable(&fds, PollTimeout::from(timeout_ms as u16));
        reader.drain().map_err(|e| format!("cannot read the ring buffer: {e}"))?;
        if let Some(watch) = watch.as_mut() {
            (watch.on_wake)();
        }
        let now = monotonic_ns();
        if now >= shown + 250_000_000 {
            shown = now;
            progress.show(window, records.borrow().len());
        }
    }
    reader.drain().map_err(|e| format!("cannot read the ring buffer: {e}"))?;
    drop(reader);
    Ok(records.into_inner())
}
