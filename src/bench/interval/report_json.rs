//! The report as one JSON object on one line: the setting, the machine, and every engine with its
//! scheduling policy.

use super::machine::{Machine, Snapshot};
use super::report::Report;
use super::stats::{Percentiles, Summary};
use crate::bench::cli::Engine;
use std::fmt::Write;

pub fn json(report: &Report) -> String {
    let engines: Vec<String> =
        report.results.iter().map(|(engine, result)| engine_json(*engine, result)).collect();
    let flap = match &report.flaps {
        Some(flaps) => format!(
            "{{\"cpu\": {}, \"every_ms\": {}, \"flaps\": {}}}",
            flaps.flap.cpu,
            flaps.flap.every.as_millis(),
            flaps.offline_count()
        ),
        None => "null".into(),
    };
    format!(
        "{{\"period_ns\": {}, \"duration_ns\": {}, \"rounds\": {}, \"load\": {}, \"flap\": {flap}, \"rt_priority\": {}, \"rt_priority_asked\": {}, \"machine\": {}, \"engines\": [{}]}}\n",
        report.period_ns,
        report.count * report.period_ns,
        report.rounds,
        report.load,
        report.rt,
        report.rt_asked,
        machine_json(&report.machine),
        engines.join(", ")
    )
}

fn machine_json(m: &Machine) -> String {
    let cpus: Vec<String> = m.online.iter().map(u32::to_string).collect();
    format!(
        "{{\"kernel\": {}, \"online_cpus\": [{}], \"before\": {}, \"after\": {}, \"others_cpu_share\": {}, \"steal_share\": {}, \"busy\": {}}}",
        string(&m.kernel),
        cpus.join(", "),
        snapshot_json(&m.before),
        snapshot_json(&m.after),
        number(m.others_share()),
        number(m.steal_share()),
        m.busy_reason().map_or("null".into(), |reason| string(&reason))
    )
}

fn snapshot_json(s: &Snapshot) -> String {
    format!(
        "{{\"load_average\": [{:.2}, {:.2}, {:.2}], \"runnable\": {}}}",
        s.load_average[0], s.load_average[1], s.load_average[2], s.runnable
    )
}

fn engine_json(engine: Engine, result: &Result<Summary, String>) -> String {
    let s = match result {
        Ok(s) => s,
        Err(error) => return format!("{{\"engine\": \"{}\", \"error\": {}}}", engine.name(), string(error)),
    };
    let cpus: Vec<String> = s.cpus.iter().map(|c| c.to_string()).collect();
    let mut json = format!(
        "{{\"engine\": \"{}\", \"reference\": {}, \"scheduling\": {}, \"expected\": {}, \"fired\": {}, \"missed\": {}, \"lost\": {}, \"skipped\": {}, \"drift_ppm\": {}, \"lateness_us\": {}, \"jitter_us\": {}, \"entry_cost_ns\": {}, \"to_program_ns\": {}, \"thread_cpu_share\": {}, \"cpus\": [{}], \"late\": {}",
        engine.name(),
        engine.is_reference(),
        s.scheduling.as_ref().map_or("null".into(), |p| p.json()),
        s.expected,
        s.fired,
        s.missed,
        s.lost,
        s.skipped,
        number(s.drift_ppm),
        percentiles(s.lateness),
        percentiles(s.jitter),
        number(s.entry_cost_ns),
        number(s.to_program_ns),
        number(s.thread_cpu_share),
        cpus.join(", "),
        s.late
    );
    if let Some(moved) = s.moved {
        let _ = write!(json, ", \"moved\": {moved}");
    }
    let _ = write!(
        json,
        ", \"during_hotplug\": {{\"late\": {}, \"missed\": {}}}}}",
        s.late_in_hotplug, s.missed_in_hotplug
    );
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
    let mut out = vec![b'"'];
    crate::output::json::escape(&mut out, text.as_bytes());
    out.push(b'"');
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_json_strings() {
        assert_eq!(string("a \"b\"\n"), "\"a \\\"b\\\"\\n\"");
        let json = engine_json(Engine::BpfTimer, &Err("no \"timer\"".into()));
        assert_eq!(json, "{\"engine\": \"bpf-timer\", \"error\": \"no \\\"timer\\\"\"}");
    }
}
