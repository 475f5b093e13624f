//! Command-line options.

use crate::output::writer::Format;
use crate::probes::IntervalEngine;
use clap::builder::PossibleValue;
use clap::{Parser, ValueEnum, ValueHint};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "steadytrace",
    version,
    about = "Trace Linux with bpftrace scripts, compiled straight to BPF; probes keep firing through CPU hotplug",
    after_help = "Examples:\n  steadytrace -e 'BEGIN { printf(\"hello\\n\"); exit(); }'\n  steadytrace -e 'interval:s:1 { printf(\"%d\\n\", elapsed / 1000000000); }'\n  steadytrace examples/hello.bt"
)]
pub struct Cli {
    /// The script file to run (its first line may be `#!/usr/bin/env steadytrace`); with -l, a pattern
    #[arg(
        value_name = "FILE",
        value_hint = ValueHint::FilePath,
        required_unless_present_any = ["program", "list", "info"]
    )]
    pub file: Option<PathBuf>,

    /// The script's positional parameters `$1`, `$2`, ... (after FILE, or after -e PROGRAM); `$#` is
    /// their number
    #[arg(value_name = "PARAM", trailing_var_arg = true, allow_hyphen_values = true)]
    pub params: Vec<String>,

    /// List the probes (tracepoints, software and hardware events, a binary's functions with
    /// 'uprobe:PATH:*') matching the pattern given as FILE; with -v, a tracepoint's fields too
    #[arg(short = 'l')]
    pub list: bool,

    /// Run COMMAND (started once the probes are attached) and trace until it exits; `cpid` is its pid
    /// and uprobes fire only in it
    #[arg(short = 'c', value_name = "COMMAND", value_hint = ValueHint::CommandString)]
    pub command: Option<String>,

    /// Look for the headers `#include` names in DIR before the system's directories (repeatable)
    #[arg(short = 'I', value_name = "DIR")]
    pub include_dirs: Vec<std::path::PathBuf>,

    /// Take the constants of header FILE as if the script began with `#include "FILE"` (repeatable)
    #[arg(long = "include", value_name = "FILE")]
    pub includes: Vec<String>,

    /// Make a BPF token from the delegated BPF filesystem at PATH and use it for every bpf() call (a rootless
    /// container, Linux 6.9+); by default LIBBPF_BPF_TOKEN_PATH, else /sys/fs/bpf inside a user namespace
    #[arg(long = "bpf-token", value_name = "PATH", value_hint = ValueHint::DirPath)]
    pub bpf_token: Option<PathBuf>,

    /// Whose events kernel probes act on when steadytrace has a pid namespace of its own (a container):
    /// `namespace`, only its tasks; `host`, every task (those outside read as pid 0). Default: namespace
    /// in a rootless container (a user namespace other than the host's), host elsewhere, as bpftrace
    #[arg(long = "scope", value_name = "SCOPE", value_parser = ["namespace", "host"])]
    pub scope: Option<String>,

    /// Read kernel symbols from FILE, a copy of the host's /proc/kallsyms, where /proc/kallsyms shows only
    /// zeros (a rootless container)
    #[arg(long = "kallsyms", value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub kallsyms: Option<PathBuf>,

    /// Allow the functions that act on the system rather than observe it: `system()` runs commands,
    /// `signal()` and `signal_thread()` send signals
    #[arg(long = "unsafe")]
    pub allow_unsafe: bool,

    /// How `ustack` walks user stacks: along frame pointers in the kernel (fp, as bpftrace), or from a copy
    /// of the stack unwound with the binaries' DWARF call frame information (dwarf, as `dw_ustack`), which
    /// also walks code built without frame pointers
    #[arg(long = "unwind", value_name = "HOW", default_value = "fp", value_parser = ["fp", "dwarf"])]
    pub unwind: String,

    /// Accepted for bpftrace's sake: `dw_ustack` unwinds the stacks of every process without being told
    /// which
    #[arg(long = "dwarf-pid", value_name = "PID", hide = true)]
    pub dwarf_pid: Option<u32>,

    /// Run this program text instead of a file
    #[arg(short = 'e', value_name = "PROGRAM", value_hint = ValueHint::Other)]
    pub program: Option<String>,

    /// Output format: text as bpftrace prints it, bpftrace's JSON lines, or text with stack-keyed maps
    /// as folded lines for flame graphs
    #[arg(short = 'f', long = "format", value_name = "FORMAT", default_value = "text")]
    pub format: Format,

    /// Write the output to FILE instead of standard output
    #[arg(short = 'o', value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub output: Option<PathBuf>,

    /// Only trace this process: probes that fire in any process act only for it
    #[arg(short = 'p', value_name = "PID", value_hint = ValueHint::Other)]
    pub pid: Option<u32>,

    /// What fires interval probes: steadytrace's timer thread, or a CPU-clock perf event on one CPU
    /// (as bpftrace does, but moved to another CPU when its CPU goes offline), for comparison
    #[arg(long, value_name = "ENGINE", default_value = "timer")]
    pub interval_engine: IntervalEngine,

    /// With --interval-engine perf: the CPU the interval events start on (default: the first online)
    #[arg(long, value_name = "CPU", requires = "interval_engine")]
    pub interval_cpu: Option<u32>,

    /// Do not print "Attached N probes"
    #[arg(short, long)]
    pub quiet: bool,

    /// Say more: how probes attach, and the verifier's whole log when it rejects a program
    #[arg(short, long)]
    pub verbose: bool,

    /// Print each BPF program's instructions before running
    #[arg(short = 'd', long = "dump")]
    pub dump: bool,

    /// SCHED_FIFO priority (1-99) of the thread that fires interval probes, or 0 for an ordinary
    /// thread; without permission for real-time scheduling it runs as an ordinary thread
    #[arg(long, value_name = "N", default_value_t = crate::runtime::timer::DEFAULT_PRIORITY, value_parser = clap::value_parser!(u8).range(0..=99))]
    pub timer_priority: u8,

    /// Serve the script's maps as Prometheus metrics at http://ADDR/metrics while tracing (OpenMetrics
    /// text: counts as counters, hist/lhist as histograms, keys as labels), e.g. 127.0.0.1:9435
    #[arg(long, value_name = "ADDR", value_parser = metrics_address, conflicts_with_all = ["dry_run", "list", "info"])]
    pub metrics: Option<std::net::SocketAddr>,

    /// With --metrics: the most keys of one map served at a scrape; a map with more serves those with the
    /// largest values, and steadytrace_metrics_keys_left_out says how many were left out
    #[arg(long, value_name = "N", default_value_t = crate::metrics::DEFAULT_MAX_KEYS, requires = "metrics", value_parser = clap::value_parser!(u64).range(1..))]
    pub metrics_max_keys: u64,

    /// Print what this kernel and this process allow (BTF, lockdown, perf_event_open, capabilities,
    /// program and link types, tracefs, CPU hotplug, engines used), then stop; with -f json, as one object
    #[arg(long)]
    pub info: bool,

    /// Check and compile the script, then stop: nothing is loaded into the kernel
    #[arg(long)]
    pub dry_run: bool,

    /// Run the script's test probes (`test:NAME`) one after another, each once, and say which passed (a
    /// test fails when it returns non-zero, exits with a non-zero code or reports an errorf); nothing
    /// is attached
    #[arg(long, conflicts_with_all = ["bench", "metrics", "command", "list", "info"])]
    pub test: bool,

    /// Run the script's benchmark probes (`bench:NAME`), each until it has taken a millisecond, and
    /// print the time of one run; nothing is attached
    #[arg(long, conflicts_with_all = ["metrics", "command", "list", "info"])]
    pub bench: bool,
}

impl Cli {
    /// The script's positional parameters: with -e, FILE is the first of them.
    pub fn positional(&self) -> Vec<String> {
        match (&self.program, &self.file) {
            (Some(_), Some(first)) => std::iter::once(first.to_string_lossy().into_owned())
                .chain(self.params.iter().cloned())
                .collect(),
            _ => self.params.clone(),
        }
    }
}

// Implemented rather than derived: a derive would put the variants' documentation into `--help`, which
// lists the values on one line and lets the option's own text explain them.

impl ValueEnum for Format {
    fn value_variants<'a>() -> &'a [Self] {
        &[Format::Text, Format::Json, Format::Folded]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(match self {
            Format::Text => "text",
            Format::Json => "json",
            Format::Folded => "folded",
        }))
    }
}

impl ValueEnum for IntervalEngine {
    fn value_variants<'a>() -> &'a [Self] {
        &[IntervalEngine::Timer, IntervalEngine::Perf]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(match self {
            IntervalEngine::Timer => "timer",
            IntervalEngine::Perf => "perf",
        }))
    }
}

/// `--metrics ADDR`: `IP:PORT`, `[IPv6]:PORT`, `HOST:PORT` (resolved now), or `:PORT` for every interface.
fn metrics_address(text: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let wanted = || format!("expected IP:PORT, HOST:PORT or :PORT (e.g. 127.0.0.1:9435), not `{text}`");
    if let Some(port) = text.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| wanted())?;
        return Ok(std::net::SocketAddr::from(([0, 0, 0, 0], port)));
    }
    if let Ok(address) = text.parse() {
        return Ok(address);
    }
    if !text.contains(':') {
        return Err(wanted());
    }
    match text.to_socket_addrs() {
        Ok(mut addresses) => addresses.next().ok_or_else(wanted),
        Err(e) => Err(format!("cannot resolve `{text}`: {e}")),
    }
}
