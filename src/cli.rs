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

    /// Print a stage of the compilation before running, as bpftrace's -d STAGE: `codegen`, `dis` and `all`
    /// print each BPF program's instructions (steadytrace emits them directly); `-d` alone is `dis`. The
    /// other stages bpftrace names (`ast`, `parse`, `types`, `codegen-opt`, `libbpf`, `verifier`) are
    /// refused with the reason
    #[arg(short = 'd', long = "debug", visible_alias = "dump", value_name = "STAGE", num_args = 0..=1,
          default_missing_value = "dis", value_parser = DEBUG_STAGES)]
    pub debug: Option<String>,

    /// Only attach the probes whose attach point, as written, matches the regular expression REGEX (found
    /// anywhere in it); BEGIN and END always run
    #[arg(long = "probe-filter", value_name = "REGEX", value_parser = probe_filter)]
    pub probe_filter: Option<regex_lite::Regex>,

    /// Take these kernel features as absent (comma-separated): bpftrace's `kprobe_multi`, `uprobe_multi`
    /// and `kprobe_session`, or any key of --info's features
    #[arg(long = "no-feature", value_name = "FEATURE[,FEATURE]", value_delimiter = ',', value_parser = no_feature)]
    pub no_feature: Vec<NoFeature>,

    /// Output buffering: `line` writes each line when it is complete, `full` when the buffer is full and at
    /// exit, `none` each piece as it is printed. Default: what each batch of events printed is written
    /// when the batch has been read
    #[arg(short = 'B', value_name = "MODE", value_parser = ["line", "full", "none"])]
    pub buffering: Option<String>,

    /// Print no warnings (the compiler's, failed map updates, `warnf()`, skipped attach points)
    #[arg(long = "no-warnings", conflicts_with = "warnings")]
    pub no_warnings: bool,

    /// Warn of each probe read that fails (a bad pointer), naming the helper and its error, as bpftrace
    /// does; without it, a read that fails gives zeros and says nothing
    #[arg(short = 'k', long = "warnings")]
    pub warnings: bool,

    /// bpftrace's modes: `test` is --test, `bench` is --bench, `codegen` is --dry-run, `format` is
    /// --fmt; `compiler-bench` is refused, not in steadytrace yet
    #[arg(long = "mode", value_name = "MODE", value_parser = ["codegen", "compiler-bench", "bench", "test", "format"])]
    pub mode: Option<String>,

    /// Accepted for bpftrace's sake: USDT semaphores are counted by the kernel (uprobe reference counters)
    /// in every process, so activating them by file path has nothing left to do
    #[arg(long = "usdt-file-activation")]
    pub usdt_file_activation: bool,

    /// Read the traceable kernel functions (kprobe and fentry wildcards, `-l`) from FILE, one a line as in
    /// tracefs's available_filter_functions, instead of from tracefs
    #[arg(long = "traceable-functions", value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub traceable_functions: Option<PathBuf>,

    /// Look for binaries' separate debug files (DWARF for source-line uprobes, symbols of stripped binaries,
    /// `.debug_frame`) in these `:`-separated directories, by build id (`DIR/.build-id/xx/rest.debug`) and
    /// by `.gnu_debuglink` name, before /usr/lib/debug
    #[arg(long = "debuginfo", value_name = "DIR[:DIR]", value_hint = ValueHint::DirPath)]
    pub debuginfo: Option<String>,

    /// Format the script and print it, as bpftrace's --fmt
    #[arg(long = "fmt")]
    pub fmt: bool,

    /// Write the BPF programs and maps as an ELF object to FILE that libbpf and bpftool load, then run as
    /// usual (as bpftrace's --emit-elf; --dry-run stops after writing)
    #[arg(long = "emit-elf", value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub emit_elf: Option<PathBuf>,

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

    /// With --metrics: TLS, client certificates, basic-auth users and response headers for the endpoint, from
    /// a Prometheus web configuration file (the format node_exporter and Prometheus read; see docs/METRICS.md)
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath, requires = "metrics")]
    pub metrics_web_config: Option<std::path::PathBuf>,

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
    /// The words after the script, positional and named parameters: with -e, FILE is the first of them.
    /// The `--` that ends steadytrace's own options (`script.bt 1 -- --name=value`) is none of them: clap
    /// leaves it among the words when a positional parameter comes before it.
    pub fn positional(&self) -> Vec<String> {
        let mut words: Vec<String> = match (&self.program, &self.file) {
            (Some(_), Some(first)) => std::iter::once(first.to_string_lossy().into_owned())
                .chain(self.params.iter().cloned())
                .collect(),
            _ => self.params.clone(),
        };
        if let Some(separator) = words.iter().position(|word| word == "--") {
            words.remove(separator);
        }
        words
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

/// bpftrace's `-d` stages (with those of its debug builds, `parse` and `dis`).
const DEBUG_STAGES: [&str; 9] =
    ["all", "ast", "types", "codegen", "codegen-opt", "libbpf", "verifier", "parse", "dis"];

/// `--probe-filter REGEX`.
fn probe_filter(text: &str) -> Result<regex_lite::Regex, String> {
    regex_lite::Regex::new(text).map_err(|e| format!("invalid --probe-filter regex: {e}"))
}

/// One name of `--no-feature`: the feature it takes away (bpftrace's three names are keys of `--info`'s).
#[derive(Clone, Copy, Debug)]
pub struct NoFeature(pub bpf::features::Feature);

/// A name of `--no-feature`: a key of `--info`'s features.
fn no_feature(name: &str) -> Result<NoFeature, String> {
    bpf::features::by_key(name).map(NoFeature).ok_or_else(|| {
        let known: Vec<&str> = bpf::features::Feature::ALL.iter().map(|f| f.key()).collect();
        format!("no kernel feature `{name}` (known: {})", known.join(", "))
    })
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
