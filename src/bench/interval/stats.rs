//! From firings to the figures of the report: counts, lateness, jitter, drift.

use super::Measured;

/// min / p50 / p90 / p99 / p99.9 / max, in µs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Percentiles {
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Percentiles {
    /// Of `sorted` values (ascending), by nearest rank; `None` when there are none.
    fn of(sorted: &[f64]) -> Option<Percentiles> {
        let at = |p: f64| sorted[((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
        Some(Percentiles {
            min: *sorted.first()?,
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
            p999: at(0.999),
            max: *sorted.last()?,
        })
    }

    pub fn values(&self) -> [(&'static str, f64); 6] {
        [
            ("min", self.min),
            ("p50", self.p50),
            ("p90", self.p90),
            ("p99", self.p99),
            ("p999", self.p999),
            ("max", self.max),
        ]
    }
}

/// One engine's figures.
#[derive(Debug)]
pub struct Summary {
    pub expected: u64,
    pub fired: u64,
    /// `expected - fired`, which is `lost + skipped`.
    pub missed: u64,
    /// Missed periods nobody reported.
    pub lost: u64,
    /// Missed periods the engine reported as skipped.
    pub skipped: u64,
    pub drift_ppm: Option<f64>,
    pub lateness: Option<Percentiles>,
    pub jitter: Option<Percentiles>,
    pub entry_cost_ns: Option<f64>,
    pub cpus: Vec<u32>,
    pub moved: Option<u64>,
    /// Lateness and jitter in µs, sorted: the distributions the plot draws.
    pub lateness_us: Vec<f64>,
    pub jitter_us: Vec<f64>,
}

pub fn summarize(measured: &Measured, expected: u64, period_ns: u64) -> Summary {
    let mut firings = measured.firings.clone();
    firings.sort_by_key(|f| f.index);
    firings.dedup_by_key(|f| f.index);
    let fired = firings.len() as u64;
    let missed = expected.saturating_sub(fired);
    let skipped = measured.skipped.min(missed);
    let mut lateness_us: Vec<f64> =
        firings.iter().filter_map(|f| Some((f.at_ns as f64 - f.deadline_ns? as f64) / 1e3)).collect();
    // Jitter: how far each period between consecutive firings is from the period asked for.
    let mut jitter_us: Vec<f64> = firings
        .windows(2)
        .filter(|pair| pair[1].index == pair[0].index + 1)
        .map(|pair| (pair[1].at_ns as f64 - pair[0].at_ns as f64 - period_ns as f64).abs() / 1e3)
        .collect();
    lateness_us.sort_by(f64::total_cmp);
    jitter_us.sort_by(f64::total_cmp);
    let drift_ppm = drift_ppm(&firings, period_ns);
    Summary {
        expected,
        fired,
        missed,
        lost: missed - skipped,
        skipped,
        drift_ppm,
        lateness: Percentiles::of(&lateness_us),
        jitter: Percentiles::of(&jitter_us),
        entry_cost_ns: measured.entry_cost_ns,
        cpus: measured.cpus.clone(),
        moved: measured.moved,
        lateness_us,
        jitter_us,
    }
}

/// Drift: the mean period, as the slope of a least-squares line through (period number, time), against
/// the period asked for. A line rather than the first and last firing alone: one late end would
/// otherwise count as drift.
fn drift_ppm(firings: &[super::Firing], period_ns: u64) -> Option<f64> {
    let first = firings.first()?;
    let points: Vec<(f64, f64)> =
        firings.iter().map(|f| ((f.index - first.index) as f64, (f.at_ns - first.at_ns) as f64)).collect();
    let n = points.len() as f64;
    let (mean_k, mean_t) =
        (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let spread: f64 = points.iter().map(|p| (p.0 - mean_k).powi(2)).sum();
    if spread == 0.0 {
        return None;
    }
    let slope = points.iter().map(|p| (p.0 - mean_k) * (p.1 - mean_t)).sum::<f64>() / spread;
    Some((slope - period_ns as f64) / period_ns as f64 * 1e6)
}

#[cfg(test)]
mod tests {
    use super::super::Firing;
    use super::*;

    fn on(index: u64, late_ns: u64) -> Firing {
        let deadline = 1_000_000 + index * 1000;
        Firing { index, at_ns: deadline + late_ns, deadline_ns: Some(deadline) }
    }

    #[test]
    fn counts_add_up_and_skipped_periods_are_not_lost() {
        let firings = vec![on(1, 10), on(2, 20), on(5, 0), on(6, 0)];
        let measured = Measured { firings, skipped: 2, ..Measured::default() };
        let summary = summarize(&measured, 8, 1000);
        assert_eq!((summary.fired, summary.missed, summary.skipped, summary.lost), (4, 4, 2, 2));
    }

    #[test]
    fn jitter_is_taken_between_consecutive_periods_only() {
        let firings = vec![on(1, 0), on(2, 3000), on(4, 0), on(5, 1000)];
        let summary = summarize(&Measured { firings, ..Measured::default() }, 5, 1000);
        // 1→2: 3 µs late; 4→5: 1 µs; 2→4 is not a period.
        assert_eq!(summary.jitter_us, [1.0, 3.0]);
        assert_eq!(summary.lateness.unwrap().max, 3.0);
    }

    #[test]
    fn percentiles_are_nearest_ranks() {
        let values: Vec<f64> = (1..=1000).map(f64::from).collect();
        let p = Percentiles::of(&values).unwrap();
        assert_eq!((p.min, p.p50, p.p90, p.p99, p.p999, p.max), (1.0, 500.0, 900.0, 990.0, 999.0, 1000.0));
        assert_eq!(Percentiles::of(&[]), None);
    }

    #[test]
    fn drift_is_the_mean_period_error() {
        // 10 periods of 1000 ns took 10,010 ns: +1000 ppm.
        let firings = vec![on(0, 0), Firing { index: 10, at_ns: 1_000_000 + 10_010, deadline_ns: None }];
        let drift = summarize(&Measured { firings, ..Measured::default() }, 11, 1000).drift_ppm.unwrap();
        assert!((drift - 1000.0).abs() < 1e-6, "{drift}");
    }
}
