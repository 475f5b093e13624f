//! `steadytrace bench interval`: the report's structure and sanity on the real kernel (every engine
//! present, counts that add up, ordered percentiles, a flapped CPU put back). No timing thresholds:
//! those live in the documented benchmark run (docs/TIMER-BENCHMARK.md).

mod common;

use common::{can_trace, stderr, stdout, tracer, wait_output};
use serde_json::Value;
use std::process::Stdio;
use std::time::Duration;

const ENGINES: [&str; 5] = ["timer", "trigger", "perf", "bpf-timer", "sleep"];

fn bench(args: &[&str], limit: Duration) -> std::process::Output {
    let mut all = vec!["bench", "interval"];
    all.extend(args);
    let child = tracer(&all).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    wait_output(child, limit)
}

/// The JSON object on the last line of stdout.
fn report(output: &std::process::Output) -> Value {
    let text = stdout(output);
    let last = text.lines().last().unwrap_or_else(|| panic!("no output; stderr: {}", stderr(output)));
    serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {last}"))
}

fn number(value: &Value, field: &str) -> u64 {
    value[field].as_u64().unwrap_or_else(|| panic!("`{field}` is not a count in {value}"))
}

/// Counts add up and percentiles are ordered, for an engine that ran.
fn check_engine(engine: &Value) {
    let (expected, fired, missed) =
        (number(engine, "expected"), number(engine, "fired"), number(engine, "missed"));
    assert_eq!(fired + missed, expected, "{engine}");
    assert_eq!(number(engine, "lost") + number(engine, "skipped"), missed, "{engine}");
    for field in ["lateness_us", "jitter_us"] {
        let p = &engine[field];
        if p.is_null() {
            continue;
        }
        let values: Vec<f64> = ["min", "p50", "p90", "p99", "p999", "max"]
            .iter()
            .map(|name| p[name].as_f64().unwrap_or_else(|| panic!("{field}.{name} missing in {engine}")))
            .collect();
        assert!(values.windows(2).all(|w| w[0] <= w[1]), "{field} not ordered: {values:?}");
    }
    assert!(engine["jitter_us"]["min"].as_f64().is_none_or(|j| j >= 0.0), "{engine}");
    assert!(engine["drift_ppm"].is_number(), "{engine}");
}

#[test]
fn the_json_report_has_every_engine_and_its_counts_add_up() {
    if !can_trace("the_json_report_has_every_engine_and_its_counts_add_up") {
        return;
    }
    let output = bench(&["--period", "10ms", "--duration", "1s", "-f", "json"], Duration::from_secs(60));
    assert!(output.status.success(), "{}", stderr(&output));
    let report = report(&output);
    assert_eq!(number(&report, "period_ns"), 10_000_000);
    assert_eq!(number(&report, "duration_ns"), 1_000_000_000);
    let engines = report["engines"].as_array().expect("engines");
    let names: Vec<&str> = engines.iter().map(|e| e["engine"].as_str().expect("engine name")).collect();
    assert_eq!(names, ENGINES);
    for engine in engines {
        match engine["error"].as_str() {
            // The kernel may lack bpf_timer (5.15) or its absolute expiry (6.7): said, not hidden.
            Some(error) if engine["engine"] == "bpf-timer" => assert!(!error.is_empty()),
            Some(error) => panic!("{} failed: {error}", engine["engine"]),
            None => {
                check_engine(engine);
                assert_eq!(number(engine, "expected"), 100);
            }
        }
    }
    // The engines entered from userspace say what entering cost; the others have no such cost.
    assert!(engines[0]["entry_cost_ns"].as_f64().is_some_and(|c| c > 0.0));
    assert!(engines[4]["entry_cost_ns"].is_null());
    assert!(engines[2]["lateness_us"].is_null(), "perf has no deadline");
}

#[test]
fn the_text_report_has_a_row_per_engine_and_the_plot_names_them() {
    if !can_trace("the_text_report_has_a_row_per_engine_and_the_plot_names_them") {
        return;
    }
    let plot = std::env::temp_dir().join(format!("steadytrace-bench-{}.svg", std::process::id()));
    let output = bench(
        &["--period", "5ms", "--count", "40", "--engines", "sleep,timer", "--plot", plot.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let rows: Vec<&str> =
        text.lines().filter(|l| l.starts_with("sleep ") || l.starts_with("timer ")).collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(rows[0].starts_with("sleep") && rows[1].starts_with("timer"), "in the order asked: {text}");
    let svg = std::fs::read_to_string(&plot).expect("the plot was written");
    let _ = std::fs::remove_file(&plot);
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    assert!(
        svg.contains("\nsleep\n</text>") && svg.contains("\ntimer\n</text>"),
        "the legend names the engines"
    );
    assert!(stderr(&output).is_empty(), "no progress when stderr is not a terminal: {}", stderr(&output));
}

#[test]
fn bad_options_are_refused_with_a_reason() {
    for (args, reason) in [
        (&["--period", "0ms"][..], "more than 0"),
        (&["--period", "10"][..], "the unit must be"),
        (&["--engines", "sundial"][..], "invalid value 'sundial'"),
        (&["--flap", "one"][..], "not a CPU number"),
        (&["--duration", "1s", "--count", "5"][..], "cannot be used with"),
        (&["--period", "1s", "--duration", "1s"][..], "at least two periods"),
    ] {
        let output = bench(args, Duration::from_secs(10));
        assert!(!output.status.success(), "{args:?} was accepted");
        assert!(stderr(&output).contains(reason), "{args:?}: {}", stderr(&output));
        assert!(!stderr(&output).contains("internal error"), "{args:?}: {}", stderr(&output));
    }
}

#[test]
fn a_flapped_cpu_is_back_online_and_every_engine_reports() {
    let test = "a_flapped_cpu_is_back_online_and_every_engine_reports";
    if !can_trace(test) {
        return;
    }
    if !std::path::Path::new("/sys/devices/system/cpu/cpu1/online").exists() {
        println!("SKIPPED: {test}: cpu1 cannot be taken offline on this machine");
        return;
    }
    // The benchmark takes the hotplug lock itself; it waits a bounded time for other users of hotplug.
    let output = bench(
        &["--period", "10ms", "--duration", "1s", "--flap", "1:100", "--lock-wait", "120s", "-f", "json"],
        Duration::from_secs(240),
    );
    let online = std::fs::read_to_string("/sys/devices/system/cpu/cpu1/online").expect("cpu1/online");
    assert_eq!(online.trim(), "1", "cpu1 was put back online");
    if stderr(&output).contains("stayed busy") {
        println!("SKIPPED: {test}: another process held the CPU hotplug lock for 2 minutes");
        return;
    }
    assert!(output.status.success(), "{}", stderr(&output));
    let report = report(&output);
    assert_eq!(number(&report["flap"], "cpu"), 1);
    assert!(number(&report["flap"], "flaps") >= 1, "{report}");
    let engines = report["engines"].as_array().expect("engines");
    for engine in engines.iter().filter(|e| e["error"].is_null()) {
        check_engine(engine);
    }
    let perf = engines.iter().find(|e| e["engine"] == "perf").expect("perf row");
    assert!(perf["moved"].is_u64(), "the perf engine says how often it moved: {perf}");
}

/// The legend entries of a plot: (engine, stroke colour) for each, in the order drawn. A legend entry is a
/// 20-pixel line whose text sits 30 pixels right of it and 6 above its middle, as plotters draws them.
fn legend_colours(svg: &str) -> Vec<(String, String)> {
    let attribute = |element: &str, name: &str| -> Option<String> {
        let start = element.find(&format!(" {name}=\""))? + name.len() + 3;
        Some(element[start..].split('"').next()?.to_string())
    };
    let mut texts = vec![];
    let mut lines = vec![];
    for (i, element) in svg.split('<').enumerate() {
        if element.starts_with("text ") {
            let name =
                svg.split('<').nth(i).and_then(|e| e.split('>').nth(1)).unwrap_or("").trim().to_string();
            let (x, y) = (attribute(element, "x"), attribute(element, "y"));
            if let (Some(x), Some(y)) =
                (x.and_then(|x| x.parse::<i64>().ok()), y.and_then(|y| y.parse::<i64>().ok()))
            {
                texts.push((x, y, name));
            }
        } else if element.starts_with("polyline ") {
            let points: Vec<(i64, i64)> = attribute(element, "points")
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.split_once(',').and_then(|(x, y)| Some((x.parse().ok()?, y.parse().ok()?))))
                .collect();
            if let ([(x0, y0), (x1, y1)], Some(stroke)) = (points.as_slice(), attribute(element, "stroke")) {
                if y0 == y1 && x1 - x0 == 20 {
                    lines.push((*x0, *y0, stroke));
                }
            }
        }
    }
    lines
        .into_iter()
        .filter_map(|(x, y, stroke)| {
            texts
                .iter()
                .find(|(tx, ty, _)| *tx == x + 30 && *ty + 6 == y)
                .map(|(_, _, name)| (name.clone(), stroke))
        })
        .collect()
}

/// One colour per engine in every panel: perf has no lateness panel curve (it has no deadlines), so the
/// engines after it used to take other colours on the right than on the left.
#[test]
fn each_engine_has_one_colour_in_every_panel_of_the_plot() {
    if !can_trace("each_engine_has_one_colour_in_every_panel_of_the_plot") {
        return;
    }
    let plot = std::env::temp_dir().join(format!("steadytrace-bench-colours-{}.svg", std::process::id()));
    let output = bench(
        &[
            "--period",
            "2ms",
            "--count",
            "40",
            "--engines",
            "perf,sleep,timer",
            "--plot",
            plot.to_str().unwrap(),
        ],
        Duration::from_secs(30),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let svg = std::fs::read_to_string(&plot).expect("the plot was written");
    let _ = std::fs::remove_file(&plot);
    let legends = legend_colours(&svg);
    let names: Vec<&str> = legends.iter().map(|(name, _)| name.as_str()).collect();
    // Lateness (sleep, timer), then jitter (perf, sleep, timer).
    assert_eq!(names, ["sleep", "timer", "perf", "sleep", "timer"], "{legends:?}");
    for (name, colour) in &legends {
        let colours: Vec<&String> = legends.iter().filter(|(n, _)| n == name).map(|(_, c)| c).collect();
        assert!(colours.iter().all(|c| *c == colour), "{name} has colours {colours:?}");
        let others = legends.iter().filter(|(n, c)| n != name && c == colour).count();
        assert_eq!(others, 0, "{name} shares its colour {colour}: {legends:?}");
    }
}
