//! The size of the ring buffer, sized to the script: the kernel maps all of a ring buffer's pages into the
//! reader, twice, so every byte of it is resident memory from the start (a 1 MiB ring was 2 MiB of the
//! tracer's 7 MiB).
//!
//! Where the kernel's events print, the ring keeps the size code generation chose (room for a burst while the
//! reader is scheduled out). Where only steadytrace's own probes print (BEGIN, END, intervals, `test:`,
//! `self:signal`), what they can write between two reads is known from their instructions when no ring buffer
//! write is in a loop: BEGIN's probes all run before the reader looks, END's too, each test is read after it
//! ran, and an interval's firings are read every [`OUTPUT_POLL`](super::OUTPUT_POLL), here allowed
//! [`READER_DELAY`] of delay. Config `perf_rb_pages` sets the size outright.

use super::plan::Plan;
use crate::codegen::{Compiled, FixedMap};
use crate::probes::Schedule;
use std::time::Duration;

/// How long the reader may fall behind interval probes before their records are lost (a reader blocked
/// writing to a slow consumer): ten seconds of their firings.
const READER_DELAY: Duration = Duration::from_secs(10);

/// The events ring buffer's size in bytes for `compiled`; `pages`: config `perf_rb_pages`.
pub fn events_bytes(compiled: &Compiled, plan: &Plan, pages: Option<u64>) -> u32 {
    let page = bpf::perf::page_size();
    if let Some(pages) = pages {
        let bytes = pages.max(1).saturating_mul(page).next_power_of_two();
        return u32::try_from(bytes).unwrap_or(1 << 31);
    }
    let chosen = compiled.maps[FixedMap::Events.index()].max_entries;
    let Some((once, every)) = needed(compiled, plan) else { return chosen };
    // All that BEGIN (or END) writes, whatever it takes; intervals' firings up to the size chosen before.
    let bytes = once.next_power_of_two().max(every.next_power_of_two().min(chosen as u64)).max(page);
    u32::try_from(bytes).unwrap_or(1 << 31)
}

/// The most the ring must hold between two reads, when only steadytrace's own probes write to it and the
/// bound of each is known: what BEGIN's or END's probes write, and what the intervals' do in
/// [`READER_DELAY`].
fn needed(compiled: &Compiled, plan: &Plan) -> Option<(u64, u64)> {
    let (mut begin, mut end, mut test, mut every) = (0u64, 0u64, 0u64, 0u64);
    for (program, schedule) in compiled.programs.iter().zip(plan.schedules()) {
        let writes = || program.code.map_relocs.iter().any(|r| r.map == FixedMap::Events.index());
        if schedule == Schedule::Kernel {
            if writes() {
                return None;
            }
            continue;
        }
        let bound = program.code.ring_bytes_bound()?;
        match schedule {
            Schedule::Begin => begin += bound,
            Schedule::End => end += bound,
            // Each test is read before the next runs.
            Schedule::Test => test = test.max(bound),
            // A benchmark runs many times over before its output is read.
            Schedule::Bench if bound > 0 => return None,
            Schedule::Bench => {}
            Schedule::Every(period) => {
                let firings = 1 + READER_DELAY.as_nanos() / period.as_nanos().max(1);
                every = every.saturating_add(bound.saturating_mul(firings.min(u64::MAX as u128) as u64));
            }
            // Once per SIGUSR1, read before the next: beside the intervals' records.
            Schedule::Signal => every = every.saturating_add(bound),
            Schedule::Kernel => {}
        }
    }
    Some((begin.max(end).max(test), every))
}
