//! steadytrace: a tracer for the bpftrace language that compiles scripts straight to BPF and keeps
//! every probe firing through CPU hotplug.
//!
//! The pipeline: [`lang`] (text to syntax tree) → [`sema`] (checked program) → [`codegen`] (BPF
//! programs, maps, output records) → [`runtime`] (load, attach, timer thread, event loop) →
//! [`output`] (text as bpftrace prints it).

pub mod cli;
pub mod codegen;
pub(crate) mod functions;
pub mod lang;
pub mod output;
pub mod probes;
pub mod runtime;
pub mod sema;
pub mod symbols;
