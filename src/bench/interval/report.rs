//! The report: one table with the engines as rows, or one JSON object on one line.

use super::stats::{Percentiles, Summary};
use crate::bench::cli::{Engine, Flap};
use std::fmt::Write;

pub struct Report {
    pub period_ns: u64,
    pub count: u64,
    pub load: u32,
    /// The flap asked for, and how many times the CPU went offline.
    pub flap: Option<(Flap, u64)>,
    pub rt: Option<u8>,
    pub results: Vec<(Engine, Result<Summary, String>)>,
}

impl Report {
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "period {} µs, {} periods per engine ({:.1} s); load {}; {}; {}",
            self.period_ns as f64 / 1e3,
            self.count,
            (self.count * self.period_ns) as f64 / 1e9,
            self.load,
            match self.flap {
                Some((flap, flaps)) => format!(
                    "cpu{} flapped every {} ms ({flaps} times offline)",
                    flap.cpu,
                    flap.every.as_millis()
                ),
                None => "no hotplug".into(),
            },
            match self.rt {
                Some(priority) => format!("SCHED_FIFO {priority}"),
                None => "SCHED_OTHER".into(),
            }
        );
        let _ = writeln!(
            out,
            "{:<10} {:>8} {:>8} {:>6} {:>5} {:>7} {:>9} {:>8} | {:^47} | {:^47}",
            "", "", "", "", "", "", "", "", "lateness µs", "jitter µs"
        );
        let _ = writeln!(
            out,
            "{:<10} {:>8} {:>8} {:>6} {:>5} {:>7} {:>9} {:>8} | {} | {}",
            "ENGINE", "EXPECTED", "FIRED", "MISSED", "LOST", "SKIPPED", "DRIFT_PPM", "ENTRY_NS", HEADS, HEADS
        );
        for (engine, result) in &self.results {
            match result {
                Ok(s) => {
                    let _ = writeln!(
                        out,
                        "{:<10} {:>8} {:>8} {:>6} {:>5} {:>7} {:>9} {:>8} | {} | {}",
                        engine.name(),
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
                    let _ = writeln!(out, "{:<10} error: {error}", engine.name());
                }
            }
        }
        let notes: Vec<String> = self
            .results
            .iter()
            .filter_map(|(engine, result)| {
                let s = result.as_ref().ok()?;
                let cpus: Vec<String> = s.cpus.iter().map(|c| c.to_string()).collect();
                let moved = s.moved.map_or(String::new(), |m| format!(", moved {m} times"));
                (!cpus.is_empty()).then(|| format!("{} on cpu {}{moved}", engine.name(), cpus.join(",")))
            })
            .collect();
        if !notes.is_empty() {
            let _ = writeln!(out, "CPUs: {}", notes.join("; "));
        }
        out
    }

    pub fn json(&self) -> String {
        let engines: Vec<String> =
            self.results.iter().map(|(engine, result)| engine_json(*engine, result)).collect();
        let flap = match self.flap {
            Some((flap, flaps)) => format!(
                "{{\"cpu\": {}, \"every_ms\": {}, \"flaps\": {flaps}}}",
                flap.cpu,
                flap.every.as_millis()
            ),
            None => "null".into(),
        };
        format!(
            "{{\"period_ns\": {}, \"duration_ns\": {}, \"load\": {}, \"flap\": {flap}, \"rt_priority\": {}, \"engines\": [{}]}}\n",
            self.period_ns,
            self.count * self.period_ns,
            self.load,
            self.rt.map_or("null".into(), |p| p.to_string()),
            engines.join(", ")
        )
    }
}

const HEADS: &str = "    min     p50     p90     p99   p99.9     max";

fn row(percentiles: Option<Percentiles>) -> String {
    match percentiles {
        Some(p) => p.values().iter().map(|(_, v)| format!("{v:>7.1}")).collect::<Vec<_>>().join(" "),
        None => format!("{:^47}", "-"),
    }
}

fn engine_json(engine: Engine, result: &Result<Summary, String>) -> String {
    let s = match result {
        Ok(s) => s,
        Err(error) => return format!("{{\"engine\": \"{}\", \"error\": {}}}", engine.name(), string(error)),
    };
    let cpus: Vec<String> = s.cpus.iter().map(|c| c.to_string()).collect();
    let mut json = format!(
        "{{\"engine\": \"{}\", \"expected\": {}, \"fired\": {}, \"missed\": {}, \"lost\": {}, \"skipped\": {}, \"drift_ppm\": {}, \"lateness_us\": {}, \"jitter_us\": {}, \"entry_cost_ns\": {}, \"cpus\": [{}]",
        engine.name(),
        s.expected,
        s.fired,
        s.missed,
        s.lost,
        s.skipped,
        number(s.drift_ppm),
        percentiles(s.lateness),
        percentiles(s.jitter),
        number(s.entry_cost_ns),
        cpus.join(", ")
    );
    if let Some(moved) = s.moved {
        let _ = write!(json, ", \"moved\": {moved}");
    }
    json.push('}');
    json
}

fn number(value: Option<f64>) -> String {
    match value {
        Some(v) if v.is_finite() => format!("{v:.3}"),
        _ => "null".into(),
    }
}

fn percentiles(p: Option<Percentiles>) -> String {
    match p {
        Some(p) => {
            let fields: Vec<String> =
                p.values().iter().map(|(name, v)| format!("\"{name}\": {v:.3}")).collect();
            format!("{{{}}}", fields.join(", "))
        }
        None => "null".into(),
    }
}

/// A JSON string.
fn string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_json_strings() {
        assert_eq!(string("a \"b\"\n"), "\"a \\\"b\\\"\\u000a\"");
        let json = engine_json(Engine::BpfTimer, &Err("no \"timer\"".into()));
        assert_eq!(json, "{\"engine\": \"bpf-timer\", \"error\": \"no \\\"timer\\\"\"}");
    }
}
