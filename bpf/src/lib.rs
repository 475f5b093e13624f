//! The machine layer of steadytrace: BPF instructions and their disassembly, maps, program load
//! with the verifier's log, attach primitives (perf events, uprobes, kprobe_multi links) and the ring buffer
//! consumer. It knows nothing of the tracing language: callers hand it instructions and map descriptions.
//!
//! It is two halves. `code/` makes no system call: instructions, helper ids, disassembly, architectures,
//! the BTF steadytrace writes, the table of kernel features, the programs of BPF timers, and the plain data
//! the other half takes and gives back (program types, map and perf event descriptions, decoded records,
//! the verifier's log read); it is tested anywhere, without root. `sys/` asks the kernel, through
//! libbpf-sys, libbpf-rs and libc: maps created, programs loaded, events opened, links made, rings read,
//! features probed. `sys/` uses `code/`, never the other way (bpf/tests/layers.rs checks it).
//!
//! The halves are private: the modules and re-exports below are the crate's public names, the paths the
//! tracer uses (`bpf::insn::Asm`, `bpf::prog::load`, `bpf::features::Features`), each module gathering what
//! either half holds of it.

/// A [`named_numbers::NamedNumbers`] written as `NAME = NUMBER` pairs: `named_numbers! { read = 0, write = 1 }`.
/// Defined here, before the modules, so that `code/`'s tables use it by name.
#[macro_export]
macro_rules! named_numbers {
    ($($name:ident = $number:expr),* $(,)?) => {
        $crate::named_numbers::NamedNumbers::new(concat!($(stringify!($name), " "),*), &[$($number),*])
    };
}

mod code;
mod sys;

pub use code::{arch, bound, disasm, elf, helper, insn, named_numbers, session};
pub use sys::{btf, iter, kprobe, perf_ring, ringbuf, testing, token, trampoline, uprobe};

/// Sampling every CPU with no perf event: a BPF timer pinned to each CPU and a gate program that runs the
/// probe's program in the context the timer interrupted (`code/cpu_timer.rs` says how).
pub mod cpu_timer {
    pub use crate::code::cpu_timer::TRACEPOINT;
    pub use crate::sys::cpu_timer::{CpuTimers, Fewest, FrameCount};
}

/// The kernel features generated programs and the runtime may use: the table, and whether the running
/// kernel has each.
pub mod features {
    pub use crate::code::features::{by_key, Feature};
    pub use crate::sys::features::{fentry, kfunc_allowed, tp_btf, Features};
}

/// BPF maps: their descriptions, and the maps the kernel created from them.
pub mod map {
    pub use crate::code::map::{MapKind, MapSpec};
    pub use crate::sys::map::Map;
}

/// The kernel's journal of what processes map, exec, fork and exit: its records, and the per-CPU events
/// that write them.
pub mod mappings {
    pub use crate::code::mappings::{decode, Record};
    pub use crate::sys::mappings::MappingEvents;
}

/// Perf events: what one counts or samples, and the events opened and attached.
pub mod perf {
    pub use crate::code::perf::{
        PerfEventSpec, Sample, SW_CPU_CLOCK, TYPE_BREAKPOINT, TYPE_HARDWARE, TYPE_SOFTWARE, TYPE_TRACEPOINT,
    };
    pub use crate::sys::perf::{
        attach_raw_tracepoint, attach_trace_event, page_size, pmu_type, PerfEvent, TraceEvent,
    };
}

/// The rings `bpf_skb_output` writes into: what they hold, and the per-CPU events that own them.
pub mod perf_output {
    pub use crate::code::perf_output::Output;
    pub use crate::sys::perf_output::PerfOutput;
}

/// Programs: their types and attach modes, and loading them with the verifier's log.
pub mod prog {
    pub use crate::code::prog::{AttachMode, ProgType, TrampolineTarget};
    pub use crate::sys::prog::{load, load_named, loaded_functions, LoadError, LoadedFunction, Program};
}

/// BPF timers: the code that arms one, and the map holding them.
pub mod timer {
    pub use crate::code::timer::{emit_lookup_first, emit_start, CLOCK_MONOTONIC, TIMER_ABS, TIMER_CPU_PIN};
    pub use crate::sys::timer::TimerMap;
}

pub use helper::Helper;
pub use insn::{Alu, Asm, AsmError, Code, Cond, Insn, Label, Reg, Size};
pub use libbpf_rs::MapCore;
pub use map::{Map, MapKind, MapSpec};
pub use prog::{load, load_named, AttachMode, LoadError, ProgType, Program, TrampolineTarget};
pub use uprobe::{Uprobe, UprobeTarget};
