//! `--plot FILE.svg`: the lateness and jitter distributions of every engine, side by side, as latency
//! percentile curves: x is the share of firings on a log scale of the tail (p90, p99, p99.9 equally
//! spaced), y the time in µs on a log scale. Readable without the table.

use super::report::Report;
use crate::bench::cli::Engine;
use plotters::prelude::*;
use std::path::Path;

/// Values below this (µs) are drawn at it: a log scale has no zero.
const FLOOR_US: f64 = 0.1;
const POINTS: usize = 400;

pub fn draw(report: &Report, path: &Path) -> Result<(), String> {
    let root = SVGBackend::new(path, (1400, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let title = format!(
        "steadytrace bench interval: period {} µs, {} periods per engine, load {}{}",
        report.period_ns as f64 / 1e3,
        report.count,
        report.load,
        report.flap.map_or(String::new(), |(f, _)| format!(
            ", cpu{} flapped every {} ms",
            f.cpu,
            f.every.as_millis()
        ))
    );
    let root = root.titled(&title, ("sans-serif", 20)).map_err(|e| e.to_string())?;
    let (left, right) = root.split_horizontally(700);
    let engines: Vec<(Engine, &[f64], &[f64])> = report
        .results
        .iter()
        .filter_map(|(engine, r)| r.as_ref().ok().map(|s| (*engine, &s.lateness_us[..], &s.jitter_us[..])))
        .collect();
    panel(&left, "lateness against the deadline (µs)", engines.iter().map(|e| (e.0, e.1)).collect())?;
    panel(&right, "period jitter (µs)", engines.iter().map(|e| (e.0, e.2)).collect())?;
    root.present().map_err(|e| e.to_string())
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    series: Vec<(Engine, &[f64])>,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let series: Vec<(Engine, &[f64])> = series.into_iter().filter(|(_, v)| !v.is_empty()).collect();
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
    if series.is_empty() {
        return Ok(());
    }
    for (engine, values) in &series {
        // The engine's own colour, whichever engines ran and whichever have no curve in this panel (perf has
        // no deadlines, so no lateness): the same engine is the same colour in every panel.
        let color = Palette99::pick(*engine as usize).to_rgba();
        chart
            .draw_series(LineSeries::new(curve(values), color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(engine.name())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 16))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
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
}
