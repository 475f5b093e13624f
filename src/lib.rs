//! steadytrace: a tracer for the bpftrace language that compiles scripts straight to BPF and keeps
//! every probe firing through CPU hotplug.
//!
//! The pipeline: [`lang`] (text to syntax tree) → [`sema`] (checked program) → [`codegen`] (BPF
//! programs, maps, output records) → [`runtime`] (load, attach, timer thread, event loop) →
//! [`output`] (text as bpftrace prints it).

// Unsafe code lives only in `sys` (and in the `bpf` and `trigger` crates). Unit tests are exempt, as
// integration tests are: their `#[no_mangle]` markers give the symbol tests known names.
#![cfg_attr(not(test), deny(unsafe_code))]

/// Writes a line to stderr like `eprintln!`, but a failed write (stderr on a full disk, a closed pipe) is
/// ignored instead of panicking: a message that cannot be shown must never end a trace.
#[macro_export]
macro_rules! stderr {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod apk;
pub mod bench;
pub mod bpf_token;
pub mod cli;
pub mod clocks;
pub mod codegen;
pub mod completions;
pub mod config;
pub mod executable;
pub(crate) mod functions;
pub mod info;
pub mod kernel;
pub mod lang;
pub mod manpage;
pub mod metrics;
pub mod online_cpus;
pub mod output;
pub mod pipeline;
pub mod privilege;
pub mod probes;
pub mod runtime;
pub mod sema;
pub mod symbols;
#[allow(unsafe_code)]
mod sys;
pub use sys::prepare_process;
