//! Sampling every CPU with no perf event, in the kernel: the maps of the per-CPU BPF timers, the arming
//! and gate programs loaded, the gate attached to its raw tracepoint, each CPU's timer armed from a thread
//! on that CPU. What the programs do, and why on that tracepoint, is `code/cpu_timer.rs`.

use crate::code::cpu_timer::{
    arming_program, frame_count_program, gate_program, FIELDS, MAX_FRAMES, NEXT, TRACEPOINT,
};
use crate::code::map::{MapKind, MapSpec};
use crate::code::prog::{AttachMode, ProgType};
use crate::sys::map::Map;
use crate::sys::prog::{load, Program};
use crate::sys::timer::TimerMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

/// A timer on every CPU it is armed on, each firing the target program every period.
pub struct CpuTimers {
    timers: TimerMap,
    period_ns: u64,
    starter: Program,
    _awaited: Map,
    _targets: Map,
    _gate: Program,
    _link: OwnedFd,
}

impl CpuTimers {
    /// Attaches the gate that runs `target` (a raw tracepoint program) for the timers' samples; no timer is
    /// armed yet. `softexpires` is the offset of `_softexpires` in the kernel's `struct hrtimer` (its BTF).
    pub fn start(target: BorrowedFd<'_>, period_ns: u64, softexpires: i16) -> Result<CpuTimers, String> {
        let cpus = libbpf_rs::num_possible_cpus().unwrap_or(1).max(1) as u32;
        let timers = TimerMap::create("st_cpu_timers", cpus, FIELDS)
            .map_err(|e| format!("cannot create the map of the BPF timers: {e}"))?;
        let spec = |name: &str, kind, value_size| MapSpec {
            name: name.into(),
            kind,
            key_size: 4,
            value_size,
            max_entries: 1,
        };
        let awaited = Map::create(&spec("st_awaited", MapKind::PercpuArray, 8))
            .map_err(|e| format!("cannot create the map of awaited deadlines: {e}"))?;
        let targets = Map::create(&spec("st_targets", MapKind::ProgArray, 4))
            .map_err(|e| format!("cannot create the program array: {e}"))?;
        targets
            .update(&0u32.to_ne_bytes(), &target.as_raw_fd().to_ne_bytes())
            .map_err(|e| format!("cannot put the probe's program in the program array: {e}"))?;
        let starter = load(
            "st_arm_timer",
            ProgType::SchedCls,
            AttachMode::PerfEvent,
            &arming_program(&timers.fields),
            &[timers.map.as_fd(), awaited.as_fd()],
        )
        .map_err(|e| format!("the kernel refused the program arming the BPF timers: {}", e.reason))?;
        let gate = load(
            "st_timer_gate",
            ProgType::RawTracepoint,
            AttachMode::PerfEvent,
            &gate_program(softexpires),
            &[awaited.as_fd(), targets.as_fd()],
        )
        .map_err(|e| {
            format!("the kernel refused the program sampling in the timer's softirq: {}", e.reason)
        })?;
        let link = crate::sys::perf::attach_raw_tracepoint(gate.as_fd(), TRACEPOINT)
            .map_err(|e| format!("cannot attach to the raw tracepoint {TRACEPOINT}: {e}"))?;
        Ok(CpuTimers {
            timers,
            period_ns,
            starter,
            _awaited: awaited,
            _targets: targets,
            _gate: gate,
            _link: link,
        })
    }

    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }

    /// Arms `cpu`'s timer for `first` (CLOCK_MONOTONIC ns), then every period after it. Call it from a
    /// thread running on `cpu`: the timer stays on the CPU that arms it. EXDEV when the thread was not there.
    pub fn arm_here(&self, cpu: u32, first: u64) -> io::Result<()> {
        let value = self.timers.value(&[first, self.period_ns, u64::from(cpu) + 1]);
        self.timers.map.update(&cpu.to_ne_bytes(), &value)?;
        match self.starter.run_on_packet(&[0u8; 14])? as i32 {
            0 => Ok(()),
            error => Err(io::Error::from_raw_os_error(-error)),
        }
    }

    /// Cancels `cpu`'s timer (writing its element from userspace cancels and frees it).
    pub fn disarm(&self, cpu: u32) -> io::Result<()> {
        self.timers.map.update(&cpu.to_ne_bytes(), &self.timers.value(&[]))
    }

    /// The deadline `cpu`'s timer is armed for; 0 when it stopped (its CPU went offline and the kernel
    /// moved it to another CPU, where it does not re-arm) or was never armed.
    pub fn next_deadline(&self, cpu: u32) -> io::Result<u64> {
        let value = self.timers.map.lookup(&cpu.to_ne_bytes())?.unwrap_or_default();
        let at = self.timers.fields[NEXT] as usize;
        Ok(value.get(at..at + 8).map_or(0, |b| u64::from_ne_bytes(b.try_into().expect("8 bytes"))))
    }
}

/// A target for [`CpuTimers`] that finds where the timer's softirq ends in a kernel stack: it keeps the
/// fewest kernel stack frames of its samples, and the last of them. Sampling a CPU where a thread spins in
/// user mode, where the interrupted code adds no frame, that is the softirq's own (a sample of kernel code,
/// of the idle task or of a deferred softirq has more), and the last frame is the return address into the
/// timer interrupt's entry, after which the interrupted code's frames begin.
pub struct FrameCount {
    fewest: Map,
    program: Program,
}

/// The frames of the sample with the fewest, and the last of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fewest {
    pub frames: u32,
    pub last: u64,
}

impl FrameCount {
    pub fn new() -> Result<FrameCount, String> {
        let spec = MapSpec {
            name: "st_frames".into(),
            kind: MapKind::Array,
            key_size: 4,
            // The fewest frames, the last of them, then the frames of the latest sample.
            value_size: 16 + 8 * MAX_FRAMES,
            max_entries: 1,
        };
        let fewest = Map::create(&spec).map_err(|e| format!("cannot create the frame count's map: {e}"))?;
        let program = load(
            "st_frame_count",
            ProgType::RawTracepoint,
            AttachMode::PerfEvent,
            &frame_count_program(),
            &[fewest.as_fd()],
        )
        .map_err(|e| format!("the kernel refused the program counting stack frames: {}", e.reason))?;
        Ok(FrameCount { fewest, program })
    }

    pub fn program(&self) -> BorrowedFd<'_> {
        self.program.as_fd()
    }

    /// The sample with the fewest frames, if there was one.
    pub fn fewest(&self) -> io::Result<Option<Fewest>> {
        let value = self.fewest.lookup(&0u32.to_ne_bytes())?.unwrap_or_default();
        let word = |i: usize| {
            value.get(8 * i..8 * i + 8).map_or(0, |b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
        };
        Ok((word(0) > 0).then(|| Fewest { frames: word(0) as u32, last: word(1) }))
    }
}
