//! The stages of a trace once its script is loaded, in the order `runtime::run` calls them: BEGIN, attach
//! (and start firing), run until told to stop, drain, detach, END, report. What they share is one [`Trace`];
//! what fires probes meanwhile is one [`Running`].

use super::attach::{self, Attachments, ToAttach};
use super::child::Child;
use super::companions::Companions;
use super::control::Control;
use super::cpus::CpuWatcher;
use super::events::{self, drain, report_lost};
use super::health::Health;
use super::hotplug::HotplugThread;
use super::iterate::{self, Iteration};
use super::load::{Firing, Loaded};
use super::percpu::{PerfProbe, PerfProbes, Placement, Revivals, Source};
use super::plan::Plan;
use super::reader::{Reader, Ring};
use super::signals::SignalPipe;
use super::sink::Sink;
use super::timer::{Interval, Timer};
use super::{copied_stacks, report, system, Failure, Outcome, Settings, OUTPUT_POLL};
use crate::codegen::{Compiled, FixedMap};
use crate::output::writer::Format;
use crate::probes::{AttachPoint, AttachTarget, Schedule};
use std::cell::RefCell;
use std::os::fd::{AsFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the stages share: the script, who fires its probes, the settings, what the kernel holds, and where
/// records go.
pub struct Trace<'t, 's> {
    pub compiled: &'t Compiled,
    pub plan: &'t Plan,
    pub settings: &'t Settings,
    pub loaded: &'t Loaded,
    pub signals: &'t SignalPipe,
    pub control: &'t Control,
    pub sink: &'t RefCell<Sink<'s>>,
    pub health: &'t Arc<Health>,
}

/// What fires probes while tracing, the last started first: dropped, it is all stopped and detached.
pub struct Running {
    iteration: Option<Iteration>,
    timer: Option<Timer>,
    /// The per-CPU perf events and timers, kept through CPU hotplug.
    hotplug: Option<HotplugThread>,
    attachments: Attachments,
}

/// What was stopped, for the report.
pub struct Stopped {
    timer: Option<Timer>,
    revivals: Option<Revivals>,
}

impl Running {
    /// Stops everything that fires probes, in the reverse of the order it started: the timer, the per-CPU
    /// events (the hotplug thread closes them), the kernel's attachments; then the command of `-c`. Only this
    /// process fires steadytrace's own probes, so once the timer has stopped none of them runs any more.
    pub fn detach(self, child: Option<&mut Child>) -> Stopped {
        let Running { iteration: _, timer, hotplug, attachments } = self;
        if let Some(timer) = &timer {
            timer.stop();
        }
        let revivals = hotplug.map(HotplugThread::stop);
        attachments.detach();
        if let Some(child) = child {
            child.terminate();
        }
        Stopped { timer, revivals }
    }
}

impl Trace<'_, '_> {
    /// BEGIN runs synchronously, before the kernel's probes are attached (as in bpftrace): its output comes
    /// before any event, also before events of steadytrace's own attaching. It is read now (an exit() in it
    /// attaches nothing more) and written out after "Attached N probes", as bpftrace orders the two.
    pub fn begin(&self, reader: &Reader<impl Ring>) -> Result<(), Failure> {
        self.loaded.fire(self.compiled, self.plan, Schedule::Begin)?;
        reader.look(self.control).map_err(|e| system("reading the ring buffer failed", e))?;
        Ok(())
    }

    /// Attaches the `n` probes and starts firing them: the kernel's probes, the per-CPU perf events and
    /// timers, the timer thread, the command of `-c` (released unless BEGIN asked to stop: dropped
    /// unreleased, it is killed), the iterators.
    pub fn attach(&self, n: usize, child: Option<&mut Child>) -> Result<Running, Failure> {
        let (attachments, perf, watcher) = self.attach_probes(n)?;
        let (timer, hotplug) = self.start_firing(perf, watcher)?;
        if let (Some(child), false) = (child, self.control.stopping()) {
            child.release();
        }
        let iteration = self.start_iterators()?;
        Ok(Running { iteration, timer, hotplug, attachments })
    }

    /// Attaches the kernel's probes (none after BEGIN's `exit()` or a signal) and opens the per-CPU perf events
    /// and timers, not enabled yet; says "Attached N probes" and lets BEGIN's output out after it.
    /// The online CPUs are watched (a uevent socket) only where per-CPU probes must be kept through hotplug.
    fn attach_probes(&self, n: usize) -> Result<(Attachments, PerfProbes, Option<CpuWatcher>), Failure> {
        let perf_probes = self.perf_probes();
        let unreadable = |e| system("cannot read the online CPUs", e);
        let (watcher, online) = match perf_probes.is_empty() {
            true => {
                (None, crate::online_cpus::online().map_err(unreadable)?.into_iter().collect::<Vec<u32>>())
            }
            false => {
                let watcher = CpuWatcher::new().map_err(unreadable)?;
                let online = watcher.online().iter().copied().collect();
                (Some(watcher), online)
            }
        };
        let target =
            AttachTarget { pid: self.settings.uprobe_pid, cpu: online.first().copied().unwrap_or(0) };
        let stop_requested = || self.signals.arrived() || self.control.stopping();
        let attachments = attach::attach(&self.fired_by_the_kernel(), &target, &stop_requested)?;
        self.health.attached(n);
        let settings = self.settings;
        let perf =
            PerfProbes::start(perf_probes, online.iter().copied(), settings.interval_cpu, settings.verbose)
                .map_err(Failure::PerfEvent)?;
        if !settings.quiet && settings.format != Format::Json {
            crate::stderr!("Attached {n} probe{}", if n == 1 { "" } else { "s" });
        }
        self.sink.borrow_mut().release_stderr();
        events::flush(self.sink, self.control)?;
        Ok((attachments, perf, watcher))
    }

    /// The programs the kernel fires, in script order.
    fn fired_by_the_kernel(&self) -> Vec<ToAttach<'_>> {
        let programs = self.compiled.programs.iter().zip(&self.loaded.firings).enumerate();
        programs
            .filter_map(|(index, (code, firing))| match firing {
                Firing::Kernel(program) => {
                    Some(ToAttach { index, point: &code.point, program: program.as_fd() })
                }
                _ => None,
            })
            .collect()
    }

    /// The probes whose providers keep perf events on CPUs (profile/software/hardware on every CPU, interval
    /// probes on one CPU with `--interval-engine perf`), or BPF timers (profile where perf events are refused).
    fn perf_probes(&self) -> Vec<PerfProbe> {
        let programs = self.compiled.programs.iter().zip(&self.loaded.firings);
        programs
            .filter_map(|(code, firing)| {
                let Firing::Kernel(program) = firing else { return None };
                let provider = &code.point.provider;
                let (source, placement) = match (provider.perf_events(), provider.cpu_timer()) {
                    (Some(events), _) if events.every_cpu => (Source::Perf(events.spec), Placement::EveryCpu),
                    (Some(events), _) => (Source::Perf(events.spec), Placement::OneCpu),
                    (None, Some(timer)) => (Source::Timer(timer), Placement::EveryCpu),
                    (None, None) => return None,
                };
                let (name, when_denied) = (code.point.name.clone(), provider.when_perf_denied());
                Some(PerfProbe { name, source, program: program.clone(), placement, when_denied })
            })
            .collect()
    }

    /// Enables the per-CPU perf events and timers and starts the threads that fire probes: the timer thread
    /// for interval probes (none after BEGIN's `exit()`), the hotplug thread that keeps per-CPU ones alive.
    fn start_firing(
        &self,
        perf: PerfProbes,
        watcher: Option<CpuWatcher>,
    ) -> Result<(Option<Timer>, Option<HotplugThread>), Failure> {
        perf.enable().map_err(|e| system("cannot start the perf events", e))?;
        let intervals: Vec<Interval> = self
            .plan
            .intervals()
            .map(|(index, period)| Interval {
                name: self.compiled.programs[index].point.name.clone(),
                firing: self.loaded.firings[index].clone(),
                period,
            })
            .collect();
        let timer = if intervals.is_empty() || self.control.stopping() {
            None
        } else {
            let timer = Timer::start(intervals, self.settings.timer_priority)
                .map_err(|e| system("cannot start the timer thread", e))?;
            self.health.timer_started(&timer);
            Some(timer)
        };
        let hotplug = match (perf.is_empty(), watcher) {
            (false, Some(watcher)) => Some(
                HotplugThread::start(perf, watcher, Arc::clone(self.health))
                    .map_err(|e| system("cannot start the hotplug thread", e))?,
            ),
            _ => None,
        };
        Ok((timer, hotplug))
    }

    /// `iter:` probes: pinned ones are pinned (with nothing else to read, that ends tracing); the others are
    /// read in a thread of their own, and `exit()` in them waits for the iteration's end (as bpftrace prints
    /// every object's line), which ends tracing.
    fn start_iterators(&self) -> Result<Option<Iteration>, Failure> {
        let (pinned, iterators): (Vec<_>, Vec<_>) =
            self.iterator_programs().into_iter().partition(|(point, _)| point.provider.pinned_at().is_some());
        if !pinned.is_empty() && !self.control.stopping() {
            for (point, program) in &pinned {
                let path = point.provider.pinned_at().expect("partitioned by it");
                let said = iterate::pin(&point.name, program, path, point.span)
                    .map_err(|diagnostic| Failure::Rejected { diagnostic, log: String::new() })?;
                match self.settings.format {
                    // The JSON stream stays JSON: bpftrace writes the line into it.
                    Format::Json => crate::stderr!("{}", said.trim_end()),
                    _ => self.sink.borrow_mut().write_raw(said.as_bytes()),
                }
            }
            if iterators.is_empty() {
                self.control.stop(0);
            }
        }
        let iterators: Vec<_> =
            iterators.into_iter().map(|(point, program)| (point.name.clone(), program)).collect();
        if iterators.is_empty() || self.control.stopping() {
            return Ok(None);
        }
        self.control.defer_exits();
        Iteration::start(iterators).map(Some).map_err(|e| system("cannot start the iterator thread", e))
    }

    /// The programs of `iter:` probes, with their probes.
    fn iterator_programs(&self) -> Vec<(&AttachPoint, Arc<bpf::Program>)> {
        let programs = self.compiled.programs.iter().zip(&self.loaded.firings);
        programs
            .filter_map(|(code, firing)| match firing {
                Firing::Kernel(program) if code.point.provider.iterates() => {
                    Some((&code.point, Arc::clone(program)))
                }
                _ => None,
            })
            .collect()
    }

    /// The event loop: reads records, folds copied stacks, reports losses and unwatches what `unwatch()`
    /// asked, until `exit()`, a signal, the command's exit (`child_fd`) or the iteration's end; then waits
    /// for the iteration.
    pub fn run(
        &self,
        reader: &Reader<impl Ring>,
        running: &mut Running,
        child_fd: Option<RawFd>,
    ) -> Result<(), Failure> {
        // Besides records and signals, the command's exit and the iteration's end wake the loop.
        let iteration_fd = running.iteration.as_ref().map(Iteration::done_fd);
        let wake_fds: Vec<_> =
            child_fd.into_iter().chain(iteration_fd).chain([self.signals.usr1_fd()]).collect();
        let usr1_index = wake_fds.len() - 1;
        let mut burst = false;
        let copies_stacks = self.compiled.records.copies_user_stacks();
        let (mut last_fold, mut folded_at) = (Instant::now(), 0);
        while !self.control.stopping() {
            // Records do not wake this loop (but for the exit record): it looks every OUTPUT_POLL, and at
            // once again while a look finds the buffer filling.
            let timeout = if burst { Duration::ZERO } else { OUTPUT_POLL };
            let wake = self
                .signals
                .wait(reader.ring(), &wake_fds, Some(timeout))
                .map_err(|e| system("waiting for events failed", e))?;
            if wake.signal || (child_fd.is_some() && wake.also(0)) {
                break;
            }
            if iteration_fd.is_some() && wake.also(usize::from(child_fd.is_some())) {
                drain(reader, self.sink, self.control)?;
                break;
            }
            if wake.also(usr1_index) && self.signals.take_usr1() {
                self.loaded.fire(self.compiled, self.plan, Schedule::Signal)?;
            }
            let look = drain(reader, self.sink, self.control)?;
            // While copies stream in, each look folds (a map gets a key a copy); else every FOLD_EVERY.
            let (_, copies_read) = self.control.read();
            if copies_stacks && (copies_read > folded_at || last_fold.elapsed() >= copied_stacks::FOLD_EVERY)
            {
                self.sink.borrow_mut().fold_copied_stacks();
                (last_fold, folded_at) = (Instant::now(), copies_read);
            }
            burst = look.burst();
            report_lost(reader, self.sink);
            let unwatched = self.control.take_unwatched();
            if !unwatched.is_empty() {
                self.unwatch(&unwatched, running);
            }
        }
        self.finish_iteration(running.iteration.take());
        Ok(())
    }

    /// Removes the watchpoints on the `addresses` `unwatch()` named: a process's breakpoints are closed here, a
    /// kernel address's (on every CPU) by the hotplug thread that keeps them.
    fn unwatch(&self, addresses: &[u64], running: &mut Running) {
        let programs = &self.compiled.programs;
        let watching = |index: usize| {
            let address = programs[index].point.provider.watched_address();
            address.is_some_and(|a| addresses.contains(&a))
        };
        running.attachments.detach_where(watching);
        let names = (0..programs.len()).filter(|&i| watching(i)).map(|i| programs[i].point.name.clone());
        if let Some(hotplug) = &running.hotplug {
            hotplug.retire(names);
        }
    }

    /// Waits for the iterator thread; an `exit()` deferred until the iteration's end takes effect.
    fn finish_iteration(&self, iteration: Option<Iteration>) {
        let Some(iteration) = iteration else { return };
        if let Err(e) = iteration.finish() {
            crate::stderr!("steadytrace: {e}");
            self.control.stop(1);
        }
        self.control.end_deferral();
    }

    /// Records not yet read go out before detaching: they do not wake the loop, and detaching takes tens of
    /// milliseconds.
    pub fn drain(&self, reader: &Reader<impl Ring>) -> Result<(), Failure> {
        drain(reader, self.sink, self.control).map(drop)
    }

    /// Once nothing fires probes: what came before is printed, records sent after `exit()` are dropped (as in
    /// bpftrace: nothing runs after exit but END), END runs and its output is printed.
    pub fn end(&self, reader: &Reader<impl Ring>) -> Result<(), Failure> {
        drain(reader, self.sink, self.control)?;
        self.control.enter_end();
        self.loaded.fire(self.compiled, self.plan, Schedule::End)?;
        drain(reader, self.sink, self.control)?;
        report_lost(reader, self.sink);
        Ok(())
    }

    /// The maps printed, and what was lost on the way said; how the run ended.
    pub fn report(
        &self,
        reader: &Reader<impl Ring>,
        stopped: Stopped,
        companions: &mut Companions,
    ) -> Result<Outcome, Failure> {
        let settings = self.settings;
        companions.stop(settings.verbose, self.control);
        self.sink
            .borrow_mut()
            .print_maps_at_exit(settings.print_maps_on_exit)
            .map_err(|e| system("cannot read the maps", e))?;
        events::flush(self.sink, self.control)?;
        if let (Some(timer), true) = (&stopped.timer, settings.verbose) {
            report::describe_timer(timer);
        }
        if let Some(revivals) = stopped.revivals {
            report::report_revivals(&revivals, settings, self.sink);
            events::flush(self.sink, self.control)?;
        }
        report::report_losses(stopped.timer.as_ref(), reader.lost());
        report::report_dropped_updates(self.compiled, &self.loaded.maps[FixedMap::Dropped.index()]);
        Ok(Outcome { exit_code: self.control.exit_code().unwrap_or(0) as i32 })
    }
}
