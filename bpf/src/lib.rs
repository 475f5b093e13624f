//! The machine layer of steadytrace: BPF instructions and their disassembly, maps, program load
//! with the verifier's log, attach primitives (perf events, uprobes, kprobe_multi links) and the ring buffer consumer.
//!
//! It knows nothing of the tracing language: callers hand it instructions and map descriptions.

pub mod arch;
pub mod bound;
pub mod btf;
pub mod cpu_timer;
pub mod disasm;
pub mod features;
pub mod helper;
pub mod insn;
pub mod iter;
pub mod kprobe;
mod link;
pub mod map;
pub mod mappings;
pub mod perf;
pub mod perf_output;
pub mod perf_ring;
pub mod prog;
pub mod ringbuf;
pub mod testing;
pub mod timer;
pub mod token;
pub mod trampoline;
pub mod uprobe;

pub use helper::Helper;
pub use insn::{Alu, Asm, AsmError, Code, Cond, Insn, Label, Reg, Size};
pub use libbpf_rs::MapCore;
pub use map::{Map, MapKind, MapSpec};
pub use prog::{load, AttachMode, LoadError, ProgType, Program};
pub use uprobe::{Uprobe, UprobeTarget};
