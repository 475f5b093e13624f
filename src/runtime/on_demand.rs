//! `--test` and `--bench`: the script's `test:` or `bench:` probes run one after another, each through
//! `BPF_PROG_TEST_RUN`, between BEGIN and END; nothing is attached. A test passes when its program returns
//! 0, it called no `exit()` with another code and printed no `errorf()`; its output is shown only when it
//! fails. A benchmark runs until it has taken a millisecond, and its time per run is reported.

use super::control::Control;
use super::copied_stacks::SharedCopies;
use super::events::drain;
use super::plan::Plan;
use super::reader::{Reader, Ring};
use super::sink::Sink;
use super::{load, system, Failure, Outcome, Settings};
use crate::codegen::Compiled;
use crate::probes::Schedule;
use bpf::Program;
use std::cell::RefCell;
use std::io::{self, Write};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// What the run does with the script's on-demand probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Trace: they are left alone.
    Trace,
    /// `--test`: every `test:` probe once.
    Test,
    /// `--bench`: every `bench:` probe, timed.
    Bench,
}

/// Output kept aside, to be shown only for a failed test (bpftrace's `--test` does the same).
#[derive(Clone, Default)]
struct Captured(Rc<RefCell<Vec<u8>>>);

impl Captured {
    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut self.0.borrow_mut())
    }
}

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub fn run(compiled: &Compiled, settings: &Settings, out: &mut dyn Write) -> Result<Outcome, Failure> {
    let schedule = match settings.mode {
        Mode::Test => Schedule::Test,
        Mode::Bench => Schedule::Bench,
        Mode::Trace => unreachable!("tracing is not run on demand"),
    };
    let plan = Plan::new(compiled);
    let loaded =
        load::load(compiled, &plan, super::ring::events_bytes(compiled, &plan, settings.ring_pages))?;
    let chosen: Vec<(&str, &Program)> = plan
        .programs(schedule)
        .filter_map(|i| Some((compiled.programs[i].point.name.as_str(), loaded.firings[i].on_request()?)))
        .collect();
    if chosen.is_empty() {
        let what = if schedule == Schedule::Test { "test" } else { "bench" };
        return Err(Failure::Other(format!(
            "the script has no {what} probes for --{what} to run (`{what}:NAME {{ ... }}`)"
        )));
    }
    let captured = Captured::default();
    let mut writer = captured.clone();
    let mut sink = Sink::new(&mut writer, settings.format, compiled, &loaded.maps, SharedCopies::default());
    sink.use_debug_dirs(settings.debug_dirs.clone());
    sink.logs_in_output = true;
    sink.warnings = settings.warnings;
    sink.max_cat_bytes = settings.max_cat_bytes;
    let sink = RefCell::new(sink);
    let control = Control::default();
    let reader = super::reader(&loaded, &sink, &control)?;
    let run = OnDemand { reader: &reader, sink: &sink, control: &control, captured: &captured };

    loaded.fire(compiled, &plan, Schedule::Begin)?;
    run.drain_into(out)?;
    let colours = Colours { on: settings.colour };
    let failed = match settings.mode {
        Mode::Test => run.tests(&chosen, colours, out)?,
        Mode::Bench => run.benchmarks(&chosen, out)?,
        Mode::Trace => false,
    };
    control.clear_exit();
    control.enter_end();
    loaded.fire(compiled, &plan, Schedule::End)?;
    run.drain_into(out)?;
    Ok(Outcome { exit_code: i32::from(failed) })
}

/// What running the probes one after another needs: where their records go.
struct OnDemand<'r, 's, R> {
    reader: &'r Reader<R>,
    sink: &'r RefCell<Sink<'s>>,
    control: &'r Control,
    captured: &'r Captured,
}

impl<R: Ring> OnDemand<'_, '_, R> {
    /// Reads what the probes run so far sent, and writes it out.
    fn drain_into(&self, out: &mut dyn Write) -> Result<(), Failure> {
        drain(self.reader, self.sink, self.control)?;
        write(out, &self.captured.take())
    }

    /// Runs each test once: whether any failed.
    fn tests(
        &self,
        chosen: &[(&str, &Program)],
        colours: Colours,
        out: &mut dyn Write,
    ) -> Result<bool, Failure> {
        let mut report = TestReport::new(chosen.iter().map(|(name, _)| *name).collect(), colours);
        let mut failed = false;
        for (name, program) in chosen {
            self.control.clear_exit();
            self.control.clear_errors();
            let started = Instant::now();
            let returned = program.run(8).map_err(|e| system(&format!("cannot run {name}"), e))?;
            let took = started.elapsed();
            drain(self.reader, self.sink, self.control)?;
            let passed =
                returned == 0 && self.control.exit_code().unwrap_or(0) == 0 && self.control.errors() == 0;
            failed |= !passed;
            write(out, &report.result(passed, took, &self.captured.take()))?;
        }
        write(out, &report.summary())?;
        Ok(failed)
    }

    /// Times each benchmark: whether any failed.
    fn benchmarks(&self, chosen: &[(&str, &Program)], out: &mut dyn Write) -> Result<bool, Failure> {
        let baseline = Baseline::measure()?;
        let mut report = BenchReport::new(chosen.iter().map(|(name, _)| *name).collect());
        let mut failed = false;
        for (name, program) in chosen {
            self.control.clear_exit();
            match self.time_runs(program, &baseline)? {
                Timing::Skipped => {}
                Timing::Failed => {
                    crate::stderr!("ERROR: Benchmark '{name}' failed.");
                    failed = true;
                }
                Timing::Took { per_run, runs } => write(out, &report.result(name, per_run, runs))?,
            }
            // Benchmarks print nothing.
            self.captured.take();
        }
        Ok(failed)
    }

    /// Runs a benchmark ten times more often (then twice as often) until the runs take a millisecond, as
    /// bpftrace's `--bench` does.
    fn time_runs(&self, program: &Program, baseline: &Baseline) -> Result<Timing, Failure> {
        let mut runs: u32 = 1;
        loop {
            self.control.clear_errors();
            let (took, returned) = runs_of(program, runs)?;
            drain(self.reader, self.sink, self.control)?;
            if self.control.exit_code().unwrap_or(0) != 0 || self.control.errors() != 0 {
                return Ok(Timing::Failed);
            }
            if returned != 0 {
                return Ok(Timing::Skipped);
            }
            let grow = match took {
                t if t < Duration::from_micros(100) => 10,
                t if t < Duration::from_millis(1) => 2,
                _ => {
                    let own = took.saturating_sub(baseline.per_run * runs);
                    return Ok(Timing::Took { per_run: own / runs, runs });
                }
            };
            runs = runs.saturating_mul(grow);
        }
    }
}

fn write(out: &mut dyn Write, bytes: &[u8]) -> Result<(), Failure> {
    out.write_all(bytes).and_then(|()| out.flush()).map_err(|e| system("cannot write the output", e))
}

/// bpftrace's gtest-like lines, in colour on a terminal.
#[derive(Clone, Copy)]
struct Colours {
    on: bool,
}

impl Colours {
    fn green(self, text: &str) -> String {
        self.paint("32", text)
    }

    fn red(self, text: &str) -> String {
        self.paint("31", text)
    }

    fn paint(self, code: &str, text: &str) -> String {
        match self.on {
            true => format!("\x1b[{code}m{text}\x1b[0m"),
            false => text.to_string(),
        }
    }
}

struct TestReport<'a> {
    names: Vec<&'a str>,
    passed: Vec<bool>,
    colours: Colours,
}

impl<'a> TestReport<'a> {
    fn new(names: Vec<&'a str>, colours: Colours) -> TestReport<'a> {
        TestReport { names, passed: vec![], colours }
    }

    /// The lines of the next test: its output is shown only when it failed.
    fn result(&mut self, passed: bool, took: Duration, output: &[u8]) -> Vec<u8> {
        let c = self.colours;
        let name = self.names[self.passed.len()];
        let mut text = String::new();
        if self.passed.is_empty() {
            text += &format!("{} Running {}.\n", c.green("[==========]"), tests(self.names.len()));
        }
        text += &format!("{} {name}\n", c.green("[ RUN      ]"));
        if !passed {
            for line in String::from_utf8_lossy(output).lines().filter(|l| !l.is_empty()) {
                text += line;
                text.push('\n');
            }
        }
        let verdict = if passed { c.green("[       OK ]") } else { c.red("[  FAILED  ]") };
        text += &format!("{verdict} {name} ({})\n", duration(took));
        self.passed.push(passed);
        text.into_bytes()
    }

    fn summary(&self) -> Vec<u8> {
        let c = self.colours;
        let passed = self.passed.iter().filter(|&&p| p).count();
        let failed = self.passed.len() - passed;
        let mut text = format!("{} {} ran.\n", c.green("[==========]"), tests(self.passed.len()));
        text += &format!("{} {}.\n", c.green("[  PASSED  ]"), tests(passed));
        if failed > 0 {
            text += &format!("{} {}, listed below:\n", c.red("[  FAILED  ]"), tests(failed));
            for (name, _) in self.names.iter().zip(&self.passed).filter(|(_, &p)| !p) {
                text += &format!("{} {name}\n", c.red("[  FAILED  ]"));
            }
        }
        text.into_bytes()
    }
}

fn tests(n: usize) -> String {
    format!("{n} {}", if n == 1 { "test" } else { "tests" })
}

/// A duration in the largest unit it has a whole one of, as bpftrace's `--test` writes it.
fn duration(took: Duration) -> String {
    let ns = took.as_nanos();
    match ns {
        1_000_000_000.. => format!("{} s", ns / 1_000_000_000),
        1_000_000.. => format!("{} ms", ns / 1_000_000),
        1_000.. => format!("{} μs", ns / 1_000),
        _ => format!("{ns} ns"),
    }
}

/// The cost of one run of a program that does nothing, taken off each benchmark's: what is left is the
/// benchmark's own code.
struct Baseline {
    program: Program,
    per_run: Duration,
}

impl Baseline {
    fn measure() -> Result<Baseline, Failure> {
        let mut asm = bpf::insn::Asm::new();
        asm.mov64_imm(bpf::insn::Reg::R0, 0);
        asm.exit();
        let code = asm.finish().map_err(|_| Failure::Other("cannot assemble the baseline program".into()))?;
        let program =
            bpf::load("bench_baseline", bpf::ProgType::RawTracepoint, bpf::AttachMode::PerfEvent, &code, &[])
                .map_err(|e| {
                    Failure::Other(format!("the kernel refused the baseline program: {}", e.reason))
                })?;
        let mut baseline = Baseline { program, per_run: Duration::ZERO };
        let runs = 10_000;
        baseline.per_run = baseline.run_many(runs)? / runs;
        Ok(baseline)
    }

    fn run_many(&self, runs: u32) -> Result<Duration, Failure> {
        runs_of(&self.program, runs).map(|(took, _)| took)
    }
}

/// Runs `program` `runs` times; the time taken and the last return value.
fn runs_of(program: &Program, runs: u32) -> Result<(Duration, u32), Failure> {
    let started = Instant::now();
    let mut returned = 0;
    for _ in 0..runs {
        returned = program.run(8).map_err(|e| system("cannot run a benchmark", e))?;
    }
    Ok((started.elapsed(), returned))
}

enum Timing {
    /// It returned non-zero: bpftrace's way for a benchmark to skip itself.
    Skipped,
    /// It called `exit()` with a code or printed an `errorf()`.
    Failed,
    Took {
        per_run: Duration,
        runs: u32,
    },
}

struct BenchReport<'a> {
    names: Vec<&'a str>,
    written: usize,
}

impl<'a> BenchReport<'a> {
    fn new(names: Vec<&'a str>) -> BenchReport<'a> {
        BenchReport { names, written: 0 }
    }

    /// A row of bpftrace's table: name, nanoseconds per run, runs; the header before the first.
    fn result(&mut self, name: &str, per_run: Duration, runs: u32) -> Vec<u8> {
        let width = self.names.iter().map(|n| n.len()).max().unwrap_or(0).max(40) + 1;
        let mut text = String::new();
        if self.written == 0 {
            text += &format!("{:<width$}{:<15}Iterations\n", "Benchmark", "Time(ns)");
            text += &format!("{}\n", "-".repeat(width + 15 + "Iterations".len()));
        }
        text += &format!("{name:<width$}{:<15}{runs}\n", per_run.as_nanos());
        self.written += 1;
        text.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_test_shows_its_output_and_is_listed_at_the_end() {
        let mut report = TestReport::new(vec!["test:a", "test:b"], Colours { on: false });
        let first = report.result(true, Duration::from_nanos(1500), b"hidden\n");
        let second = report.result(false, Duration::from_nanos(20), b"shown\n\n");
        assert_eq!(
            String::from_utf8(first).unwrap(),
            "[==========] Running 2 tests.\n[ RUN      ] test:a\n[       OK ] test:a (1 μs)\n"
        );
        assert_eq!(
            String::from_utf8(second).unwrap(),
            "[ RUN      ] test:b\nshown\n[  FAILED  ] test:b (20 ns)\n"
        );
        assert_eq!(
            String::from_utf8(report.summary()).unwrap(),
            "[==========] 2 tests ran.\n[  PASSED  ] 1 test.\n[  FAILED  ] 1 test, listed below:\n[  FAILED  ] test:b\n"
        );
    }

    #[test]
    fn benchmarks_are_a_table_with_a_header() {
        let mut report = BenchReport::new(vec!["bench:x"]);
        let row = String::from_utf8(report.result("bench:x", Duration::from_nanos(42), 1000)).unwrap();
        let lines: Vec<&str> = row.lines().collect();
        assert!(lines[0].starts_with("Benchmark ") && lines[0].ends_with("Time(ns)       Iterations"));
        assert_eq!(lines[1].len(), 41 + 15 + 10);
        assert_eq!(lines[2], format!("{:<41}{:<15}1000", "bench:x", "42"));
    }
}
