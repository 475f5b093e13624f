//! The runtime: loads the compiled script, runs BEGIN, attaches, serves the ring buffer and the timer
//! thread, and on `exit()` or a signal drains the output, detaches, runs END and reports (`trace.rs`).

mod attach;
mod captures;
pub mod child;
mod companions;
mod control;
mod copied_stacks;
mod cpu_rings;
mod cpu_timers;
pub mod cpus;
mod events;
#[cfg(test)]
mod fake;
#[cfg(test)]
mod function_lengths;
mod health;
mod hotplug;
mod iterate;
mod journal;
mod load;
mod maps;
mod metrics;
pub mod namespaces;
mod on_demand;
mod percpu;
mod plan;
mod reader;
mod report;
mod ring;
mod shell;
mod signals;
mod sink;
pub mod timer;
mod trace;

use crate::codegen::{Compiled, FixedMap};
use crate::lang::Diagnostic;
use crate::output::writer::Format;
use crate::probes::{AttachError, Schedule};
use companions::Companions;
use control::Control;
pub use on_demand::Mode;
use plan::Plan;
use reader::{KernelRing, Reader};
use signals::SignalPipe;
use sink::Sink;
use std::cell::RefCell;
use std::io::{self, Write};
use std::sync::Arc;
use std::time::Duration;
use trace::Trace;

/// Why a run could not go on.
#[derive(Debug)]
pub enum Failure {
    /// The kernel refused a program (or its pin): the diagnostic points at the script line responsible.
    Rejected { diagnostic: Diagnostic, log: String },
    /// A system call failed: what steadytrace was doing, and the kernel's error (its errno kept, so
    /// that a refusal can be told from a CPU gone offline).
    Os { what: String, error: io::Error },
    /// A perf event could not be opened (its errno kept).
    PerfEvent(percpu::OpenError),
    /// The reason, said in full.
    Other(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Rejected { diagnostic, .. } => f.write_str(&diagnostic.message),
            Failure::Os { what, error } => {
                let denied = matches!(error.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES))
                    || error.kind() == io::ErrorKind::PermissionDenied;
                let hint = if denied { format!("; {}", bpf_denied()) } else { String::new() };
                write!(f, "{what}: {}{hint}", os_error_text(error))
            }
            Failure::PerfEvent(error) => write!(f, "{error}"),
            Failure::Other(reason) => f.write_str(reason),
        }
    }
}

/// The kernel's error in words, also for the errors the C library has none for.
fn os_error_text(error: &io::Error) -> String {
    match error.raw_os_error() {
        // Kernel-internal: the C library calls it "Unknown error 524".
        Some(bpf::uprobe::ENOTSUPP) => "operation not supported by the kernel (ENOTSUPP, errno 524)".into(),
        _ => error.to_string(),
    }
}

impl From<AttachError> for Failure {
    fn from(error: AttachError) -> Failure {
        match error {
            AttachError::Os { what, error } => Failure::Os { what, error },
            AttachError::Explained(reason) => Failure::Other(reason),
            refused @ AttachError::Refused { .. } => Failure::Other(refused.to_string()),
        }
    }
}

pub struct Settings {
    pub format: Format,
    pub quiet: bool,
    pub verbose: bool,
    /// SCHED_FIFO priority of the timer thread; 0 keeps it an ordinary thread.
    pub timer_priority: u8,
    /// With `--interval-engine perf`: the CPU the interval events start on.
    pub interval_cpu: Option<u32>,
    /// Uprobes fire only in this process (`-p`, or the command of `-c`).
    pub uprobe_pid: Option<u32>,
    /// Config `print_maps_on_exit`: whether the maps are printed when the trace ends.
    pub print_maps_on_exit: bool,
    /// Config `max_cat_bytes`: the most bytes of a file `cat()` prints.
    pub max_cat_bytes: u64,
    /// Config `perf_rb_pages`: the ring buffer's size in pages, instead of the size fitted to the script.
    pub ring_pages: Option<u64>,
    /// `--metrics ADDR`: serve the script's maps as Prometheus metrics there while tracing.
    pub metrics: Option<MetricsSettings>,
    /// Trace, or run the script's `test:` (`--test`) or `bench:` (`--bench`) probes.
    pub mode: Mode,
    /// The output is a terminal: `--test` colours its verdicts.
    pub colour: bool,
    /// Warnings are printed (not `--no-warnings`).
    pub warnings: bool,
    /// `--debuginfo DIR[:DIR]`: where binaries' separate debug files are looked for first.
    pub debug_dirs: crate::symbols::DebugDirs,
}

/// `--metrics ADDR`, `--metrics-max-keys N` and `--metrics-web-config FILE`.
#[derive(Clone)]
pub struct MetricsSettings {
    pub address: std::net::SocketAddr,
    /// The most keys of one map served at a scrape.
    pub max_keys: usize,
    /// TLS, users and headers ([`crate::metrics::web_config::WebConfig::open`] without the flag).
    pub web: std::sync::Arc<crate::metrics::web_config::WebConfig>,
}

/// How a run ended.
pub struct Outcome {
    pub exit_code: i32,
}

fn system(what: &str, error: io::Error) -> Failure {
    Failure::Os { what: what.to_string(), error }
}

/// Runs a compiled script; with `child` (`-c`), the command is released once everything is attached,
/// and tracing ends when it exits. The stages: load, BEGIN, attach, run until told to stop, drain, detach,
/// END, report.
pub fn run(
    compiled: &Compiled,
    settings: &Settings,
    out: &mut dyn Write,
    mut child: Option<&mut child::Child>,
) -> Result<Outcome, Failure> {
    if settings.mode != Mode::Trace {
        return on_demand::run(compiled, settings, out);
    }
    let plan = Plan::new(compiled);
    let n = probes_to_attach(&plan)?;
    // Watch for signals first: a Ctrl-C while probes attach must still run END.
    let signals = SignalPipe::new().map_err(|e| system("cannot watch for signals", e))?;
    check_pins(compiled)?;
    let ring_bytes = ring::events_bytes(compiled, &plan, settings.ring_pages);
    let loaded = load::load(compiled, &plan, ring_bytes)?;
    let mut companions = Companions::start(compiled, settings, &loaded)?;
    if settings.verbose {
        report::describe_probes(compiled, &loaded, ring_bytes);
    }
    if !settings.quiet && settings.format == Format::Json {
        // bpftrace's JSON stream starts with this line, before BEGIN's output.
        let _ = out.write_all(&crate::output::json::attached_probes(n as u64));
    }
    let control = Control::default();
    let sink = RefCell::new(open_sink(out, compiled, settings, &loaded, &companions));
    let reader = reader(&loaded, &sink, &control)?;
    let health = Arc::clone(&companions.health);
    let trace = Trace {
        compiled,
        plan: &plan,
        settings,
        loaded: &loaded,
        signals: &signals,
        control: &control,
        sink: &sink,
        health: &health,
    };

    trace.begin(&reader)?;
    let mut running = trace.attach(n, child.as_deref_mut())?;
    trace.run(&reader, &mut running, child.as_deref().map(child::Child::exit_fd))?;
    trace.drain(&reader)?;
    let stopped = running.detach(child);
    trace.end(&reader)?;
    trace.report(&reader, stopped, &mut companions)
}

/// The output sink of a trace; BEGIN's messages for stderr are held until "Attached N probes".
fn open_sink<'s>(
    out: &'s mut dyn Write,
    compiled: &'s Compiled,
    settings: &Settings,
    loaded: &'s load::Loaded,
    companions: &Companions,
) -> Sink<'s> {
    let mut sink = Sink::new(out, settings.format, compiled, &loaded.maps, Arc::clone(&companions.copies));
    sink.max_cat_bytes = settings.max_cat_bytes;
    sink.warnings = settings.warnings;
    sink.hold_stderr();
    sink.use_debug_dirs(settings.debug_dirs.clone());
    if let Some(journal) = &companions.journal {
        // Copied stacks (`dw_ustack`) of processes gone before their record is read are unwound from it.
        sink.use_journal(journal.journal.clone());
    }
    sink
}

/// The events ring buffer's reader: each record goes to `sink` or `control`.
fn reader<'r>(
    loaded: &'r load::Loaded,
    sink: &'r RefCell<Sink<'_>>,
    control: &'r Control,
) -> Result<Reader<KernelRing<'r>>, Failure> {
    let (events, lost) = (&loaded.maps[FixedMap::Events.index()], &loaded.maps[FixedMap::Lost.index()]);
    let ring = KernelRing::new(events, lost, |data| events::receive(data, &mut sink.borrow_mut(), control))
        .map_err(|e| system("cannot read the ring buffer", e))?;
    Ok(Reader::new(ring))
}

/// How many probes a trace attaches; an error when there is none (only `test:` or `bench:` probes).
fn probes_to_attach(plan: &Plan) -> Result<usize, Failure> {
    let n = plan.traced();
    if n == 0 {
        let (what, flag) = if plan.has(Schedule::Test) { ("test", "--test") } else { ("bench", "--bench") };
        return Err(Failure::Other(format!(
            "no probes to attach: {what} probes run only with {flag} (steadytrace {flag} SCRIPT)"
        )));
    }
    Ok(n)
}

/// Pinned iterators' paths, checked before anything is loaded.
fn check_pins(compiled: &Compiled) -> Result<(), Failure> {
    for point in compiled.programs.iter().map(|p| &p.point) {
        if let Some(path) = point.provider.pinned_at() {
            iterate::check_pin(&point.name, path, point.span)
                .map_err(|diagnostic| Failure::Rejected { diagnostic, log: String::new() })?;
        }
    }
    Ok(())
}

/// How often the event loop reads records that did not wake it (all but the exit record): the most a
/// printf's output waits.
pub const OUTPUT_POLL: Duration = Duration::from_millis(10);

/// Why the kernel refused a `bpf()` call: in a user namespace other than the host's, what became of the BPF
/// token and what the host must delegate; in the host's, the missing capability or what else refused it.
fn bpf_denied() -> String {
    match crate::privilege::initial_user_namespace() {
        true => crate::privilege::bpf_denied(),
        false => crate::bpf_token::user_namespace_advice(),
    }
}
