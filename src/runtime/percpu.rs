//! Probes on perf events, kept covering every online CPU through hotplug.
//!
//! A per-CPU perf event whose CPU goes offline is dead when the CPU returns (measured on 6.1, 6.12
//! and 6.18): `PERF_EVENT_IOC_ENABLE` succeeds but the event never counts again. So the first time in
//! a run that a CPU returns, its events are re-enabled and, a moment later, checked (their enabled
//! time must advance); events that did not come back are closed, opened anew and re-attached, and from
//! then on a returning CPU's events are reopened at once, without the check. A kernel whose events do
//! come back keeps being checked. A CPU never seen before gets fresh events. See docs/HOTPLUG.md.
//!
//! The decisions are made here; the events are opened through an [`Opener`]: perf_event_open in a
//! run, the fake kernel (`fake.rs`) in the unit tests. A probe on BPF timers (`profile` where perf events are refused)
//! is kept the same way, its timer on a CPU standing for an event (`cpu_timers.rs`): re-enabling it
//! arms it again from that CPU.

use super::cpu_timers::{ArmedTimer, TimerProbe};
use crate::probes::CpuTimer;
use bpf::perf::{PerfEvent, PerfEventSpec};
use bpf::Program;
use std::collections::BTreeMap;
use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a re-enabled event gets to show that it runs again: a running event's enabled time
/// advances with the clock, so a millisecond tells a live one from a dead one.
const VERIFY_AFTER: Duration = Duration::from_millis(1);
/// How long to wait before trying again to open an event on a CPU that refused it. A CPU is in the
/// online mask tens of milliseconds before perf accepts events on it (ENODEV until then: measured up to
/// 150 ms here while the `online` write had not returned yet), so it is tried every millisecond, for as
/// long as the CPU stays online.
const RETRY_AFTER: Duration = Duration::from_millis(1);
/// Tries to open one event on a returning CPU, on errors other than ENODEV, before it is given up
/// (until the CPU comes online again).
const MAX_TRIES: u32 = 50;

/// Where a probe's events live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// One event on every online CPU (profile, software, hardware probes).
    EveryCpu,
    /// One event on one online CPU, moved when that CPU goes offline (`--interval-engine perf`).
    OneCpu,
    /// No event any more (a watchpoint `unwatch()` removed).
    Retired,
}

pub struct PerfProbe {
    pub name: String,
    pub source: Source,
    pub program: Arc<Program>,
    pub placement: Placement,
    /// What to add when perf_event_open is refused: another way to the same probe, if any.
    pub when_denied: &'static str,
}

/// What a probe keeps on each CPU.
pub enum Source {
    /// A perf event.
    Perf(PerfEventSpec),
    /// A BPF timer (`runtime/cpu_timers.rs`): `profile` where perf events are refused.
    Timer(CpuTimer),
}

/// What hotplug did, for `-v` and the JSON summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Revivals {
    /// Events that ran again after `PERF_EVENT_IOC_ENABLE`.
    pub reenabled: u64,
    /// Events closed and opened anew because re-enabling did not, or would not, revive them.
    pub reopened: u64,
    /// Events opened on CPUs that were offline when tracing started.
    pub new_cpu: u64,
    /// One-CPU probes moved off a CPU that went offline.
    pub moved: u64,
}

/// Opens the events of the probes, attached to their programs: perf_event_open in a run ([`Kernel`]).
pub trait Opener {
    type Event;
    /// Opens probe `probe`'s event on `cpu`, attached and disabled.
    fn open(&mut self, probe: usize, cpu: u32) -> io::Result<Self::Event>;
    fn enable(&self, event: &Self::Event) -> io::Result<()>;
    /// Nanoseconds the event has been enabled: it stands still when the event is dead.
    fn enabled_time(&self, event: &Self::Event) -> io::Result<u64>;
}

/// The kernel's perf events, and BPF timers where a probe samples on those.
pub struct Kernel {
    probes: Vec<PerfProbe>,
    /// Each probe's timers, where it has them.
    timers: Vec<Option<TimerProbe>>,
}

/// A probe's event on one CPU.
pub enum CpuEvent {
    Perf(PerfEvent),
    Timer(ArmedTimer),
}

impl Kernel {
    /// Starts the sampling of the probes on BPF timers (none armed yet).
    fn new(probes: Vec<PerfProbe>) -> Result<Kernel, OpenError> {
        let timers = probes
            .iter()
            .map(|probe| match probe.source {
                Source::Perf(_) => Ok(None),
                Source::Timer(timer) => {
                    TimerProbe::start(&probe.name, &probe.program, timer).map(Some).map_err(|error| {
                        OpenError { probe: probe.name.clone(), cpu: None, error, when_denied: "" }
                    })
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Kernel { probes, timers })
    }
}

impl Opener for Kernel {
    type Event = CpuEvent;

    fn open(&mut self, index: usize, cpu: u32) -> io::Result<CpuEvent> {
        let probe = &self.probes[index];
        match (&probe.source, &mut self.timers[index]) {
            (_, Some(timers)) => timers.open(cpu).map(CpuEvent::Timer),
            (Source::Perf(spec), None) => {
                PerfEvent::open(spec, -1, cpu as i32)?.attach(probe.program.as_fd()).map(CpuEvent::Perf)
            }
            (Source::Timer(_), None) => unreachable!("a timer probe's timers are started with the run"),
        }
    }

    fn enable(&self, event: &CpuEvent) -> io::Result<()> {
        match event {
            CpuEvent::Perf(event) => event.enable(),
            CpuEvent::Timer(timer) => self.timer_probe(timer).enable(timer),
        }
    }

    fn enabled_time(&self, event: &CpuEvent) -> io::Result<u64> {
        match event {
            CpuEvent::Perf(event) => event.enabled_time(),
            CpuEvent::Timer(timer) => self.timer_probe(timer).enabled_time(timer),
        }
    }
}

impl Kernel {
    fn timer_probe(&self, timer: &ArmedTimer) -> &TimerProbe {
        self.timers.iter().flatten().find(|probe| probe.owns(timer)).expect("a timer belongs to its probe")
    }
}

/// Why an event is (re)opened, counted in [`Revivals`] once it is open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Why {
    /// Its event on a returning CPU is dead (or known to be).
    Dead,
    /// The CPU has never had its events.
    NewCpu,
}

/// Re-enabled events of a returning CPU, to be checked at `due`.
struct Check {
    cpu: u32,
    due: Instant,
    /// (probe, enabled time right after ENABLE)
    events: Vec<(usize, u64)>,
}

/// An event that could not be opened, to be tried again at `due`.
struct Retry {
    cpu: u32,
    probe: usize,
    why: Why,
    due: Instant,
    tries: u32,
}

/// CPUs one liveness check reads the events of.
const SWEEP_CPUS: usize = 16;

pub struct PerfProbes<O: Opener = Kernel> {
    opener: O,
    /// Name and placement of each probe, by index.
    probes: Vec<(String, Placement)>,
    /// (cpu, probe) → its event on that CPU; kept while the CPU is offline, to try reviving it.
    events: BTreeMap<(u32, usize), O::Event>,
    /// Which CPU each one-CPU probe is on.
    homes: BTreeMap<usize, u32>,
    checks: Vec<Check>,
    retries: Vec<Retry>,
    /// Whether re-enabling is still tried on a returning CPU: until a check shows that this kernel
    /// leaves re-enabled events dead.
    try_reenable: bool,
    /// The enabled time of each event at its CPU's last liveness check.
    enabled_times: BTreeMap<(u32, usize), u64>,
    /// The last CPU a liveness check looked at: the next one goes on after it.
    swept_to: Option<u32>,
    pub revivals: Revivals,
    verbose: bool,
}

impl PerfProbes {
    /// Opens every probe's events on the CPUs online now, disabled until [`PerfProbes::enable`]. An
    /// error here (an event the machine lacks) is the user's to see.
    /// One-CPU probes start on `one_cpu` when it is online, else on the first online CPU.
    pub fn start(
        probes: Vec<PerfProbe>,
        online: impl Iterator<Item = u32> + Clone,
        one_cpu: Option<u32>,
        verbose: bool,
    ) -> Result<PerfProbes, OpenError> {
        let names: Vec<(String, Placement)> = probes.iter().map(|p| (p.name.clone(), p.placement)).collect();
        let hints: Vec<&'static str> = probes.iter().map(|p| p.when_denied).collect();
        PerfProbes::open(Kernel::new(probes)?, names.clone(), online, one_cpu, verbose).map_err(
            |(probe, cpu, error)| {
                let when_denied = names.iter().position(|(name, _)| *name == probe).map_or("", |i| hints[i]);
                OpenError { probe, cpu: Some(cpu), error, when_denied }
            },
        )
    }
}

impl<O: Opener> PerfProbes<O> {
    /// [`PerfProbes::start`] with any opener; an error names the probe and the CPU.
    pub fn open(
        opener: O,
        probes: Vec<(String, Placement)>,
        online: impl Iterator<Item = u32> + Clone,
        one_cpu: Option<u32>,
        verbose: bool,
    ) -> Result<PerfProbes<O>, (String, u32, io::Error)> {
        let mut set = PerfProbes {
            opener,
            probes,
            events: BTreeMap::new(),
            homes: BTreeMap::new(),
            checks: vec![],
            retries: vec![],
            try_reenable: true,
            enabled_times: BTreeMap::new(),
            swept_to: None,
            revivals: Revivals::default(),
            verbose,
        };
        for index in 0..set.probes.len() {
            let placement = set.probes[index].1;
            let cpus: Vec<u32> = match placement {
                Placement::EveryCpu => online.clone().collect(),
                // Candidates in order of preference; the first that opens is the home.
                Placement::OneCpu => {
                    let preferred = one_cpu.filter(|&cpu| online.clone().any(|c| c == cpu));
                    preferred.into_iter().chain(online.clone()).collect()
                }
                Placement::Retired => vec![],
            };
            for cpu in cpus {
                match set.opener.open(index, cpu) {
                    Ok(event) => {
                        set.events.insert((cpu, index), event);
                        if placement == Placement::OneCpu {
                            set.homes.insert(index, cpu);
                            break;
                        }
                    }
                    // Gone offline since the online list was read: the watcher sees it return.
                    Err(e) if e.raw_os_error() == Some(libc::ENODEV) => {}
                    Err(e) => return Err((set.probes[index].0.clone(), cpu, e)),
                }
            }
        }
        Ok(set)
    }

    /// Starts every event.
    pub fn enable(&self) -> io::Result<()> {
        self.events.values().try_for_each(|event| self.opener.enable(event))
    }

    /// Closes the events of the probe named `name` for good: no CPU gets them again.
    pub fn retire(&mut self, name: &str) {
        let Some(index) = self.probes.iter().position(|(probe, _)| probe == name) else { return };
        self.probes[index].1 = Placement::Retired;
        self.events.retain(|&(_, probe), _| probe != index);
        self.enabled_times.retain(|&(_, probe), _| probe != index);
        self.homes.remove(&index);
        self.retries.retain(|r| r.probe != index);
        for check in &mut self.checks {
            check.events.retain(|&(probe, _)| probe != index);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.probes.is_empty()
    }

    /// When the next check of re-enabled events, or the next retry, is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.checks.iter().map(|c| c.due).chain(self.retries.iter().map(|r| r.due)).min()
    }

    /// CPUs went offline or came online.
    pub fn cpus_changed(&mut self, went_offline: &[u32], came_online: &[u32], online: &[u32], now: Instant) {
        for &cpu in went_offline {
            self.say(format_args!("cpu{cpu} went offline"));
            self.checks.retain(|c| c.cpu != cpu);
            self.retries.retain(|r| r.cpu != cpu);
            self.move_one_cpu_probes(cpu, online);
        }
        for &cpu in came_online {
            let mut reenabled = vec![];
            let (mut reopened, mut new) = (0, 0);
            for index in 0..self.probes.len() {
                if self.probes[index].1 != Placement::EveryCpu {
                    continue;
                }
                match self.events.get(&(cpu, index)) {
                    Some(event) if self.try_reenable => {
                        let _ = self.opener.enable(event);
                        reenabled.push((index, self.opener.enabled_time(event).unwrap_or(0)));
                    }
                    Some(_) => {
                        self.reopen(cpu, index, Why::Dead, now, 1);
                        reopened += 1;
                    }
                    None => {
                        self.reopen(cpu, index, Why::NewCpu, now, 1);
                        new += 1;
                    }
                }
            }
            if new > 0 {
                self.say(format_args!("cpu{cpu} came online for the first time: {new} event(s) opened"));
            }
            if reopened > 0 {
                self.say(format_args!("cpu{cpu} came back online: {reopened} event(s) reopened"));
            }
            if !reenabled.is_empty() {
                self.say(format_args!(
                    "cpu{cpu} came back online: {} event(s) re-enabled, checking them",
                    reenabled.len()
                ));
                self.checks.push(Check { cpu, due: now + VERIFY_AFTER, events: reenabled });
            }
        }
    }

    /// Does the checks and retries that are due. A re-enabled event whose enabled time did not advance
    /// is dead, and is opened anew; when none of a CPU's events came back, this kernel does not revive
    /// them, and returning CPUs get new events at once from then on.
    pub fn check_due(&mut self, now: Instant) {
        let (due, later): (Vec<Retry>, Vec<Retry>) =
            std::mem::take(&mut self.retries).into_iter().partition(|r| r.due <= now);
        self.retries = later;
        for retry in due {
            self.reopen(retry.cpu, retry.probe, retry.why, now, retry.tries + 1);
        }
        let (due, later): (Vec<Check>, Vec<Check>) =
            std::mem::take(&mut self.checks).into_iter().partition(|c| c.due <= now);
        self.checks = later;
        for check in due {
            let (mut revived, mut dead) = (0, 0);
            for (index, before) in check.events {
                let running = self
                    .events
                    .get(&(check.cpu, index))
                    .and_then(|e| self.opener.enabled_time(e).ok())
                    .is_some_and(|t| t > before);
                if running {
                    revived += 1;
                } else {
                    self.reopen(check.cpu, index, Why::Dead, now, 1);
                    dead += 1;
                }
            }
            self.revivals.reenabled += revived;
            self.say(format_args!(
                "cpu{}: {revived} event(s) ran again after ENABLE, {dead} reopened",
                check.cpu
            ));
            if revived == 0 && dead > 0 && self.try_reenable {
                self.try_reenable = false;
                self.say(format_args!(
                    "this kernel does not revive re-enabled events: from now on they are reopened at once"
                ));
            }
        }
    }

    /// Finds events that died without their CPU being seen to go offline (a transition missed while the
    /// process was stopped, or where no uevents arrive and the CPU came back between two looks): an event
    /// on an online CPU whose enabled time has not advanced since the last look is opened anew. Events
    /// of CPUs being checked after a return are left to that check.
    ///
    /// Each check looks at [`SWEEP_CPUS`] online CPUs, going round them: reading an event's enabled time
    /// sends an interrupt to its CPU, so the reads a second stay bounded however many CPUs there are (on 256
    /// CPUs each is looked at every 0.8 s; benches/cpu_scale.py --host-cost measures a read at about 2 µs).
    pub fn check_alive(&mut self, online: &[u32], now: Instant) {
        let checking: Vec<u32> = self.checks.iter().map(|c| c.cpu).collect();
        let first = online.partition_point(|&cpu| self.swept_to.is_some_and(|last| cpu <= last));
        let batch: Vec<u32> =
            online.iter().cycle().skip(first).take(SWEEP_CPUS.min(online.len())).copied().collect();
        self.swept_to = batch.last().copied();
        // What a check of a CPU being verified after its return, or of one gone offline, saw is stale.
        self.enabled_times.retain(|(cpu, _), _| online.contains(cpu) && !checking.contains(cpu));
        let mut dead = vec![];
        for &cpu in batch.iter().filter(|cpu| !checking.contains(cpu)) {
            for (&(_, index), event) in self.events.range((cpu, 0)..(cpu + 1, 0)) {
                let Ok(time) = self.opener.enabled_time(event) else { continue };
                match self.enabled_times.insert((cpu, index), time) {
                    Some(before) if time <= before => dead.push((cpu, index)),
                    _ => {}
                }
            }
        }
        for (cpu, index) in dead {
            self.say(format_args!(
                "{} on cpu{cpu} stopped counting without cpu{cpu} being seen to go offline: reopened",
                self.probes[index].0
            ));
            self.reopen(cpu, index, Why::Dead, now, 1);
        }
    }

    /// Closes the event of `index` on `cpu` (if any) and opens it anew, running; on failure tries again
    /// shortly: while ENODEV says that the CPU is not up yet, else up to [`MAX_TRIES`] tries.
    fn reopen(&mut self, cpu: u32, index: usize, why: Why, now: Instant, tries: u32) {
        self.events.remove(&(cpu, index));
        // A new event's enabled time starts again from 0.
        self.enabled_times.remove(&(cpu, index));
        match self.open_running(index, cpu) {
            Ok(event) => {
                self.events.insert((cpu, index), event);
                match why {
                    Why::Dead => self.revivals.reopened += 1,
                    Why::NewCpu => self.revivals.new_cpu += 1,
                }
            }
            // The CPU is not quite up yet (ENODEV), or has gone again already (then the retry is dropped
            // when the change is seen).
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) || tries < MAX_TRIES => {
                if tries == 1 {
                    self.say(format_args!("cpu{cpu}: cannot open {} yet ({e}); trying again", self.probes[index].0));
                }
                self.retries.push(Retry { cpu, probe: index, why, due: now + RETRY_AFTER, tries });
            }
            Err(e) => crate::stderr!(
                "steadytrace: cannot open {} on cpu{cpu} after it came online ({e}): cpu{cpu} is not covered until it comes online again",
                self.probes[index].0
            ),
        }
    }

    fn open_running(&mut self, index: usize, cpu: u32) -> io::Result<O::Event> {
        let event = self.opener.open(index, cpu)?;
        self.opener.enable(&event)?;
        Ok(event)
    }

    fn move_one_cpu_probes(&mut self, gone: u32, online: &[u32]) {
        let moving: Vec<usize> = self.homes.iter().filter(|(_, &cpu)| cpu == gone).map(|(&i, _)| i).collect();
        for index in moving {
            self.events.remove(&(gone, index));
            for &cpu in online {
                if let Ok(event) = self.open_running(index, cpu) {
                    self.events.insert((cpu, index), event);
                    self.enabled_times.remove(&(cpu, index));
                    self.homes.insert(index, cpu);
                    self.revivals.moved += 1;
                    self.say(format_args!("{} moved from cpu{gone} to cpu{cpu}", self.probes[index].0));
                    break;
                }
            }
        }
    }

    fn say(&self, message: std::fmt::Arguments<'_>) {
        if self.verbose {
            crate::stderr!("steadytrace: {message}");
        }
    }
}

/// A probe's perf event that could not be opened on a CPU (or its BPF timers started: no CPU); the
/// kernel's error is kept.
#[derive(Debug)]
pub struct OpenError {
    pub probe: String,
    pub cpu: Option<u32>,
    pub error: io::Error,
    /// What to add when perf_event_open was refused ([`PerfProbe::when_denied`]).
    pub when_denied: &'static str,
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.cpu {
            Some(cpu) => f.write_str(&describe_open_error(&self.probe, cpu, &self.error, self.when_denied)),
            None => write!(f, "{}", self.error),
        }
    }
}

/// A failed `perf_event_open`, said in the user's terms.
fn describe_open_error(name: &str, cpu: u32, error: &io::Error, when_denied: &str) -> String {
    let why = match error.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) => {
            "this machine does not have that event (a virtual machine often has no hardware counters)"
                .to_string()
        }
        Some(libc::EACCES) | Some(libc::EPERM) => {
            return crate::privilege::perf_event_denied(name, error, when_denied)
        }
        _ => error.to_string(),
    };
    format!("cannot open `{name}` on cpu{cpu}: {why}")
}

#[cfg(test)]
mod tests {
    use super::super::fake::FakeKernel;
    use super::*;

    /// A run of one profile probe (index 0) and, with `one_cpu`, a perf interval on cpu1 (index 1).
    struct Run {
        machine: FakeKernel,
        probes: PerfProbes<FakeKernel>,
        t0: Instant,
    }

    impl Run {
        fn start(cpus: u32, online: &[u32], revives: bool, one_cpu: bool) -> Run {
            let machine = FakeKernel::with_cpus(cpus, online, revives);
            let mut names = vec![("profile:hz:99".to_string(), Placement::EveryCpu)];
            if one_cpu {
                names.push(("interval:ms:10".to_string(), Placement::OneCpu));
            }
            let probes = PerfProbes::open(machine.clone(), names, online.iter().copied(), Some(1), false)
                .unwrap_or_else(|(name, cpu, e)| panic!("{name} on cpu{cpu}: {e}"));
            probes.enable().unwrap();
            Run { machine, probes, t0: Instant::now() }
        }

        fn at(&self, ms: u64) -> Instant {
            self.t0 + Duration::from_millis(ms)
        }

        fn offline(&mut self, cpu: u32, ms: u64) {
            self.machine.take_offline(cpu);
            let online = self.machine.online();
            self.probes.cpus_changed(&[cpu], &[], &online, self.at(ms));
        }

        fn online_again(&mut self, cpu: u32, ms: u64) {
            self.machine.bring_online(cpu);
            let online = self.machine.online();
            self.probes.cpus_changed(&[], &[cpu], &online, self.at(ms));
        }

        fn check(&mut self, ms: u64) {
            self.probes.check_due(self.at(ms));
        }

        /// Whether `probe` has a live, enabled event on `cpu`.
        fn covered(&self, cpu: u32, probe: usize) -> bool {
            self.probes.events.get(&(cpu, probe)).is_some_and(|e| e.counts())
        }

        fn due_in_ms(&self) -> Option<u64> {
            self.probes.next_due().map(|due| due.duration_since(self.t0).as_millis() as u64)
        }

        fn open_events(&self) -> i64 {
            self.machine.state().open_events
        }
    }

    fn revivals(reenabled: u64, reopened: u64, new_cpu: u64, moved: u64) -> Revivals {
        Revivals { reenabled, reopened, new_cpu, moved }
    }

    #[test]
    fn an_event_that_died_unseen_is_found_by_its_frozen_enabled_time() {
        let mut run = Run::start(2, &[0, 1], false, true);
        run.probes.check_alive(&[0, 1], run.at(5));
        // cpu1 goes offline and comes back while nobody looks: the online mask is the same as before.
        *run.machine.state().epochs.get_mut(&1).unwrap() += 1;
        assert!(!run.covered(1, 0) && !run.covered(1, 1), "both events on cpu1 died");
        run.probes.check_alive(&[0, 1], run.at(55));
        assert!(run.covered(1, 0) && run.covered(1, 1), "found dead and reopened");
        assert!(run.covered(0, 0), "cpu0's event is alive and kept");
        assert_eq!(run.probes.revivals, revivals(0, 2, 0, 0));
        assert_eq!(run.open_events(), 3, "nothing leaked");
        // The new events count: the next look finds them alive.
        run.probes.check_alive(&[0, 1], run.at(105));
        assert_eq!(run.probes.revivals, revivals(0, 2, 0, 0));
    }

    #[test]
    fn a_returning_cpu_is_checked_once_then_reopened_at_once() {
        let mut run = Run::start(2, &[0, 1], false, false);
        assert!(run.covered(0, 0) && run.covered(1, 0));
        run.offline(1, 10);
        assert!(!run.covered(1, 0));
        assert_eq!(run.due_in_ms(), None);

        // First return: re-enabled, then checked; its enabled time stood still, so it is reopened.
        run.online_again(1, 20);
        assert!(!run.covered(1, 0), "re-enabled but dead");
        assert_eq!(run.due_in_ms(), Some(21));
        run.check(20);
        assert!(!run.covered(1, 0), "not checked before it is due");
        run.check(21);
        assert!(run.covered(1, 0));
        assert_eq!(run.probes.revivals, revivals(0, 1, 0, 0));

        // Every later return: reopened at once, nothing to check, no ENABLE of the dead event.
        for (off, on) in [(30, 40), (50, 60)] {
            run.offline(1, off);
            let enables = run.machine.state().enables;
            run.online_again(1, on);
            assert!(run.covered(1, 0), "covered right when cpu1 returns at {on} ms");
            assert_eq!(run.due_in_ms(), None);
            assert_eq!(run.machine.state().enables, enables + 1, "only the new event is enabled");
        }
        assert_eq!(run.probes.revivals, revivals(0, 3, 0, 0));
        assert!(run.covered(0, 0), "cpu0 untouched");
        assert_eq!(run.open_events(), 2, "one event per CPU, none leaked");
    }

    #[test]
    fn on_a_kernel_that_revives_events_they_are_kept_and_still_checked() {
        let mut run = Run::start(2, &[0, 1], true, false);
        let opens = run.machine.state().opens;
        for (off, on) in [(10, 20), (30, 40)] {
            run.offline(1, off);
            run.online_again(1, on);
            assert!(run.covered(1, 0));
            assert_eq!(run.due_in_ms(), Some(on + 1));
            run.check(on + 1);
        }
        assert_eq!(run.probes.revivals, revivals(2, 0, 0, 0));
        assert_eq!(run.machine.state().opens, opens, "nothing reopened");
    }

    #[test]
    fn a_cpu_never_seen_before_gets_new_events() {
        let mut run = Run::start(2, &[0], false, false);
        assert!(!run.covered(1, 0));
        run.online_again(1, 5);
        assert!(run.covered(1, 0));
        assert_eq!(run.due_in_ms(), None, "nothing to check");
        assert_eq!(run.probes.revivals, revivals(0, 0, 1, 0));
        // Its first departure and return is then a revival like any other.
        run.offline(1, 10);
        run.online_again(1, 20);
        run.check(21);
        assert!(run.covered(1, 0));
        assert_eq!(run.probes.revivals, revivals(0, 1, 1, 0));
    }

    #[test]
    fn an_event_refused_while_its_cpu_comes_up_is_tried_again() {
        let mut run = Run::start(2, &[0], false, false);
        run.machine.state().refusals.insert(1, (2, libc::ENODEV));
        run.online_again(1, 10);
        assert!(!run.covered(1, 0));
        assert_eq!(run.due_in_ms(), Some(11));
        run.check(11);
        assert!(!run.covered(1, 0), "refused a second time");
        assert_eq!(run.due_in_ms(), Some(12));
        run.check(12);
        assert!(run.covered(1, 0));
        assert_eq!(run.due_in_ms(), None);
        assert_eq!(run.probes.revivals, revivals(0, 0, 1, 0), "counted once, when opened");
    }

    #[test]
    fn enodev_is_tried_again_for_as_long_as_the_cpu_takes_to_come_up() {
        let mut run = Run::start(2, &[0], false, false);
        run.machine.state().refusals.insert(1, (300, libc::ENODEV));
        run.online_again(1, 0);
        for ms in 1..=300 {
            assert!(!run.covered(1, 0));
            assert_eq!(run.due_in_ms(), Some(ms), "tried every millisecond");
            run.check(ms);
        }
        assert!(run.covered(1, 0), "opened once the CPU accepted it, after 300 ms");
        assert_eq!(run.due_in_ms(), None);
    }

    #[test]
    fn other_errors_are_tried_a_limited_number_of_times() {
        let mut run = Run::start(2, &[0], false, false);
        run.machine.state().refusals.insert(1, (1000, libc::EMFILE));
        run.online_again(1, 0);
        let mut ms = 0;
        while let Some(due) = run.due_in_ms() {
            ms = due;
            run.check(due);
        }
        assert_eq!(ms, u64::from(MAX_TRIES) - 1, "given up after {MAX_TRIES} tries");
        assert!(!run.covered(1, 0));
        run.machine.state().refusals.clear();
        run.offline(1, 100);
        run.online_again(1, 110);
        assert!(run.covered(1, 0), "tried again when the CPU comes back");
    }

    #[test]
    fn retries_end_when_the_cpu_goes_away_again() {
        let mut run = Run::start(2, &[0, 1], false, false);
        run.offline(1, 0);
        run.online_again(1, 10);
        run.check(11); // learns that re-enabling does not revive
        run.offline(1, 20);
        run.machine.state().refusals.insert(1, (1, libc::ENODEV));
        run.online_again(1, 30);
        assert_eq!(run.due_in_ms(), Some(31));
        run.offline(1, 30);
        assert_eq!(run.due_in_ms(), None, "the retry went with the CPU");
        run.check(31);
        assert!(!run.covered(1, 0));
        run.online_again(1, 40);
        assert!(run.covered(1, 0));
    }

    #[test]
    fn a_cpu_that_flaps_during_the_check_is_checked_again_on_its_next_return() {
        let mut run = Run::start(2, &[0, 1], false, false);
        run.offline(1, 0);
        run.online_again(1, 10);
        assert_eq!(run.due_in_ms(), Some(11));
        // Gone again before the check: nothing is learned from it.
        run.offline(1, 10);
        assert_eq!(run.due_in_ms(), None);
        run.check(11);
        assert_eq!(run.probes.revivals, revivals(0, 0, 0, 0));
        run.online_again(1, 20);
        assert_eq!(run.due_in_ms(), Some(21), "still checking");
        run.check(21);
        assert!(run.covered(1, 0));
        assert_eq!(run.probes.revivals, revivals(0, 1, 0, 0));
        run.offline(1, 30);
        run.online_again(1, 40);
        assert!(run.covered(1, 0), "learned: reopened at once");
        assert_eq!(run.open_events(), 2);
    }

    #[test]
    fn a_one_cpu_probe_moves_off_a_cpu_going_offline_and_stays_moved() {
        let mut run = Run::start(2, &[0, 1], false, true);
        assert!(run.covered(1, 1) && !run.probes.events.contains_key(&(0, 1)), "starts on the CPU asked for");
        run.offline(1, 10);
        assert!(run.covered(0, 1));
        run.online_again(1, 20);
        run.check(21);
        assert!(run.covered(0, 1) && !run.probes.events.contains_key(&(1, 1)));
        assert!(run.covered(1, 0), "the profile probe is back on cpu1");
        assert_eq!(run.probes.revivals, revivals(0, 1, 0, 1));
    }

    #[test]
    fn an_event_the_machine_lacks_is_an_error_naming_probe_and_cpu() {
        struct Lacking;
        impl Opener for Lacking {
            type Event = ();
            fn open(&mut self, _: usize, _: u32) -> io::Result<()> {
                Err(io::Error::from_raw_os_error(libc::ENOENT))
            }
            fn enable(&self, _: &()) -> io::Result<()> {
                Ok(())
            }
            fn enabled_time(&self, _: &()) -> io::Result<u64> {
                Ok(0)
            }
        }
        let names = vec![("hardware:cycles:1000".to_string(), Placement::EveryCpu)];
        let Err((name, cpu, error)) = PerfProbes::open(Lacking, names, [0, 1].into_iter(), None, false)
        else {
            panic!("opened an event the machine lacks");
        };
        assert_eq!((name.as_str(), cpu), ("hardware:cycles:1000", 0));
        let message = describe_open_error(&name, cpu, &error, "");
        assert!(message.contains("this machine does not have that event"), "{message}");
    }
}
