//! The runtime: loads the compiled script, runs BEGIN, serves the ring buffer and the timer thread,
//! and on `exit()` or a signal stops the timer, runs END, drains the last output and detaches.

mod attach;
mod captures;
pub mod child;
mod copied_stacks;
mod cpu_rings;
mod cpu_timers;
pub mod cpus;
mod events;
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
mod ring;
mod shell;
pub mod timer;

use crate::codegen::{Compiled, FixedMap};
use crate::lang::Diagnostic;
use crate::output::writer::Format;
use crate::probes::{AttachError, AttachTarget, Schedule};
use bpf::{AttachMode, Map};
use events::{drain, SignalPipe, Sink};
use health::Health;
use hotplug::HotplugThread;
pub use on_demand::Mode;
use percpu::{PerfProbe, PerfProbes, Placement, Revivals, Source};
use std::cell::RefCell;
use std::io::{self, Write};
use std::sync::Arc;
use std::time::Duration;
use timer::{Interval, Timer};

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
}

/// `--metrics ADDR` and `--metrics-max-keys N`.
#[derive(Clone, Copy, Debug)]
pub struct MetricsSettings {
    pub address: std::net::SocketAddr,
    /// The most keys of one map served at a scrape.
    pub max_keys: usize,
}

/// How a run ended.
pub struct Outcome {
    pub exit_code: i32,
}

fn system(what: &str, error: io::Error) -> Failure {
    Failure::Os { what: what.to_string(), error }
}

/// Runs every probe of `schedule` (BEGIN or END), in script order.
fn fire_all(compiled: &Compiled, loaded: &load::Loaded, schedule: Schedule) -> Result<(), Failure> {
    for (program, firing) in compiled.programs.iter().zip(&loaded.firings) {
        if program.point.provider.schedule() == schedule {
            firing.fire().map_err(|e| system(&format!("cannot run {}", program.point.name), e))?;
        }
    }
    Ok(())
}

/// Runs a compiled script; with `child` (`-c`), the command is released once everything is attached,
/// and tracing ends when it exits. The stages: load, BEGIN, attach, start firing, trace until told to stop,
/// then stop, END and report.
pub fn run(
    compiled: &Compiled,
    settings: &Settings,
    out: &mut dyn Write,
    mut child: Option<&mut child::Child>,
) -> Result<Outcome, Failure> {
    if settings.mode != Mode::Trace {
        return on_demand::run(compiled, settings, out);
    }
    let n = probes_to_attach(compiled)?;
    // Watch for signals first: a Ctrl-C while probes attach must still run END.
    let signals = SignalPipe::new().map_err(|e| system("cannot watch for signals", e))?;
    check_pins(compiled)?;
    let ring_bytes = ring::events_bytes(compiled, settings.ring_pages);
    let loaded = load::load(compiled, ring_bytes)?;
    let journal = start_journal(compiled, settings.verbose);
    let captures = start_captures(compiled, &loaded, settings.ring_pages)?;
    let health = Arc::new(Health::default());
    let copies = copied_stacks::SharedCopies::default();
    let _metrics = start_metrics(compiled, settings, &loaded, &health, &copies)?;
    if settings.verbose {
        describe_probes(compiled, &loaded, ring_bytes);
    }
    if !settings.quiet && settings.format == Format::Json {
        // bpftrace's JSON stream starts with this line, before BEGIN's output.
        let _ = out.write_all(&crate::output::json::attached_probes(n as u64));
    }
    let mut sink = Sink::new(out, settings.format, compiled, &loaded.maps, Arc::clone(&copies));
    sink.max_cat_bytes = settings.max_cat_bytes;
    sink.hold_stderr();
    if let Some(journal) = &journal {
        // Copied stacks (`dw_ustack`) of processes gone before their record is read are unwound from it.
        sink.use_journal(journal.journal.clone());
    }
    let sink = RefCell::new(sink);
    let reader = bpf::ringbuf::RingBufReader::new(&loaded.maps[FixedMap::Events.index()], |data| {
        sink.borrow_mut().record(data)
    })
    .map_err(|e| system("cannot read the ring buffer", e))?;

    // BEGIN runs synchronously, before the kernel's probes are attached (as in bpftrace): its output comes
    // before any event, also before events of steadytrace's own attaching. It is read now (an exit() in it
    // attaches nothing more) and written out after "Attached N probes", as bpftrace orders the two.
    fire_all(compiled, &loaded, Schedule::Begin)?;
    reader.drain().map_err(|e| system("reading the ring buffer failed", e))?;

    let (attachments, perf, watcher) =
        attach_probes(compiled, settings, &loaded, &signals, &sink, &health, n)?;
    let (timer, hotplug) = start_firing(compiled, settings, &loaded, &sink, &health, perf, watcher)?;
    // A command is not let run when BEGIN already asked to stop (dropping it unreleased kills it).
    if let (Some(child), None) = (child.as_deref_mut(), sink.borrow().exit_code) {
        child.release();
    }
    let iteration = start_iterators(compiled, settings, &loaded, &sink)?;
    let mut running = Running { attachments, timer, hotplug, iteration };
    let mut losses = Losses::new(&loaded.maps[FixedMap::Lost.index()]);
    let child_fd = child.as_deref().map(|c| c.exit_fd());
    trace_until_stopped(compiled, &loaded, &signals, &reader, &sink, &mut running, &mut losses, child_fd)?;
    finish_iteration(running.iteration.take(), &sink);
    stop_and_report(compiled, settings, &loaded, &reader, &sink, running, losses, child, journal, captures)
}

/// What runs while tracing: dropped, it is all stopped and detached.
struct Running {
    attachments: Vec<attach::Attached>,
    timer: Option<Timer>,
    hotplug: Option<HotplugThread>,
    iteration: Option<iterate::Iteration>,
}

/// How many probes a trace attaches; an error when there is none (only `test:` or `bench:` probes).
fn probes_to_attach(compiled: &Compiled) -> Result<usize, Failure> {
    let on_demand = |schedule| compiled.programs.iter().any(|p| p.point.provider.schedule() == schedule);
    let n = compiled.programs.iter().filter(|p| !p.point.provider.schedule().on_demand()).count();
    if n == 0 {
        let (what, flag) = if on_demand(Schedule::Test) { ("test", "--test") } else { ("bench", "--bench") };
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

/// `--metrics`: its own map handles and thread, so that a scrape never waits for the event reader, nor holds
/// it up.
fn start_metrics(
    compiled: &Compiled,
    settings: &Settings,
    loaded: &load::Loaded,
    health: &Arc<Health>,
    copies: &copied_stacks::SharedCopies,
) -> Result<Option<crate::metrics::server::Endpoint>, Failure> {
    let Some(metrics) = settings.metrics else { return Ok(None) };
    let source = metrics::MetricsSource::new(
        compiled,
        &loaded.maps,
        Arc::clone(health),
        Arc::clone(copies),
        metrics.max_keys,
    )
    .map_err(|e| system("cannot open the maps for --metrics", e))?;
    let endpoint =
        crate::metrics::server::Endpoint::start(metrics.address, move |format| source.scrape(format))
            .map_err(Failure::Other)?;
    // Said where the kernel chose the port, or with -v.
    if settings.verbose || metrics.address.port() == 0 {
        crate::stderr!("steadytrace: serving metrics at http://{}/metrics", endpoint.address);
    }
    Ok(Some(endpoint))
}

/// `-v`: the ring buffer's size, and how each probe runs.
fn describe_probes(compiled: &Compiled, loaded: &load::Loaded, ring_bytes: u32) {
    crate::stderr!("the ring buffer holds {} KiB", ring_bytes / 1024);
    for (program, firing) in compiled.programs.iter().zip(&loaded.firings) {
        let how = match (firing, loaded.uprobe_mode) {
            (load::Firing::OnRequest(_), _) => "runs on request (BPF_PROG_TEST_RUN)",
            (load::Firing::Kernel(_), _) => &program.point.provider.describe(),
            (_, Some(AttachMode::UprobeMulti)) => "runs through the trigger's uprobe (a uprobe_multi link)",
            _ => "runs through the trigger's uprobe (a perf uprobe event)",
        };
        crate::stderr!("{} {how}", program.point.name);
    }
}

/// Attaches the kernel's probes (none after BEGIN's `exit()` or a signal) and opens the per-CPU perf events
/// and timers, not enabled yet; says "Attached N probes" and lets BEGIN's output out after it.
fn attach_probes(
    compiled: &Compiled,
    settings: &Settings,
    loaded: &load::Loaded,
    signals: &SignalPipe,
    sink: &RefCell<Sink<'_>>,
    health: &Health,
    n: usize,
) -> Result<(Vec<attach::Attached>, PerfProbes, cpus::CpuWatcher), Failure> {
    let watcher = cpus::CpuWatcher::new().map_err(|e| system("cannot read the online CPUs", e))?;
    let online: Vec<u32> = watcher.online().iter().copied().collect();
    let target = AttachTarget { pid: settings.uprobe_pid, cpu: online.first().copied().unwrap_or(0) };
    // A script whose BEGIN called exit() attaches nothing more.
    let stop_requested = || signals.arrived() || sink.borrow().exit_code.is_some();
    let attachments = attach::attach(compiled, loaded, &target, &stop_requested)?;
    health.attached(n);
    let perf = PerfProbes::start(
        perf_probes(compiled, loaded),
        online.iter().copied(),
        settings.interval_cpu,
        settings.verbose,
    )
    .map_err(Failure::PerfEvent)?;
    if !settings.quiet && settings.format != Format::Json {
        crate::stderr!("Attached {n} probe{}", if n == 1 { "" } else { "s" });
    }
    sink.borrow_mut().release_stderr();
    events::flush(sink)?;
    Ok((attachments, perf, watcher))
}

/// Enables the per-CPU perf events and timers and starts the threads that fire probes: the timer thread
/// for interval probes (none after BEGIN's `exit()`), the hotplug thread that keeps per-CPU ones alive.
fn start_firing(
    compiled: &Compiled,
    settings: &Settings,
    loaded: &load::Loaded,
    sink: &RefCell<Sink<'_>>,
    health: &Arc<Health>,
    perf: PerfProbes,
    watcher: cpus::CpuWatcher,
) -> Result<(Option<Timer>, Option<HotplugThread>), Failure> {
    perf.enable().map_err(|e| system("cannot start the perf events", e))?;
    let intervals: Vec<Interval> = compiled
        .programs
        .iter()
        .zip(&loaded.firings)
        .filter_map(|(p, firing)| match p.point.provider.schedule() {
            Schedule::Every(period) => {
                Some(Interval { name: p.point.name.clone(), firing: firing.clone(), period })
            }
            _ => None,
        })
        .collect();
    let timer = if intervals.is_empty() || sink.borrow().exit_code.is_some() {
        None
    } else {
        let timer = Timer::start(intervals, settings.timer_priority)
            .map_err(|e| system("cannot start the timer thread", e))?;
        health.timer_started(&timer);
        Some(timer)
    };
    // Per-CPU perf events are kept alive through CPU hotplug by a thread of their own.
    let hotplug = match perf.is_empty() {
        true => None,
        false => Some(
            HotplugThread::start(perf, watcher, Arc::clone(health))
                .map_err(|e| system("cannot start the hotplug thread", e))?,
        ),
    };
    Ok((timer, hotplug))
}

/// `iter:` probes: pinned ones are pinned (with nothing else to read, that ends tracing); the others are read
/// in a thread of their own, and `exit()` in them waits for the iteration's end (as bpftrace prints every
/// object's line), which ends tracing.
fn start_iterators(
    compiled: &Compiled,
    settings: &Settings,
    loaded: &load::Loaded,
    sink: &RefCell<Sink<'_>>,
) -> Result<Option<iterate::Iteration>, Failure> {
    let (pinned, iterators): (Vec<_>, Vec<_>) = iterator_programs(compiled, loaded)
        .into_iter()
        .partition(|(point, _)| point.provider.pinned_at().is_some());
    if !pinned.is_empty() && sink.borrow().exit_code.is_none() {
        for (point, program) in &pinned {
            let path = point.provider.pinned_at().expect("partitioned by it");
            let said = iterate::pin(&point.name, program, path, point.span)
                .map_err(|diagnostic| Failure::Rejected { diagnostic, log: String::new() })?;
            match settings.format {
                // The JSON stream stays JSON: bpftrace writes the line into it.
                Format::Json => crate::stderr!("{}", said.trim_end()),
                _ => sink.borrow_mut().write_raw(said.as_bytes()),
            }
        }
        if iterators.is_empty() {
            sink.borrow_mut().exit_code = Some(0);
        }
    }
    let iterators: Vec<_> =
        iterators.into_iter().map(|(point, program)| (point.name.clone(), program)).collect();
    if iterators.is_empty() || sink.borrow().exit_code.is_some() {
        return Ok(None);
    }
    sink.borrow_mut().defer_exit = true;
    iterate::Iteration::start(iterators).map(Some).map_err(|e| system("cannot start the iterator thread", e))
}

/// The event loop: reads records, folds copied stacks, reports losses and unwatches what `unwatch()` asked,
/// until `exit()`, a signal, the command's exit (`child_fd`) or the iteration's end.
#[allow(clippy::too_many_arguments)]
fn trace_until_stopped(
    compiled: &Compiled,
    loaded: &load::Loaded,
    signals: &SignalPipe,
    reader: &bpf::ringbuf::RingBufReader<'_>,
    sink: &RefCell<Sink<'_>>,
    running: &mut Running,
    losses: &mut Losses<'_>,
    child_fd: Option<std::os::fd::RawFd>,
) -> Result<(), Failure> {
    // Besides records and signals, the command's exit and the iteration's end wake the loop.
    let iteration_fd = running.iteration.as_ref().map(iterate::Iteration::done_fd);
    let wake_fds: Vec<_> = child_fd.into_iter().chain(iteration_fd).chain([signals.usr1_fd()]).collect();
    let usr1_index = wake_fds.len() - 1;
    let mut busy = false;
    let copies_stacks = compiled.records.copies_user_stacks();
    let (mut last_fold, mut folded_at) = (std::time::Instant::now(), 0);
    while sink.borrow().exit_code.is_none() {
        // Records do not wake this loop (but for the exit record): it looks every OUTPUT_POLL, and at
        // once again while a look finds the buffer filling.
        let timeout = if busy { Duration::ZERO } else { OUTPUT_POLL };
        let wake = signals
            .wait(reader, &wake_fds, Some(timeout))
            .map_err(|e| system("waiting for events failed", e))?;
        if wake.signal || (child_fd.is_some() && wake.also(0)) {
            break;
        }
        if iteration_fd.is_some() && wake.also(usize::from(child_fd.is_some())) {
            drain(reader, sink)?;
            break;
        }
        if wake.also(usr1_index) && signals.take_usr1() {
            fire_all(compiled, loaded, Schedule::Signal)?;
        }
        let before = (sink.borrow().records, sink.borrow().stack_copies);
        drain(reader, sink)?;
        // While copies stream in, each look folds (a map gets a key a copy); else every FOLD_EVERY.
        let copies_read = sink.borrow().stack_copies;
        if copies_stacks && (copies_read > folded_at || last_fold.elapsed() >= copied_stacks::FOLD_EVERY) {
            sink.borrow_mut().fold_copied_stacks();
            (last_fold, folded_at) = (std::time::Instant::now(), copies_read);
        }
        busy = sink.borrow().records - before.0 >= BUSY_RECORDS
            || sink.borrow().stack_copies - before.1 >= BUSY_STACK_COPIES;
        losses.report_new(sink);
        let unwatched = std::mem::take(&mut sink.borrow_mut().unwatched);
        if !unwatched.is_empty() {
            unwatch(compiled, &unwatched, &mut running.attachments, running.hotplug.as_ref());
        }
    }
    Ok(())
}

/// Waits for the iterator thread; an `exit()` deferred until the iteration's end takes effect.
fn finish_iteration(iteration: Option<iterate::Iteration>, sink: &RefCell<Sink<'_>>) {
    let Some(iteration) = iteration else { return };
    let mut sink = sink.borrow_mut();
    if let Err(e) = iteration.finish() {
        crate::stderr!("steadytrace: {e}");
        sink.exit_code.get_or_insert(1);
    }
    sink.defer_exit = false;
    if let Some(code) = sink.deferred_exit.take() {
        sink.exit_code.get_or_insert(code);
    }
}

/// The exit sequence. Records not yet read go out first (they do not wake the loop, and detaching takes tens
/// of milliseconds). Only this process calls the trigger, so once the timer has stopped no probe it fires
/// runs any more, and the kernel's probes stop when their perf events and attachments are dropped: then
/// what came before is printed, END runs, the maps are printed, and what was lost on the way is said.
#[allow(clippy::too_many_arguments)]
fn stop_and_report(
    compiled: &Compiled,
    settings: &Settings,
    loaded: &load::Loaded,
    reader: &bpf::ringbuf::RingBufReader<'_>,
    sink: &RefCell<Sink<'_>>,
    running: Running,
    mut losses: Losses<'_>,
    child: Option<&mut child::Child>,
    journal: Option<journal::JournalThread>,
    captures: Option<captures::CaptureThread>,
) -> Result<Outcome, Failure> {
    drain(reader, sink)?;
    let Running { attachments, timer, hotplug, iteration: _ } = running;
    if let Some(timer) = &timer {
        timer.stop();
    }
    let revivals = hotplug.map(HotplugThread::stop);
    drop(attachments);
    if let Some(child) = child.as_deref() {
        child.terminate();
    }
    drain(reader, sink)?;
    sink.borrow_mut().in_end = true;
    fire_all(compiled, loaded, Schedule::End)?;
    drain(reader, sink)?;
    losses.report_new(sink);
    if let Some(journal) = journal {
        let lost = journal.stop().lock().lost;
        if lost > 0 {
            crate::stderr!(
                "steadytrace: the journal of process mappings lost {lost} record{}: the frames of some exited processes may stay addresses",
                if lost == 1 { "" } else { "s" }
            );
        }
    }
    if let Some(captures) = captures {
        report_captures(captures.stop(), settings.verbose, sink);
    }
    sink.borrow_mut()
        .print_maps_at_exit(settings.print_maps_on_exit)
        .map_err(|e| system("cannot read the maps", e))?;
    events::flush(sink)?;

    if let (Some(timer), true) = (&timer, settings.verbose) {
        let how = if timer.is_realtime() { "at real-time priority" } else { "as an ordinary thread" };
        crate::stderr!("the timer thread ran {how}");
    }
    if let Some(revivals) = revivals {
        report_revivals(&revivals, settings, sink);
        events::flush(sink)?;
    }
    report_losses(timer.as_ref(), losses.total);
    report_dropped_updates(compiled, &loaded.maps[FixedMap::Dropped.index()]);
    let exit_code = sink.borrow().exit_code.unwrap_or(0);
    Ok(Outcome { exit_code: exit_code as i32 })
}

/// The packet capture of `skboutput()`, when the script has one: its files are created and its rings opened
/// before anything is attached.
fn start_captures(
    compiled: &Compiled,
    loaded: &load::Loaded,
    ring_pages: Option<u64>,
) -> Result<Option<captures::CaptureThread>, Failure> {
    if compiled.records.captures().is_empty() {
        return Ok(None);
    }
    let map = loaded.maps[compiled.layout.packets()]
        .try_clone()
        .map_err(|e| system("cannot open the packets map", e))?;
    let pages = ring_pages.and_then(|p| usize::try_from(p).ok());
    captures::CaptureThread::start(compiled.records.captures(), map, pages).map(Some).map_err(Failure::Other)
}

fn report_captures(captured: Result<captures::Captured, String>, verbose: bool, sink: &RefCell<Sink>) {
    match captured {
        Ok(captured) => {
            if captured.lost > 0 {
                crate::stderr!(
                    "steadytrace: {} packet{} lost: skboutput()'s rings were full (config perf_rb_pages sets their size)",
                    captured.lost,
                    if captured.lost == 1 { " was" } else { "s were" }
                );
            }
            if verbose {
                crate::stderr!("steadytrace: skboutput() wrote {} packets", captured.written);
            }
        }
        Err(e) => {
            crate::stderr!("steadytrace: {e}");
            sink.borrow_mut().exit_code.get_or_insert(1);
        }
    }
}

/// The journal of process mappings, when the script keeps user stacks or `usym` symbols in maps: their frames
/// get names even when the process exited before the maps are printed. Without it (perf_event_open denied) they
/// are named while the process lives, as before.
fn start_journal(compiled: &Compiled, verbose: bool) -> Option<journal::JournalThread> {
    use crate::sema::{maps::MapValue, types::Type};
    let user_symbol = |ty: &Type| matches!(ty, Type::Symbol { user: true });
    let symbols_in_maps = compiled.script_maps.iter().any(|decl| {
        decl.key.iter().any(user_symbol) || matches!(&decl.value, MapValue::Plain(ty) if user_symbol(ty))
    });
    let user_stacks =
        compiled.stack_maps.iter().any(|&(user, _)| user) || compiled.records.copies_user_stacks();
    if !symbols_in_maps && !user_stacks {
        return None;
    }
    let cpus: Vec<u32> = crate::online_cpus::online().unwrap_or_default().into_iter().collect();
    match journal::JournalThread::start(&cpus) {
        Ok(journal) => Some(journal),
        Err(e) => {
            if verbose {
                crate::stderr!("steadytrace: no journal of process mappings ({e}): exited processes' frames stay addresses");
            }
            None
        }
    }
}

/// How often the event loop reads records that did not wake it (all but the exit record): the most a
/// printf's output waits.
pub const OUTPUT_POLL: Duration = Duration::from_millis(10);
/// Records found by one look that mean a burst: the next look comes at once.
const BUSY_RECORDS: u64 = 1024;
/// Copied user stacks found by one look that mean a burst: about a sixteenth of what the ring buffer holds.
const BUSY_STACK_COPIES: u64 = 32;

/// The probes whose providers keep perf events on CPUs (profile/software/hardware on every CPU, interval
/// probes on one CPU with `--interval-engine perf`), or BPF timers (profile where perf events are refused).
fn perf_probes(compiled: &Compiled, loaded: &load::Loaded) -> Vec<PerfProbe> {
    compiled
        .programs
        .iter()
        .zip(&loaded.firings)
        .filter_map(|(code, firing)| {
            let load::Firing::Kernel(program) = firing else { return None };
            let provider = &code.point.provider;
            let (source, placement) = match (provider.perf_events(), provider.cpu_timer()) {
                (Some(events), _) if events.every_cpu => (Source::Perf(events.spec), Placement::EveryCpu),
                (Some(events), _) => (Source::Perf(events.spec), Placement::OneCpu),
                (None, Some(timer)) => (Source::Timer(timer), Placement::EveryCpu),
                (None, None) => return None,
            };
            Some(PerfProbe {
                name: code.point.name.clone(),
                source,
                program: program.clone(),
                placement,
                when_denied: provider.when_perf_denied(),
            })
        })
        .collect()
}

/// The programs of `iter:` probes, with their probes.
fn iterator_programs<'a>(
    compiled: &'a Compiled,
    loaded: &load::Loaded,
) -> Vec<(&'a crate::probes::AttachPoint, Arc<bpf::Program>)> {
    let programs = compiled.programs.iter().zip(&loaded.firings);
    programs
        .filter_map(|(code, firing)| match firing {
            load::Firing::Kernel(program) if code.point.provider.iterates() => {
                Some((&code.point, Arc::clone(program)))
            }
            _ => None,
        })
        .collect()
}

/// Removes the watchpoints on the `addresses` `unwatch()` named: a process's breakpoints are closed here, a
/// kernel address's (on every CPU) by the hotplug thread that keeps them.
fn unwatch(
    compiled: &Compiled,
    addresses: &[u64],
    attachments: &mut Vec<attach::Attached>,
    hotplug: Option<&HotplugThread>,
) {
    let watching = |index: usize| {
        let address = compiled.programs[index].point.provider.watched_address();
        address.is_some_and(|a| addresses.contains(&a))
    };
    attachments.retain(|(index, _)| !watching(*index));
    let names = (0..compiled.programs.len())
        .filter(|&i| watching(i))
        .map(|i| compiled.programs[i].point.name.clone());
    if let Some(hotplug) = hotplug {
        hotplug.retire(names);
    }
}

/// What CPU hotplug made steadytrace do: on stderr with `-v`, and as a JSON line with `-f json`.
fn report_revivals(revivals: &Revivals, settings: &Settings, sink: &RefCell<Sink<'_>>) {
    let Revivals { reenabled, reopened, new_cpu, moved } = *revivals;
    if settings.verbose {
        crate::stderr!(
            "steadytrace: hotplug: {reopened} event(s) reopened, {reenabled} re-enabled, {new_cpu} opened on new CPUs, {moved} moved"
        );
    }
    if settings.format == Format::Json {
        sink.borrow_mut().write_raw(&crate::output::json::revivals(reopened, reenabled, new_cpu, moved));
    }
}

/// Output records the ring buffer had no room for, counted per CPU by the programs, reported in the output
/// as they happen (as bpftrace does) so that a consumer can tell a gap from a quiet moment.
struct Losses<'a> {
    map: &'a Map,
    total: u64,
}

impl<'a> Losses<'a> {
    fn new(map: &'a Map) -> Losses<'a> {
        Losses { map, total: 0 }
    }

    /// Reports the records lost since the last report.
    fn report_new(&mut self, sink: &RefCell<Sink<'_>>) {
        let now = health::lost_records(self.map);
        if now <= self.total {
            return;
        }
        let lost = now - self.total;
        self.total = now;
        let mut sink = sink.borrow_mut();
        match sink.format.lost_events(lost) {
            Some(record) => sink.write_raw(&record),
            None => crate::stderr!("Lost {lost} events"),
        }
    }
}

/// Says which maps refused updates because they were full, if any: never silently. A declared map said so at
/// each failure already, as bpftrace does.
fn report_dropped_updates(compiled: &Compiled, dropped: &Map) {
    for (decl, failed) in compiled.script_maps.iter().zip(health::dropped_updates(dropped)) {
        if failed > 0 && !compiled.records.warns_of_failed_updates(&decl.name) {
            let (name, storage) = (&decl.name, if decl.is_per_cpu() { "percpuhash" } else { "hash" });
            crate::stderr!(
                "steadytrace: @{name}: {failed} update{} dropped: the map was full (declare it larger: `let @{name} = {storage}(N);`)",
                if failed == 1 { "" } else { "s" }
            );
        }
    }
}

/// Says what was lost, if anything: never silently.
fn report_losses(timer: Option<&Timer>, lost: u64) {
    if let Some(timer) = timer {
        for timer::IntervalCounts { name, skipped, failed } in timer.counts() {
            let plural = |n: u64| if n == 1 { "" } else { "s" };
            if skipped > 0 {
                crate::stderr!(
                    "steadytrace: {name}: {skipped} period{} skipped (the timer thread woke up more than a period late)",
                    plural(skipped)
                );
            }
            if failed > 0 {
                crate::stderr!(
                    "steadytrace: {name}: {failed} firing{} failed (the kernel refused to run the program)",
                    plural(failed)
                );
            }
        }
    }
    if lost > 0 {
        crate::stderr!(
            "steadytrace: {lost} output record{} lost: the ring buffer was full",
            if lost == 1 { "" } else { "s" }
        );
    }
}

/// Why the kernel refused a `bpf()` call: in a user namespace other than the host's, what became of the BPF
/// token and what the host must delegate; in the host's, the missing capability or what else refused it.
fn bpf_denied() -> String {
    match crate::privilege::initial_user_namespace() {
        true => crate::privilege::bpf_denied(),
        false => crate::bpf_token::user_namespace_advice(),
    }
}
