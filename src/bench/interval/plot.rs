//! `--plot FILE.svg|FILE.png`: one picture of the run. At the top, what was asked and what the machine was
//! doing; then the lateness and jitter distributions of every engine as latency percentile curves (x: the
//! tail on a log scale, p90, p99, p99.9 equally spaced; y: µs on a log scale); below, every engine's
//! firings over the run's time as a share of the periods due, with the spans a CPU was offline shaded and
//! the runnable tasks drawn over them; one legend for all panels, one colour per engine.

use super::report::Report;
use super::stats::Summary;
use crate::bench::cli::Engine;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// Values below this (µs) are drawn at it: a log scale has no zero.
const FLOOR_US: f64 = 0.1;
const POINTS: usize = 400;
const WIDTH: u32 = 1400;
const LEGEND_ROW: u32 = 24;

pub fn draw(report: &Report, path: &Path) -> Result<(), String> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("png") => draw_png(report, path),
        _ => draw_svg(report, path),
    }
}

/// PNG through rsvg-convert: the SVG drawn beside the file, converted, removed.
fn draw_png(report: &Report, path: &Path) -> Result<(), String> {
    let renderer = crate::executable::find_in_path("rsvg-convert").ok_or(
        "no SVG renderer to make a PNG: install rsvg-convert (Debian: apt-get install librsvg2-bin), or ask for FILE.svg",
    )?;
    let svg = path.with_extension("png.svg");
    draw_svg(report, &svg)?;
    let converted = std::process::Command::new(renderer)
        .arg("--background-color=white")
        .arg("-o")
        .arg(path)
        .arg(&svg)
        .output()
        .map_err(|e| format!("cannot run rsvg-convert: {e}"));
    let _ = std::fs::remove_file(&svg);
    let converted = converted?;
    if !converted.status.success() {
        return Err(format!("rsvg-convert failed: {}", String::from_utf8_lossy(&converted.stderr).trim()));
    }
    Ok(())
}

fn draw_svg(report: &Report, path: &Path) -> Result<(), String> {
    let engines: Vec<(Engine, &Summary)> = report.summaries().collect();
    let legend_height = LEGEND_ROW * engines.len().max(1) as u32 + 20;
    let height = 70 + 470 + 400 + legend_height;
    let root = SVGBackend::new(path, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (head, rest) = root.split_vertically(70);
    heading(&head, report)?;
    let (distributions, rest) = rest.split_vertically(470);
    let (timeline_area, legend_area) = rest.split_vertically(400);
    let (left, right) = distributions.split_horizontally(WIDTH / 2);
    distribution(&left, "lateness against the deadline (µs)", &engines, |s| &s.lateness_us)?;
    distribution(&right, "period jitter (µs)", &engines, |s| &s.jitter_us)?;
    timeline(&timeline_area, report, &engines)?;
    legend(&legend_area, &engines)?;
    root.present().map_err(|e| e.to_string())
}

/// The engine's own colour, whichever engines ran and whichever have no curve in a panel (perf has no
/// deadlines, so no lateness): the same engine is the same colour everywhere.
fn colour(engine: Engine) -> RGBAColor {
    Palette99::pick(engine as usize).to_rgba()
}

fn heading<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, report: &Report) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let lines = [
        (format!("steadytrace bench interval: {}", report.setting()), 18),
        (report.machine_line(), 15),
        (report.machine.busy_reason().map_or(String::new(), |r| format!("busy machine: {r}")), 15),
    ];
    for (i, (text, size)) in lines.iter().enumerate() {
        let style = ("sans-serif", *size).into_font().color(if i == 2 { &RED } else { &BLACK });
        area.draw(&Text::new(text.clone(), (12, 6 + 21 * i as i32), style)).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn distribution<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    caption: &str,
    engines: &[(Engine, &Summary)],
    values: impl Fn(&Summary) -> &[f64],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let series: Vec<(Engine, &[f64])> =
        engines.iter().map(|(e, s)| (*e, values(s))).filter(|(_, v)| !v.is_empty()).collect();
    let x_max = series.iter().map(|(_, v)| (v.len() as f64).log10()).fold(1.0, f64::max);
    let y_max = series.iter().filter_map(|(_, v)| v.last().copied()).fold(10.0, f64::max) * 1.5;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..x_max, (FLOOR_US..y_max).log_scale())
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 15))
        .x_desc("share of firings at or below")
        .y_desc("µs")
        .x_labels(x_max.ceil() as usize + 1)
        .x_label_formatter(&|x| percentile_name(*x))
        .draw()
        .map_err(|e| e.to_string())?;
    for (engine, values) in &series {
        chart
            .draw_series(LineSeries::new(curve(values), colour(*engine).stroke_width(2)))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Firings per bucket against the periods due in it, over the run's time; CPU-offline spans shaded grey,
/// runnable tasks (right axis) in black.
fn timeline<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    report: &Report,
    engines: &[(Engine, &Summary)],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let timed: Vec<&(Engine, &Summary)> =
        engines.iter().filter(|(_, s)| !s.firing_times_ns.is_empty()).collect();
    let windows = || timed.iter().flat_map(|(_, s)| s.windows.iter());
    let origin = windows().map(|w| w.start_ns).min().unwrap_or(0);
    let end = windows().map(|w| w.end_ns()).max().unwrap_or(origin + 1);
    let seconds = |ns: u64| ns.saturating_sub(origin) as f64 / 1e9;
    let x_max = seconds(end).max(0.001);
    let runnable: Vec<(f64, f64)> = report
        .machine
        .runnable
        .iter()
        .filter(|(at, _)| (origin..=end).contains(at))
        .map(|&(at, n)| (seconds(at), f64::from(n)))
        .collect();
    let runnable_max = runnable.iter().map(|p| p.1).fold(report.machine.online.len() as f64, f64::max) + 1.0;
    let mut chart = ChartBuilder::on(area)
        .caption(
            "firings over the run, as a share of the periods due (grey: CPU offline; black, right axis: runnable tasks)",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .right_y_label_area_size(60)
        .build_cartesian_2d(0f64..x_max, 0f64..120f64)
        .map_err(|e| e.to_string())?
        .set_secondary_coord(0f64..x_max, 0f64..runnable_max);
    chart
        .configure_mesh()
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 15))
        .x_desc("seconds since the first engine started")
        .y_desc("% of periods fired")
        .draw()
        .map_err(|e| e.to_string())?;
    chart
        .configure_secondary_axes()
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 15))
        .y_desc("runnable tasks")
        .draw()
        .map_err(|e| e.to_string())?;
    let grey = RGBColor(150, 150, 150).mix(0.35).filled();
    chart
        .draw_series(report.offline.iter().filter(|(start, stop)| *stop >= origin && *start <= end).map(
            |&(start, stop)| Rectangle::new([(seconds(start), 0.0), (seconds(stop.min(end)), 120.0)], grey),
        ))
        .map_err(|e| e.to_string())?;
    for (engine, summary) in &timed {
        // A line per round: nothing is drawn across the other engines' turns.
        for window in &summary.windows {
            chart
                .draw_series(LineSeries::new(
                    rate(window, &summary.firing_times_ns)
                        .into_iter()
                        .map(|(at, share)| (seconds(at), share * 100.0)),
                    colour(*engine).stroke_width(2),
                ))
                .map_err(|e| e.to_string())?;
        }
    }
    chart
        .draw_secondary_series(LineSeries::new(runnable, BLACK.stroke_width(1)))
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// The share of a window's periods that fired, bucket by bucket: (middle of the bucket, share). A bucket
/// holds whole periods, at least 5, and a window has at most about 100 buckets. `firing_times_ns` may hold
/// other windows' firings too: only those after this window's start and before its next round count.
fn rate(window: &super::Window, firing_times_ns: &[u64]) -> Vec<(u64, f64)> {
    let periods = (window.count / 100).max(5).min(window.count.max(1));
    let span = periods * window.period_ns;
    let buckets = window.count.div_ceil(periods);
    let mut fired = vec![0u64; buckets as usize];
    let after_end = window.end_ns() + window.period_ns;
    for &at in firing_times_ns.iter().filter(|&&at| at > window.start_ns && at < after_end) {
        // A firing belongs to the bucket of the deadline it came after: period k's deadline is k periods
        // after the start, so a firing less than a period late is in period k, counted from 0 as k - 1.
        let k = (at.saturating_sub(window.start_ns) / window.period_ns).saturating_sub(1);
        if let Some(count) = fired.get_mut((k / periods) as usize) {
            *count += 1;
        }
    }
    fired
        .iter()
        .enumerate()
        .map(|(b, &count)| {
            let due = periods.min(window.count - b as u64 * periods);
            let middle = window.start_ns + b as u64 * span + due * window.period_ns / 2;
            (middle, count as f64 / due as f64)
        })
        .collect()
}

/// One legend for every panel: an entry per engine, in its colour, with what it ran at and its figures.
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    engines: &[(Engine, &Summary)],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    for (i, (engine, s)) in engines.iter().enumerate() {
        let (x, y) = (80, 12 + (i as i32) * LEGEND_ROW as i32);
        let line = colour(*engine).stroke_width(3);
        area.draw(&PathElement::new(vec![(x, y), (x + 20, y)], line)).map_err(|e| e.to_string())?;
        area.draw(&Text::new(engine.name(), (x + 30, y - 6), ("sans-serif", 16)))
            .map_err(|e| e.to_string())?;
        let policy = s.scheduling.as_ref().map_or("?".into(), |p| p.long());
        let lateness = s.lateness.map_or("no deadlines".into(), |p| {
            format!("lateness p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs", p.p50, p.p99, p.max)
        });
        let figures =
            format!("{policy}; fired {} of {}, missed {}; {lateness}", s.fired, s.expected, s.missed);
        area.draw(&Text::new(figures, (x + 140, y - 6), ("sans-serif", 16))).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Points of the percentile curve of `sorted` values: x = -log10(1 - share), at most `POINTS` of them
/// plus the maximum.
fn curve(sorted: &[f64]) -> Vec<(f64, f64)> {
    let n = sorted.len();
    let x_last = (n as f64).log10();
    let mut points: Vec<(f64, f64)> = (0..POINTS)
        .map(|step| {
            let x = x_last * step as f64 / POINTS as f64;
            let index = (((1.0 - 10f64.powf(-x)) * n as f64) as usize).min(n - 1);
            (x, sorted[index].max(FLOOR_US))
        })
        .collect();
    points.push((x_last, sorted[n - 1].max(FLOOR_US)));
    points
}

/// `p90` for 1, `p99` for 2, `p99.9` for 3 on the x axis.
fn percentile_name(x: f64) -> String {
    if x < 0.5 {
        return "p0".into();
    }
    let nines = x.round() as i32;
    let percent = 100.0 - 100.0 / 10f64.powi(nines);
    format!("p{percent:.*}", (nines - 2).max(0) as usize)
}

#[cfg(test)]
mod tests {
    use super::super::stats::{summarize, Round};
    use super::super::{Firing, Measured, Window};
    use super::*;

    #[test]
    fn the_tail_axis_is_labelled_in_nines() {
        assert_eq!(percentile_name(0.0), "p0");
        assert_eq!(percentile_name(1.0), "p90");
        assert_eq!(percentile_name(2.0), "p99");
        assert_eq!(percentile_name(3.0), "p99.9");
    }

    #[test]
    fn a_curve_ends_at_the_maximum() {
        let values: Vec<f64> = (1..=1000).map(f64::from).collect();
        let points = curve(&values);
        assert_eq!(points.first(), Some(&(0.0, 1.0)));
        assert_eq!(points.last(), Some(&(3.0, 1000.0)));
        assert!(points.windows(2).all(|p| p[0].1 <= p[1].1), "the curve only rises");
    }

    #[test]
    fn the_rate_dips_where_periods_were_missed() {
        let window = Window { start_ns: 1000, period_ns: 100, count: 20 };
        // Periods 1-20, with 6-10 missing: the second bucket of five fired none.
        let firings = (1..=20)
            .filter(|k| !(6..=10).contains(k))
            .map(|k| Firing {
                index: k,
                at_ns: window.deadline(k) + 7,
                deadline_ns: Some(window.deadline(k)),
            })
            .collect();
        let rounds = [Round { window, measured: Measured { firings, ..Measured::default() } }];
        let summary = summarize(&rounds, &[]);
        let shares: Vec<f64> = rate(&window, &summary.firing_times_ns).iter().map(|r| r.1).collect();
        assert_eq!(shares, [1.0, 0.0, 1.0, 1.0]);
    }
}
