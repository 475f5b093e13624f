//! The pure half of the machine layer: everything about BPF that makes no system call, so that it is
//! tested anywhere, without root or a kernel (after aya's `aya-obj`). Instructions and their assembler
//! (`insn.rs`), helper ids (`helper.rs`), the disassembler (`disasm.rs`), the ring buffer bound read from
//! the instructions (`bound.rs`), the architectures (`arch/`), the BTF steadytrace writes (`btf.rs`), the
//! ELF object of `--emit-elf` (`elf.rs`); and
//! the plain data the system-call half takes or gives back: program types and attach modes with the
//! verifier's log read (`prog.rs`), map descriptions (`map.rs`), perf event descriptions and record kinds
//! (`perf.rs`), the table of kernel features (`features.rs`), the programs of BPF timers (`timer.rs`,
//! `cpu_timer.rs`), and the records of perf rings decoded (`mappings.rs`, `perf_output.rs`).
//!
//! Nothing here imports `sys/`, libc, nix, libbpf-sys or libbpf-rs, or touches files or processes
//! (bpf/tests/layers.rs checks it); `unsafe` is forbidden.

#![forbid(unsafe_code)]

pub mod arch;
pub mod bound;
pub mod btf;
pub mod cpu_timer;
pub mod disasm;
pub mod elf;
pub mod features;
pub mod helper;
pub mod insn;
pub mod map;
pub mod mappings;
pub mod named_numbers;
pub mod perf;
pub mod perf_output;
pub mod prog;
pub mod session;
pub mod timer;
