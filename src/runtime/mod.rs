//! The runtime: creates maps, loads and attaches programs, runs BEGIN, serves the ring buffer and
//! the timer thread, and on `exit()` or a signal detaches, runs END and drains the last output.

pub mod timer;

use crate::codegen::{Compiled, ProgramCode, LOST_MAP};
use crate::lang::Diagnostic;
use crate::output::{decode, Event};
use crate::probes::trigger::{AttachError, Triggers};
use crate::probes::ProbeKind;
use bpf::{AttachMode, Map, Program, Uprobe};
use std::cell::RefCell;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use timer::{Interval, Timer};
use trigger::Trigger;

/// Why a run could not go on.
#[derive(Debug)]
pub enum Failure {
    /// The kernel refused a program: the diagnostic points at the script line responsible.
    Rejected {
        diagnostic: Diagnostic,
        log: String,
    },
    System(String),
}

pub struct Settings {
    pub quiet: bool,
    pub verbose: bool,
    /// SCHED_FIFO priority of the timer thread; 0 keeps it an ordinary thread.
    pub timer_priority: u8,
}

/// How a run ended.
pub struct Outcome {
    pub exit_code: i32,
}

fn system(what: &str, error: io::Error) -> Failure {
    let hint = match error.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            " (steadytrace needs root, or CAP_BPF and CAP_PERFMON, to load and attach BPF programs)"
        }
        _ => "",
    };
    Failure::System(format!("{what}: {error}{hint}"))
}

pub fn run(compiled: &Compiled, settings: &Settings, out: &mut dyn Write) -> Result<Outcome, Failure> {
    // Watch for signals first: a Ctrl-C while probes attach must still detach and run END.
    let signals = SignalPipe::new().map_err(|e| system("cannot watch for signals", e))?;
    let maps = compiled
        .maps
        .iter()
        .map(|spec| {
            Map::create(spec).map_err(|e| system(&format!("cannot create the BPF map `{}`", spec.name), e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let map_fds: Vec<BorrowedFd<'_>> = maps.iter().map(|m| m.as_fd()).collect();
    let triggers =
        Triggers::locate().map_err(|e| system("cannot find steadytrace's trigger functions", e))?;
    let mut attachments = Vec::with_capacity(compiled.programs.len());
    for code in &compiled.programs {
        let attached = triggers
            .load_and_attach(&code.point.kind, |mode| load(code, mode, &map_fds))
            .map_err(|e| match e {
                AttachError::Load(failure) => failure,
                AttachError::Attach(e) => system(&format!("cannot attach `{}`", code.point.name), e),
            })?;
        attachments.push(attached);
    }
    if settings.verbose {
        let how = if triggers.mode() == AttachMode::UprobeMulti {
            "uprobe_multi links"
        } else {
            "perf uprobe events"
        };
        eprintln!("BEGIN, END and interval probes attached through {how}");
    }
    if !settings.quiet {
        let n = compiled.programs.len();
        eprintln!("Attached {n} probe{}", if n == 1 { "" } else { "s" });
    }

    let state = RefCell::new(Sink { out, exit_code: None, in_end: false, error: None });
    let reader = bpf::ringbuf::RingBufReader::new(&maps[crate::codegen::EVENTS_MAP], |data| {
        state.borrow_mut().record(compiled, data)
    })
    .map_err(|e| system("cannot read the ring buffer", e))?;

    // BEGIN runs synchronously: its output is in the ring buffer when the call returns.
    Trigger::Begin.fire(0);
    drain(&reader, &state)?;

    let intervals: Vec<Interval> = compiled
        .programs
        .iter()
        .filter_map(|p| match p.point.kind {
            ProbeKind::Interval { period, index } => Some(Interval { index, period }),
            _ => None,
        })
        .collect();
    let timer = if intervals.is_empty() {
        None
    } else {
        Some(
            Timer::start(intervals, settings.timer_priority)
                .map_err(|e| system("cannot start the timer thread", e))?,
        )
    };

    while state.borrow().exit_code.is_none() {
        if signals.wait(&reader).map_err(|e| system("waiting for events failed", e))? {
            break;
        }
        drain(&reader, &state)?;
    }

    // The exit sequence: stop every source of events, print what they sent before, then run END.
    // Only this process calls the triggers, so with the timer stopped no probe fires any more.
    if let Some(timer) = &timer {
        timer.stop();
    }
    drain(&reader, &state)?;
    state.borrow_mut().in_end = true;
    Trigger::End.fire(0);
    drain(&reader, &state)?;
    detach(attachments);

    if let (Some(timer), true) = (&timer, settings.verbose) {
        let how = if timer.is_realtime() { "at real-time priority" } else { "as an ordinary thread" };
        eprintln!("the timer thread ran {how}");
    }
    report_losses(compiled, timer.as_ref(), &maps[LOST_MAP]);
    let exit_code = state.borrow().exit_code.unwrap_or(0);
    Ok(Outcome { exit_code: exit_code as i32 })
}

fn load(code: &ProgramCode, mode: AttachMode, maps: &[BorrowedFd<'_>]) -> Result<Program, Failure> {
    let name = match code.point.kind {
        ProbeKind::Begin => "BEGIN",
        ProbeKind::End => "END",
        ProbeKind::Interval { .. } => "interval",
    };
    bpf::load(name, code.prog_type, mode, &code.code, maps).map_err(|e| {
        let span = e.insn.and_then(|i| code.span_of(i)).unwrap_or(code.point.span);
        let diagnostic =
            Diagnostic::error(span, format!("the kernel's BPF verifier rejected this: {}", e.reason))
                .with_help(format!(
                    "({}) run with -v to see the verifier's whole log, or -d for the instructions",
                    e.error
                ));
        Failure::Rejected { diagnostic, log: e.log }
    })
}

/// Detaches everything at once. Each uprobe detach waits for an RCU grace period; done in parallel
/// they share one instead of paying one each.
fn detach(attachments: Vec<Uprobe>) {
    std::thread::scope(|scope| {
        for attachment in attachments {
            scope.spawn(move || drop(attachment));
        }
    });
}

/// Where records go: printed until `exit()` is seen; after it, only END's output is printed.
struct Sink<'a> {
    out: &'a mut dyn Write,
    exit_code: Option<i64>,
    in_end: bool,
    error: Option<io::Error>,
}

impl Sink<'_> {
    fn record(&mut self, compiled: &Compiled, data: &[u8]) {
        if self.exit_code.is_some() && !self.in_end {
            return;
        }
        match decode(&compiled.records, data) {
            Some(Event::Print(text)) => {
                if let Err(e) = self.out.write_all(&text) {
                    self.error.get_or_insert(e);
                }
            }
            Some(Event::Exit(code)) => {
                self.exit_code.get_or_insert(code);
            }
            None => {}
        }
    }
}

/// Hands every record waiting in the ring buffer to the sink, then flushes the output.
fn drain(reader: &bpf::ringbuf::RingBufReader<'_>, sink: &RefCell<Sink<'_>>) -> Result<(), Failure> {
    reader.drain().map_err(|e| system("reading the ring buffer failed", e))?;
    let mut sink = sink.borrow_mut();
    let flushed = sink.out.flush();
    match sink.error.take().map_or(flushed, Err) {
        // A closed pipe (`steadytrace ... | head`) ends tracing quietly, like any filter.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
            sink.exit_code.get_or_insert(0);
            Ok(())
        }
        Err(e) => Err(system("cannot write the output", e)),
        Ok(()) => Ok(()),
    }
}

/// SIGINT and SIGTERM, turned into a readable pipe so that one `poll` waits for records and signals.
struct SignalPipe {
    read: OwnedFd,
    _ids: Vec<signal_hook::SigId>,
}

impl SignalPipe {
    fn new() -> io::Result<SignalPipe> {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)?;
        let write = std::os::unix::net::UnixStream::from(write);
        let mut ids = vec![];
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            ids.push(signal_hook::low_level::pipe::register(signal, write.try_clone()?)?);
        }
        Ok(SignalPipe { read, _ids: ids })
    }

    /// Waits for records or a signal; `true` when a signal asks to stop.
    fn wait(&self, reader: &bpf::ringbuf::RingBufReader<'_>) -> io::Result<bool> {
        let mut fds = [
            libc::pollfd { fd: reader.wait_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: self.read.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: fds is a valid array of pollfd for the duration of the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n < 0 {
            let error = io::Error::last_os_error();
            return if error.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(error) };
        }
        Ok(fds[1].revents != 0)
    }
}

/// Says what was lost, if anything: never silently.
fn report_losses(compiled: &Compiled, timer: Option<&Timer>, lost: &Map) {
    if let Some(timer) = timer {
        let intervals =
            compiled.programs.iter().filter(|p| matches!(p.point.kind, ProbeKind::Interval { .. }));
        for (program, skipped) in intervals.zip(timer.skipped()) {
            if skipped > 0 {
                eprintln!(
                    "steadytrace: {}: {skipped} period{} skipped (the timer thread woke up more than a period late)",
                    program.point.name,
                    if skipped == 1 { "" } else { "s" }
                );
            }
        }
    }
    let lost: u64 = lost
        .percpu_values(&0u32.to_ne_bytes())
        .unwrap_or_default()
        .iter()
        .filter_map(|value| Some(u64::from_ne_bytes(value.get(..8)?.try_into().ok()?)))
        .sum();
    if lost > 0 {
        eprintln!(
            "steadytrace: {lost} output record{} lost: the ring buffer was full",
            if lost == 1 { "" } else { "s" }
        );
    }
}
