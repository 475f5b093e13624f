//! The report as text: what was run and on what machine, one table row per engine, then notes.

use super::hotplug::Flaps;
use super::machine::Machine;
use super::stats::{Percentiles, Summary};
use crate::bench::cli::Engine;
use std::fmt::Write;

pub struct Report {
    pub period_ns: u64,
    pub count: u64,
    /// `--load`: busy threads of this benchmark.
    pub load: u32,
    /// Rounds the engines took turns in.
    pub rounds: u64,
    pub flaps: Option<Flaps>,
    /// When the flapped CPU was offline or changing state (CLOCK_MONOTONIC ns).
    pub offline: Vec<(u64, u64)>,
    /// `--rt` as asked, and as granted (0 when SCHED_FIFO was not permitted).
    pub rt_asked: u8,
    pub rt: u8,
    pub machine: Machine,
    pub results: Vec<(Engine, Result<Summary, String>)>,
}

impl Report {
    /// The figures of the engines that ran.
    pub fn summaries(&self) -> impl Iterator<Item = (Engine, &Summary)> {
        self.results.iter().filter_map(|(engine, result)| Some((*engine, result.as_ref().ok()?)))
    }

    /// `period 10000 µs, 500 periods per engine (5.0 s); ...`: what was asked for.
    pub fn setting(&self) -> String {
        format!(
            "period {} µs, {} periods per engine ({:.1} s) in {} rounds; --load {}; {}; {}",
            self.period_ns as f64 / 1e3,
            self.count,
            (self.count * self.period_ns) as f64 / 1e9,
            self.rounds,
            self.load,
            match &self.flaps {
                Some(flaps) => format!(
                    "cpu{} flapped every {} ms ({} times offline)",
                    flaps.flap.cpu,
                    flaps.flap.every.as_millis(),
                    flaps.offline_count()
                ),
                None => "no hotplug".into(),
            },
            match (self.rt_asked, self.rt) {
                (0, _) => "--rt 0: threads at SCHED_OTHER".to_string(),
                (asked, 0) => format!("--rt {asked}: SCHED_FIFO not permitted, threads at SCHED_OTHER"),
                (_, granted) => format!("--rt {granted}: threads at SCHED_FIFO {granted}"),
            }
        )
    }

    /// `machine: Linux 6.18, 2 CPUs online (0,1); load average ...`: what the machine was doing.
    pub fn machine_line(&self) -> String {
        let m = &self.machine;
        let cpus: Vec<String> = m.online.iter().map(u32::to_string).collect();
        let mut line = format!(
            "machine: Linux {}, {} CPUs online ({}); load average {:.2} before, {:.2} after; runnable tasks {} before, {} after",
            m.kernel,
            m.online.len(),
            cpus.join(","),
            m.before.load_average[0],
            m.after.load_average[0],
            m.before.runnable,
            m.after.runnable
        );
        if let Some(share) = m.others_share() {
            let _ = write!(line, "; other programs used {:.0}% of the CPUs", share * 100.0);
        }
        match m.steal_share() {
            Some(steal) => {
                let _ = write!(line, "; steal {:.1}%", steal * 100.0);
            }
            None => line.push_str("; no steal reported"),
        }
        line
    }

    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.setting());
        let _ = writeln!(out, "{}", self.machine_line());
        if let Some(reason) = self.machine.busy_reason() {
            let _ = writeln!(
                out,
                "warning: the machine was busy during the run ({reason}): threads below real-time priority wait for it"
            );
        }
        let _ = writeln!(
            out,
            "{:<10} {:<7} {:>8} {:>8} {:>6} {:>5} {:>7} {:>9} {:>8} | {:^47} | {:^47}",
            "", "", "", "", "", "", "", "", "", "lateness µs", "jitter µs"
        );
        let _ = writeln!(
            out,
            "{:<10} {:<7} {:>8} {:>8} {:>6} {:>5} {:>7} {:>9} {:>8} | {} | {}",
            "ENGINE",
            "POLICY",
            "EXPECTED",
            "FIRED",
            "MISSED",
            "LOST",
            "SKIPPED",
            "DRIFT_PPM",
            "ENTRY_NS",
            HEADS,
            HEADS
        );
        for (engine, result) in &self.results {
            match result {
                Ok(s) => {
                    let _ = writeln!(
                        out,
                        "{:<10} {:<7} {:>8} {:>8} {:>6} {:>5} {:>7} {:>9} {:>8} | {} | {}",
                        engine.name(),
                        s.scheduling.as_ref().map_or("?".into(), |p| p.short()),
                        s.expected,
                        s.fired,
                        s.missed,
                        s.lost,
                        s.skipped,
                        s.drift_ppm.map_or("-".into(), |d| format!("{d:.1}")),
                        s.entry_cost_ns.map_or("-".into(), |c| format!("{c:.0}")),
                        row(s.lateness),
                        row(s.jitter)
                    );
                }
                Err(error) => {
                    let _ = writeln!(out, "{:<10} {:<7} {error}", engine.name(), "-");
                }
            }
        }
        for note in self.notes() {
            let _ = writeln!(out, "{note}");
        }
        out
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = vec![];
        let cpus: Vec<String> = self
            .summaries()
            .filter(|(_, s)| !s.cpus.is_empty())
            .map(|(engine, s)| {
                let list: Vec<String> = s.cpus.iter().map(u32::to_string).collect();
                let moved = s.moved.map_or(String::new(), |m| format!(", moved {m} times"));
                format!("{} on cpu {}{moved}", engine.name(), list.join(","))
            })
            .collect();
        if !cpus.is_empty() {
            notes.push(format!("CPUs: {}", cpus.join("; ")));
        }
        let kernel: Vec<String> = self
            .summaries()
            .filter_map(|(engine, s)| match &s.scheduling {
                Some(p @ super::scheduling::Scheduling::Kernel(_)) => {
                    Some(format!("{} runs in the {}", engine.name(), p.long().trim_start_matches("kernel: ")))
                }
                _ => None,
            })
            .collect();
        if !kernel.is_empty() {
            notes.push(format!("kernel engines: {}", kernel.join("; ")));
        }
        if let Some(flaps) = &self.flaps {
            let threshold_us = super::stats::late_threshold_ns(self.period_ns) as f64 / 1e3;
            let marks: Vec<String> = self
                .summaries()
                .filter(|(_, s)| s.late + s.missed > 0)
                .map(|(engine, s)| {
                    format!(
                        "{} {} of {} late and {} of {} missed",
                        engine.name(),
                        s.late_in_hotplug,
                        s.late,
                        s.missed_in_hotplug,
                        s.missed
                    )
                })
                .collect();
            if !marks.is_empty() {
                notes.push(format!(
                    "hotplug: periods late (> {threshold_us} µs) or missed while cpu{} was going offline or coming back: {}. Taking a CPU offline runs the kernel's stop_machine, which holds every CPU: those stalls are the kernel's, not the engine's",
                    flaps.flap.cpu,
                    marks.join("; ")
                ));
            }
        }
        notes
    }
}

const HEADS: &str = "    min     p50     p90     p99   p99.9     max";

fn row(percentiles: Option<Percentiles>) -> String {
    match percentiles {
        Some(p) => p.values().iter().map(|(_, v)| format!("{v:>7.1}")).collect::<Vec<_>>().join(" "),
        None => format!("{:^47}", "-"),
    }
}
