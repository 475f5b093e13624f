//! The system-call half of the machine layer: everything that asks the kernel, through libbpf-sys,
//! libbpf-rs or libc. Creating maps (`map.rs`), loading programs (`prog.rs`) and their BTF (`btf.rs`),
//! perf events (`perf.rs`), links and what attaches through them (`link.rs`, `kprobe.rs`, `uprobe.rs`,
//! `trampoline.rs`, `iter.rs`), the ring buffer reader (`ringbuf.rs`), perf rings and what reads them
//! (`perf_ring.rs`, `mappings.rs`, `perf_output.rs`), BPF timers in the kernel (`timer.rs`,
//! `cpu_timer.rs`), the BPF token (`token.rs`), finding out the kernel's features (`features.rs`), and
//! the skip log of unit tests (`testing.rs`). What these take and give back is `code/`'s plain data.

pub mod btf;
pub mod cpu_timer;
pub mod features;
pub mod iter;
pub mod kprobe;
pub(crate) mod link;
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
