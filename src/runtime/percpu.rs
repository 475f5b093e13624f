//! Probes on perf events, kept covering every online CPU through hotplug.
//!
//! A per-CPU perf event whose CPU goes offline is dead when the CPU returns (measured on 6.1, 6.12
//! and 6.18): `PERF_EVENT_IOC_ENABLE` succeeds but the event never counts again. So for a returning
//! CPU each event is first re-enabled and, a few milliseconds later, checked (its enabled time must
//! advance); an event that did not come back is closed, opened anew and re-attached. A CPU never seen
//! before gets fresh events. See docs/HOTPLUG.md.

use bpf::perf::{PerfEvent, PerfEventSpec};
use bpf::Program;
use std::collections::BTreeMap;
use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a re-enabled event gets to show that it runs again.
const VERIFY_AFTER: Duration = Duration::from_millis(5);

/// Where a probe's events live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// One event on every online CPU (profile, software, hardware probes).
    EveryCpu,
    /// One event on one online CPU, moved when that CPU goes offline (`--interval-engine perf`).
    OneCpu,
}

pub struct PerfProbe {
    pub name: String,
    pub spec: PerfEventSpec,
    pub program: Arc<Program>,
    pub placement: Placement,
}

/// What hotplug did, for `-v` and the JSON summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Revivals {
    /// Events that ran again after `PERF_EVENT_IOC_ENABLE`.
    pub reenabled: u64,
    /// Events closed and opened anew because re-enabling did not revive them.
    pub reopened: u64,
    /// Events opened on CPUs that were offline when tracing started.
    pub new_cpu: u64,
    /// One-CPU probes moved off a CPU that went offline.
    pub moved: u64,
}

struct Pending {
    cpu: u32,
    due: Instant,
    /// (probe, enabled time right after ENABLE)
    checks: Vec<(usize, u64)>,
}

pub struct PerfProbes {
    probes: Vec<PerfProbe>,
    /// (cpu, probe) → its event on that CPU; kept while the CPU is offline, to try reviving it.
    events: BTreeMap<(u32, usize), PerfEvent>,
    /// Which CPU each one-CPU probe is on.
    homes: BTreeMap<usize, u32>,
    pending: Vec<Pending>,
    /// (cpu, probe, when) of events that could not be opened on a CPU that came online.
    retries: Vec<(u32, usize, Instant)>,
    pub revivals: Revivals,
    verbose: bool,
}

/// Opens and attaches an event, disabled.
fn open(spec: &PerfEventSpec, program: &Program, cpu: u32) -> io::Result<PerfEvent> {
    PerfEvent::open(spec, -1, cpu as i32)?.attach(program.as_fd())
}

/// Opens and attaches an event, running.
fn open_running(spec: &PerfEventSpec, program: &Program, cpu: u32) -> io::Result<PerfEvent> {
    let event = open(spec, program, cpu)?;
    event.enable()?;
    Ok(event)
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
    ) -> Result<PerfProbes, String> {
        let mut set = PerfProbes {
            probes,
            events: BTreeMap::new(),
            homes: BTreeMap::new(),
            pending: vec![],
            retries: vec![],
            revivals: Revivals::default(),
            verbose,
        };
        for index in 0..set.probes.len() {
            let probe = &set.probes[index];
            let cpus: Vec<u32> = match probe.placement {
                Placement::EveryCpu => online.clone().collect(),
                // Candidates in order of preference; the first that opens is the home.
                Placement::OneCpu => {
                    let preferred = one_cpu.filter(|&cpu| online.clone().any(|c| c == cpu));
                    preferred.into_iter().chain(online.clone()).collect()
                }
            };
            for cpu in cpus {
                match open(&probe.spec, &probe.program, cpu) {
                    Ok(event) => {
                        set.events.insert((cpu, index), event);
                        if probe.placement == Placement::OneCpu {
                            set.homes.insert(index, cpu);
                            break;
                        }
                    }
                    // Gone offline since the online list was read: the watcher sees it return.
                    Err(e) if e.raw_os_error() == Some(libc::ENODEV) => {}
                    Err(e) => return Err(describe_open_error(&probe.name, cpu, &e)),
                }
            }
        }
        Ok(set)
    }

    /// Starts every event.
    pub fn enable(&self) -> io::Result<()> {
        self.events.values().try_for_each(PerfEvent::enable)
    }

    pub fn is_empty(&self) -> bool {
        self.probes.is_empty()
    }

    /// When the next check of re-enabled events is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.pending.iter().map(|p| p.due).chain(self.retries.iter().map(|r| r.2)).min()
    }

    /// CPUs went offline or came online.
    pub fn cpus_changed(&mut self, went_offline: &[u32], came_online: &[u32], online: &[u32], now: Instant) {
        for &cpu in went_offline {
            self.say(format_args!("cpu{cpu} went offline"));
            self.pending.retain(|p| p.cpu != cpu);
            self.retries.retain(|r| r.0 != cpu);
            self.move_one_cpu_probes(cpu, online);
        }
        for &cpu in came_online {
            let mut checks = vec![];
            for index in 0..self.probes.len() {
                if self.probes[index].placement != Placement::EveryCpu {
                    continue;
                }
                match self.events.get(&(cpu, index)) {
                    Some(event) => {
                        let _ = event.enable();
                        checks.push((index, event.enabled_time().unwrap_or(0)));
                    }
                    None => {
                        self.reopen(cpu, index);
                        self.revivals.new_cpu += 1;
                    }
                }
            }
            if checks.is_empty() {
                self.say(format_args!("cpu{cpu} came online for the first time: events opened"));
            } else {
                self.say(format_args!(
                    "cpu{cpu} came back online: {} event(s) re-enabled, checking them",
                    checks.len()
                ));
                self.pending.push(Pending { cpu, due: now + VERIFY_AFTER, checks });
            }
        }
    }

    /// Checks re-enabled events that are due: an event whose enabled time did not advance is dead, and
    /// is opened anew.
    pub fn check_due(&mut self, now: Instant) {
        let (retry, later): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.retries).into_iter().partition(|r| r.2 <= now);
        self.retries = later;
        for (cpu, index, _) in retry {
            self.reopen(cpu, index);
        }
        let (due, later): (Vec<Pending>, Vec<Pending>) =
            std::mem::take(&mut self.pending).into_iter().partition(|p| p.due <= now);
        self.pending = later;
        for pending in due {
            let (mut revived, mut reopened) = (0, 0);
            for (index, before) in pending.checks {
                let running = self
                    .events
                    .get(&(pending.cpu, index))
                    .and_then(|e| e.enabled_time().ok())
                    .is_some_and(|t| t > before);
                if running {
                    revived += 1;
                } else {
                    self.reopen(pending.cpu, index);
                    reopened += 1;
                }
            }
            self.revivals.reenabled += revived;
            self.revivals.reopened += reopened;
            self.say(format_args!(
                "cpu{}: {revived} event(s) ran again after ENABLE, {reopened} reopened",
                pending.cpu
            ));
        }
    }

    fn reopen(&mut self, cpu: u32, index: usize) {
        self.events.remove(&(cpu, index));
        let probe = &self.probes[index];
        match open_running(&probe.spec, &probe.program, cpu) {
            Ok(event) => {
                self.events.insert((cpu, index), event);
            }
            // The CPU may have gone again already, or not be quite ready: try again shortly (a CPU that
            // went away is dropped from the retries when the change is seen).
            Err(e) => {
                self.say(format_args!("cpu{cpu}: cannot open {} ({e}); trying again", probe.name));
                self.retries.push((cpu, index, Instant::now() + VERIFY_AFTER));
            }
        }
    }

    fn move_one_cpu_probes(&mut self, gone: u32, online: &[u32]) {
        let moving: Vec<usize> = self.homes.iter().filter(|(_, &cpu)| cpu == gone).map(|(&i, _)| i).collect();
        for index in moving {
            self.events.remove(&(gone, index));
            let probe = &self.probes[index];
            for &cpu in online {
                if let Ok(event) = open_running(&probe.spec, &probe.program, cpu) {
                    self.events.insert((cpu, index), event);
                    self.homes.insert(index, cpu);
                    self.revivals.moved += 1;
                    self.say(format_args!("{} moved from cpu{gone} to cpu{cpu}", probe.name));
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

/// A failed `perf_event_open`, said in the user's terms.
fn describe_open_error(name: &str, cpu: u32, error: &io::Error) -> String {
    let why = match error.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) => {
            "this machine does not have that event (a virtual machine often has no hardware counters)"
                .to_string()
        }
        Some(libc::EACCES) | Some(libc::EPERM) => format!("{error}: perf events need root or CAP_PERFMON"),
        _ => error.to_string(),
    };
    format!("cannot open `{name}` on cpu{cpu}: {why}")
}
