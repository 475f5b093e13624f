//! The options of `steadytrace bench`: parsed apart from the tracer's flat command line, which they do
//! not change (`steadytrace bench ...` is recognised by its first argument).

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "steadytrace bench",
    bin_name = "steadytrace bench",
    about = "Benchmarks to run on your own machine"
)]
pub struct BenchCli {
    #[command(subcommand)]
    pub command: BenchCommand,
}

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Timer accuracy of every interval engine, one after another: lateness, jitter, drift, missed
    /// periods, cost of entering BPF (see docs/TIMER-BENCHMARK.md)
    Interval(IntervalArgs),
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  steadytrace bench interval\n  steadytrace bench interval --period 1ms --count 5000 --engines timer,sleep -f json\n  steadytrace bench interval --load 2 --flap 1:200 --plot timers.svg"
)]
pub struct IntervalArgs {
    /// The period every engine is asked for (ns, us, ms or s)
    #[arg(long, value_name = "TIME", default_value = "10ms", value_parser = parse_duration)]
    pub period: Duration,

    /// How long each engine runs [default: 10s]
    #[arg(long, value_name = "TIME", value_parser = parse_duration, conflicts_with = "count")]
    pub duration: Option<Duration>,

    /// How many periods each engine runs, instead of --duration
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(2..=100_000_000))]
    pub count: Option<u64>,

    /// Rounds each engine's periods are split into: the engines take turns, round after round, so that
    /// whatever else the machine does meanwhile falls on all of them alike
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub rounds: u64,

    /// The engines to run, in this order
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "timer,trigger,perf,bpf-timer,sleep,cyclictest,timerlat"
    )]
    pub engines: Vec<Engine>,

    /// Busy threads running during the measurement
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1024))]
    pub load: u32,

    /// Take CPU offline and back online every MS milliseconds (default 200) during the run; it is always
    /// put back online, also on Ctrl-C. Holds /tmp/steadytrace-hotplug.lock meanwhile
    #[arg(long, value_name = "CPU[:MS]", value_parser = parse_flap)]
    pub flap: Option<Flap>,

    /// How long --flap waits for another user of the hotplug lock before giving up
    #[arg(long, value_name = "TIME", default_value = "15m", value_parser = parse_duration)]
    pub lock_wait: Duration,

    /// SCHED_FIFO priority (1-99) of the threads that sleep until deadlines (timer, trigger, sleep,
    /// cyclictest), or 0 for SCHED_OTHER. The default is the tracer's own timer thread's
    /// (--timer-priority); without permission they run as ordinary threads, and the report says so
    #[arg(long, value_name = "PRIO", default_value_t = crate::runtime::timer::DEFAULT_PRIORITY,
          value_parser = clap::value_parser!(u8).range(0..=99))]
    pub rt: u8,

    /// Output format: one table, or one JSON object on the last line
    #[arg(short = 'f', long = "format", value_name = "FORMAT", default_value = "text")]
    pub format: ReportFormat,

    /// Also draw every engine's lateness and jitter distributions and its firings over time into this
    /// file: SVG, or PNG (.png) when rsvg-convert (librsvg2-bin) is installed
    #[arg(long, value_name = "FILE.svg|FILE.png")]
    pub plot: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Engine {
    /// The timer thread entering BPF through BPF_PROG_TEST_RUN (the default for interval probes)
    Timer,
    /// The timer thread calling the trigger function, which carries a uprobe (the fallback)
    Trigger,
    /// A CPU-clock perf event on one CPU, as bpftrace does (`--interval-engine perf`)
    Perf,
    /// An in-kernel hrtimer (bpf_timer) re-armed from its own callback
    BpfTimer,
    /// A thread on absolute clock_nanosleep, no BPF: the floor
    Sleep,
    /// Reference: cyclictest (Debian's rt-tests) at the same period and priority, when installed
    Cyclictest,
    /// Reference: rtla timerlat, the kernel's own timer-latency tracer, when installed and the kernel has it
    Timerlat,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Timer => "timer",
            Engine::Trigger => "trigger",
            Engine::Perf => "perf",
            Engine::BpfTimer => "bpf-timer",
            Engine::Sleep => "sleep",
            Engine::Cyclictest => "cyclictest",
            Engine::Timerlat => "timerlat",
        }
    }

    /// Measured by another program, beside the engines: a reference, not an engine of the tracer.
    pub fn is_reference(self) -> bool {
        matches!(self, Engine::Cyclictest | Engine::Timerlat)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Text,
    Json,
}

/// `--flap CPU[:MS]`
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flap {
    pub cpu: u32,
    pub every: Duration,
}

fn parse_flap(text: &str) -> Result<Flap, String> {
    let (cpu, ms) = text.split_once(':').unwrap_or((text, "200"));
    let cpu = cpu.parse().map_err(|_| format!("`{cpu}` is not a CPU number"))?;
    let ms: u64 = ms.parse().map_err(|_| format!("`{ms}` is not a number of milliseconds"))?;
    if ms == 0 {
        return Err("the flap interval must be at least 1 ms".into());
    }
    Ok(Flap { cpu, every: Duration::from_millis(ms) })
}

/// `10ms`, `500us`, `2s`, `1m`, `250ns`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| format!("`{text}` is not a time such as 10ms"))?;
    let nanos_per_unit: u64 = match unit {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        _ => return Err(format!("`{text}`: the unit must be ns, us, ms, s or m")),
    };
    let nanos = number.checked_mul(nanos_per_unit).ok_or_else(|| format!("`{text}` is too long"))?;
    if nanos == 0 {
        return Err("a time must be more than 0".into());
    }
    Ok(Duration::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_times_and_flaps() {
        assert_eq!(parse_duration("10ms"), Ok(Duration::from_millis(10)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("ms").is_err());
        assert_eq!(parse_flap("1:50"), Ok(Flap { cpu: 1, every: Duration::from_millis(50) }));
        assert_eq!(parse_flap("1"), Ok(Flap { cpu: 1, every: Duration::from_millis(200) }));
        assert!(parse_flap("x:1").is_err());
        assert!(parse_flap("1:0").is_err());
    }
}
