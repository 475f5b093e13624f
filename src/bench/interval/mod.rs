//! `steadytrace bench interval`: the same period through each interval engine, one after another, each
//! measured the way cyclictest measures a timer: every firing's time against its intended deadline.
//! BPF engines take their timestamps in BPF (`bpf_ktime_get_ns`, CLOCK_MONOTONIC) and send them through
//! a ring buffer; the threads that fire at deadlines neither lock nor allocate per firing.

mod bpf_timer;
mod collect;
mod entry;
mod environment;
mod hotplug;
mod machine;
mod pace;
mod perf;
mod plot;
mod programs;
mod references;
mod report;
mod report_json;
mod scheduling;
mod stats;

use super::cli::{Engine, IntervalArgs, ReportFormat};
use bpf::features::Features;
use environment::{Interrupt, Load};
use hotplug::Flapper;
use scheduling::Scheduling;
use std::io::{IsTerminal, Write};
use std::time::Duration;

/// The deadlines of one engine's run: `start + k * period` for k = 1..=count.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Window {
    pub start_ns: u64,
    pub period_ns: u64,
    pub count: u64,
}

impl Window {
    fn starting_now(period_ns: u64, count: u64) -> Window {
        // A period of lead time, so that the first deadline is not already near when the engine starts.
        Window { start_ns: crate::runtime::timer::monotonic_ns() + period_ns, period_ns, count }
    }

    pub fn deadline(&self, k: u64) -> u64 {
        self.start_ns + k * self.period_ns
    }

    pub fn end_ns(&self) -> u64 {
        self.deadline(self.count)
    }
}

/// One firing seen: the period it served (1-based), when it ran, and its deadline when it had one.
#[derive(Clone, Copy, Debug)]
pub struct Firing {
    pub index: u64,
    pub at_ns: u64,
    pub deadline_ns: Option<u64>,
}

/// What an engine delivered in its window.
#[derive(Debug, Default)]
pub struct Measured {
    pub firings: Vec<Firing>,
    /// Periods the engine itself knew it skipped (woken a whole period late) and reported.
    pub skipped: u64,
    /// Mean time of one entry into BPF from userspace, when the engine enters from userspace.
    pub entry_cost_ns: Option<f64>,
    /// Median time from the call entering BPF to the program's own clock read (`timer`, `trigger`).
    pub to_program_ns: Option<f64>,
    /// The CPU time of the firing thread over its round, as a share of the round (`timer`, `trigger`,
    /// `sleep`).
    pub thread_cpu_share: Option<f64>,
    /// The CPUs its BPF program ran on.
    pub cpus: Vec<u32>,
    /// Times it was moved off a CPU that went offline (perf).
    pub moved: Option<u64>,
    /// How its firings were scheduled.
    pub scheduling: Option<Scheduling>,
    /// Only the lateness of each firing is known, not when it ran nor in which order (a histogram).
    pub latencies_only: bool,
}

/// How long an engine bound to a CPU waits for `--flap` to bring that CPU online before it starts elsewhere.
pub const START_ON_CPU_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// What every engine gets to run with.
pub struct Setup<'a> {
    pub window: Window,
    /// SCHED_FIFO priority of the threads sleeping until deadlines, 0 for SCHED_OTHER.
    pub rt: u8,
    pub interrupt: &'a Interrupt,
    pub progress: Progress,
    /// Where the perf and bpf-timer engines start: the flapped CPU (they wait for it to be online, up to
    /// two flap periods), else the first online CPU.
    pub perf_cpu: u32,
    /// What the kernel offers (the engines some kernels lack say so).
    pub features: &'a Features,
}

/// Progress on stderr (engine, elapsed, firings), only when stderr is a terminal and the run is longer
/// than a couple of seconds.
#[derive(Clone, Copy)]
pub struct Progress {
    engine: &'static str,
    enabled: bool,
}

impl Progress {
    pub fn show(&self, window: &Window, firings: usize) {
        if self.enabled {
            let now = crate::runtime::timer::monotonic_ns();
            let elapsed = now.saturating_sub(window.start_ns) as f64 / 1e9;
            let total = (window.end_ns() - window.start_ns) as f64 / 1e9;
            let _ = write!(
                std::io::stderr(),
                "\r{}: {:.0}/{:.0} s, {} firings\x1b[K",
                self.engine,
                elapsed.min(total),
                total,
                firings
            );
        }
    }

    fn done(&self) {
        if self.enabled {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
        }
    }
}

pub fn run(args: &IntervalArgs, features: &Features) -> Result<i32, String> {
    let period_ns = u64::try_from(args.period.as_nanos()).map_err(|_| "--period is too long".to_string())?;
    let count = match (args.count, args.duration) {
        (Some(count), _) => count,
        (None, duration) => {
            let duration = duration.unwrap_or(Duration::from_secs(10));
            let count = (duration.as_nanos() / u128::from(period_ns)) as u64;
            if count < 2 {
                return Err("steadytrace: bench interval: --duration must hold at least two periods\n".into());
            }
            count
        }
    };
    if too_long(count, period_ns) {
        return Err("steadytrace: bench interval: the run would last more than a century\n".into());
    }
    let mut engines = args.engines.clone();
    engines.dedup();
    let interrupt = Interrupt::install().map_err(|e| format!("steadytrace: cannot handle Ctrl-C: {e}\n"))?;
    let rt = environment::check_realtime(args.rt);
    let online = crate::runtime::cpus::online()
        .map_err(|e| format!("steadytrace: cannot read the online CPUs: {e}\n"))?;
    let perf_cpu = args.flap.map(|f| f.cpu).or_else(|| online.first().copied()).unwrap_or(0);

    let machine = machine::Sampler::start(Duration::from_millis(50), online.into_iter().collect());
    let flapper = match args.flap {
        Some(flap) => Some(
            Flapper::start(flap, args.lock_wait, &interrupt)
                .map_err(|e| format!("steadytrace: --flap: {e}\n"))?,
        ),
        None => None,
    };
    let load = Load::start(args.load);
    let rounds = split_into_rounds(count, args.rounds);
    let show_progress = std::io::stderr().is_terminal() && rounds[0] * period_ns > 2_000_000_000;
    // Each engine's rounds so far, or the error that ended it.
    let mut measured: Vec<(Engine, Result<Vec<stats::Round>, String>)> =
        engines.iter().map(|&engine| (engine, Ok(vec![]))).collect();
    for &round_count in &rounds {
        for (engine, outcome) in measured.iter_mut() {
            let Ok(done) = outcome else { continue };
            if interrupt.is_set() {
                break;
            }
            let setup = Setup {
                window: Window::starting_now(period_ns, round_count),
                rt,
                interrupt: &interrupt,
                progress: Progress { engine: engine.name(), enabled: show_progress },
                perf_cpu,
                features,
            };
            let result = run_engine(*engine, &setup);
            setup.progress.done();
            match result {
                Ok(round) => done.push(stats::Round { window: setup.window, measured: round }),
                Err(error) => *outcome = Err(error),
            }
        }
    }
    drop(load);
    let flaps = match flapper {
        Some(flapper) => Some(flapper.finish().map_err(|e| format!("steadytrace: --flap: {e}\n"))?),
        None => None,
    };
    let machine = machine.finish();
    if interrupt.is_set() {
        return Err("steadytrace: bench interval: interrupted; every CPU is back online\n".into());
    }
    let run_end_ns = crate::runtime::timer::monotonic_ns();
    let offline = flaps.as_ref().map_or(vec![], |f| f.offline_spans(run_end_ns));
    let results = measured
        .into_iter()
        .map(|(engine, outcome)| (engine, outcome.map(|rounds| stats::summarize(&rounds, &offline))))
        .collect();
    let report = report::Report {
        period_ns,
        count,
        load: args.load,
        flaps,
        offline,
        rounds: rounds.len() as u64,
        rt_asked: args.rt,
        rt,
        machine,
        results,
    };
    if let Some(path) = &args.plot {
        plot::draw(&report, path).map_err(|e| format!("steadytrace: --plot {}: {e}\n", path.display()))?;
    }
    let text = match args.format {
        ReportFormat::Text => report.text(),
        ReportFormat::Json => report_json::json(&report),
    };
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    Ok(0)
}

fn run_engine(engine: Engine, setup: &Setup<'_>) -> Result<Measured, String> {
    match engine {
        Engine::Timer => entry::run_timer(setup),
        Engine::Trigger => entry::run_trigger(setup),
        Engine::Perf => perf::run(setup),
        Engine::BpfTimer => bpf_timer::run(setup),
        Engine::Sleep => pace::run_sleep(setup),
        Engine::Cyclictest => references::run_cyclictest(setup),
        Engine::Timerlat => references::run_timerlat(setup),
    }
}

/// Longer than a century: the deadlines (`start + k * period`, up to a couple of periods past `count`)
/// would near u64's end, which `--count`'s limit alone does not prevent (`--period 1000s --count 1e8`).
fn too_long(count: u64, period_ns: u64) -> bool {
    const CENTURY_NS: u64 = 100 * 365 * 24 * 3600 * 1_000_000_000;
    count.checked_mul(period_ns).is_none_or(|ns| ns > CENTURY_NS)
}

/// `count` periods in at most `rounds` rounds of at least two periods each, the first rounds taking the
/// remainder.
fn split_into_rounds(count: u64, rounds: u64) -> Vec<u64> {
    let rounds = rounds.clamp(1, (count / 2).max(1));
    (0..rounds).map(|r| count / rounds + u64::from(r < count % rounds)).collect()
}

#[cfg(test)]
mod tests {
    use super::{split_into_rounds, too_long, Window};

    #[test]
    fn a_run_whose_deadlines_overflow_is_too_long() {
        // 5 rounds of 2e7 periods of 1000 s: a round's last deadline would be 2e19 ns, past u64.
        assert!(too_long(100_000_000, 1_000_000_000_000));
        assert!(too_long(2, u64::MAX / 2 + 1));
        assert!(!too_long(100_000_000, 10_000_000), "the longest --count at 10 ms: 11.6 days");
        // The longest run allowed, started after decades of uptime: a bpf-timer's wait past its last
        // deadline still fits.
        let window = Window { start_ns: 1 << 60, period_ns: 1_500_000_000_000_000_000, count: 2 };
        assert!(!too_long(window.count, window.period_ns));
        assert!(window.end_ns().checked_add(window.period_ns + 20_000_000).is_some());
    }

    #[test]
    fn rounds_share_the_periods_and_hold_two_at_least() {
        assert_eq!(split_into_rounds(1000, 5), [200; 5]);
        assert_eq!(split_into_rounds(11, 3), [4, 4, 3]);
        assert_eq!(split_into_rounds(5, 5), [3, 2]);
        assert_eq!(split_into_rounds(2, 5), [2]);
    }
}
