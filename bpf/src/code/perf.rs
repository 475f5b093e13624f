//! Perf events as data: what one counts or samples ([`PerfEventSpec`], which probe providers build and
//! `sys/perf.rs` opens), the numbers of `perf_event_attr` that describe it, and the kinds of the records
//! perf rings hold.

/// `perf_event_attr.type` values.
pub const TYPE_HARDWARE: u32 = 0;
pub const TYPE_SOFTWARE: u32 = 1;
/// `PERF_TYPE_TRACEPOINT`: `config` is a tracepoint's id (from its tracefs `id` file).
pub const TYPE_TRACEPOINT: u32 = 2;
/// `PERF_COUNT_SW_CPU_CLOCK`: a timer, firing on the CPU the event is opened on.
pub const SW_CPU_CLOCK: u64 = 0;
/// `PERF_TYPE_BREAKPOINT`: a hardware breakpoint, `config1` its address and `config2` its length.
pub const TYPE_BREAKPOINT: u32 = 5;

/// What a perf event counts or samples.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfEventSpec {
    pub type_: u32,
    pub config: u64,
    pub config1: u64,
    pub config2: u64,
    /// Sample every `period` events, or `frequency` times a second.
    pub sample: Sample,
    /// A breakpoint's `HW_BREAKPOINT_R`/`W`/`X` bits; 0 for other events.
    pub bp_type: u32,
    /// Whether threads the event's thread creates later get the event too (a process's watchpoint).
    pub inherit: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sample {
    Period(u64),
    Frequency(u64),
}

/// The kinds of records in a perf event's ring (`perf_event_header.type`).
pub(crate) const RECORD_LOST: u32 = 2;
pub(crate) const RECORD_COMM: u32 = 3;
pub(crate) const RECORD_EXIT: u32 = 4;
pub(crate) const RECORD_FORK: u32 = 7;
pub(crate) const RECORD_SAMPLE: u32 = 9;
pub(crate) const RECORD_MMAP2: u32 = 10;
