//! From firings to the figures of the report: counts, lateness, jitter, drift, and which late or missed
//! periods came while a CPU was going offline or coming back.

use super::scheduling::Scheduling;
use super::{Measured, Window};

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
    /// The median of the rounds' medians from the call entering BPF to the program's clock read.
    pub to_program_ns: Option<f64>,
    /// The median of the rounds' CPU shares of the firing thread.
    pub thread_cpu_share: Option<f64>,
    pub cpus: Vec<u32>,
    pub moved: Option<u64>,
    pub scheduling: Option<Scheduling>,
    /// Lateness and jitter in µs, sorted: the distributions the plot draws.
    pub lateness_us: Vec<f64>,
    pub jitter_us: Vec<f64>,
    /// The engine's windows (one per round) and its firing times (CLOCK_MONOTONIC ns): the timeline the
    /// plot draws; no times for a reference that gives lateness only.
    pub windows: Vec<Window>,
    pub firing_times_ns: Vec<u64>,
    /// Firings later than [`late_threshold_ns`], and how many of them, and of the missed periods, came
    /// while a CPU was going offline or coming back (only counted under `--flap`).
    pub late: u64,
    pub late_in_hotplug: u64,
    pub missed_in_hotplug: u64,
}

/// A firing later than this counts as late in the report: a tenth of the period, at most 1 ms.
pub fn late_threshold_ns(period_ns: u64) -> u64 {
    (period_ns / 10).min(1_000_000)
}

/// One round of an engine: its window of deadlines and what it delivered in it.
pub struct Round {
    pub window: Window,
    pub measured: Measured,
}

/// The figures of one engine over its rounds. `hotplug` holds the spans during which a CPU was offline or
/// changing state.
pub fn summarize(rounds: &[Round], hotplug: &[(u64, u64)]) -> Summary {
    let period_ns = rounds.first().map_or(1, |r| r.window.period_ns);
    let threshold = late_threshold_ns(period_ns);
    let in_hotplug = |from: u64, to: u64| hotplug.iter().any(|&(start, end)| from <= end && to >= start);
    let (mut expected, mut fired, mut skipped, mut late, mut late_in_hotplug, mut missed_in_hotplug) =
        (0, 0, 0, 0, 0, 0);
    let (mut lateness_us, mut jitter_us, mut firing_times_ns) = (vec![], vec![], vec![]);
    let (mut drifts, mut entry_costs, mut cpus) = (vec![], vec![], std::collections::BTreeSet::new());
    let (mut to_program, mut cpu_shares) = (vec![], vec![]);
    let (mut moved, mut scheduling) = (None, None);
    for Round { window, measured } in rounds {
        let mut firings = measured.firings.clone();
        firings.sort_by_key(|f| f.index);
        firings.dedup_by_key(|f| f.index);
        // A reference giving lateness only counts wake-ups (timerlat: one thread per CPU), not periods.
        let due = if measured.latencies_only { firings.len() as u64 } else { window.count };
        let round_missed = due.saturating_sub(firings.len() as u64);
        expected += due;
        fired += firings.len() as u64;
        skipped += measured.skipped.min(round_missed);
        lateness_us
            .extend(firings.iter().filter_map(|f| Some((f.at_ns as f64 - f.deadline_ns? as f64) / 1e3)));
        if !measured.latencies_only {
            // Jitter: how far each period between consecutive firings is from the period asked for.
            jitter_us.extend(
                firings
                    .windows(2)
                    .filter(|pair| pair[1].index == pair[0].index + 1)
                    .map(|pair| (pair[1].at_ns as f64 - pair[0].at_ns as f64 - period_ns as f64).abs() / 1e3),
            );
            if let Some(drift) = drift_ppm(&firings, period_ns) {
                drifts.push((drift, firings.len() as f64));
            }
            firing_times_ns.extend(firings.iter().map(|f| f.at_ns));
        }
        let late_firings: Vec<(u64, u64)> = firings
            .iter()
            .filter_map(|f| Some((f.deadline_ns?, f.at_ns)))
            .filter(|&(deadline, at)| at.saturating_sub(deadline) > threshold)
            .collect();
        late += late_firings.len() as u64;
        late_in_hotplug +=
            late_firings.iter().filter(|&&(deadline, at)| in_hotplug(deadline, at)).count() as u64;
        // A missed period's deadline within a period of a span: the firing it should have had was held up.
        let fired_indices: std::collections::HashSet<u64> = firings.iter().map(|f| f.index).collect();
        missed_in_hotplug += (1..=due)
            .filter(|k| !fired_indices.contains(k))
            .map(|k| window.deadline(k))
            .filter(|&deadline| in_hotplug(deadline.saturating_sub(period_ns), deadline + period_ns))
            .count() as u64;
        entry_costs.extend(measured.entry_cost_ns);
        to_program.extend(measured.to_program_ns);
        cpu_shares.extend(measured.thread_cpu_share);
        cpus.extend(measured.cpus.iter().copied());
        if let Some(m) = measured.moved {
            moved = Some(moved.unwrap_or(0) + m);
        }
        if scheduling.is_none() {
            scheduling.clone_from(&measured.scheduling);
        }
    }
    let missed = expected.saturating_sub(fired);
    // A round that fired more periods than it was due (past its window) makes up for another round's
    // missed ones in `missed`, not in the skipped count taken round by round.
    let skipped = skipped.min(missed);
    lateness_us.sort_by(f64::total_cmp);
    jitter_us.sort_by(f64::total_cmp);
    // Drift per round (the rounds' clocks are apart), weighted by the firings it rests on.
    let weight: f64 = drifts.iter().map(|d| d.1).sum();
    let drift_ppm = (weight > 0.0).then(|| drifts.iter().map(|(d, w)| d * w).sum::<f64>() / weight);
    entry_costs.sort_by(f64::total_cmp);
    to_program.sort_by(f64::total_cmp);
    cpu_shares.sort_by(f64::total_cmp);
    Summary {
        expected,
        fired,
        missed,
        lost: missed - skipped,
        skipped,
        drift_ppm,
        lateness: Percentiles::of(&lateness_us),
        jitter: Percentiles::of(&jitter_us),
        entry_cost_ns: entry_costs.get(entry_costs.len() / 2).copied(),
        to_program_ns: to_program.get(to_program.len() / 2).copied(),
        thread_cpu_share: cpu_shares.get(cpu_shares.len() / 2).copied(),
        cpus: cpus.into_iter().collect(),
        moved,
        scheduling,
        lateness_us,
        jitter_us,
        windows: rounds.iter().map(|r| r.window).collect(),
        firing_times_ns,
        late,
        late_in_hotplug,
        missed_in_hotplug: missed_in_hotplug.min(missed),
    }
}

/// Drift: the mean period, as the slope of a least-squares line through (period number, time), against
/// the period asked for. A line rather than the first and last firing alone: one late end would
/// otherwise count as drift.
fn drift_ppm(firings: &[super::Firing], period_ns: u64) -> Option<f64> {
    let first = firings.first()?;
    // Signed: a first firing late by more than the periods after it puts later ones before it.
    let points: Vec<(f64, f64)> = firings
        .iter()
        .map(|f| (f.index as f64 - first.index as f64, f.at_ns as f64 - first.at_ns as f64))
        .collect();
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

    fn window(count: u64) -> Window {
        Window { start_ns: 1_000_000, period_ns: 1000, count }
    }

    fn on(index: u64, late_ns: u64) -> Firing {
        let deadline = 1_000_000 + index * 1000;
        Firing { index, at_ns: deadline + late_ns, deadline_ns: Some(deadline) }
    }

    #[test]
    fn counts_add_up_and_skipped_periods_are_not_lost() {
        let firings = vec![on(1, 10), on(2, 20), on(5, 0), on(6, 0)];
        let measured = Measured { firings, skipped: 2, ..Measured::default() };
        let summary = summarize(&[Round { window: window(8), measured }], &[]);
        assert_eq!((summary.fired, summary.missed, summary.skipped, summary.lost), (4, 4, 2, 2));
    }

    #[test]
    fn jitter_is_taken_between_consecutive_periods_only() {
        let firings = vec![on(1, 0), on(2, 3000), on(4, 0), on(5, 1000)];
        let summary = summarize(
            &[Round { window: window(5), measured: Measured { firings, ..Measured::default() } }],
            &[],
        );
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
        let drift = summarize(
            &[Round { window: window(11), measured: Measured { firings, ..Measured::default() } }],
            &[],
        )
        .drift_ppm
        .unwrap();
        assert!((drift - 1000.0).abs() < 1e-6, "{drift}");
    }

    #[test]
    fn a_first_firing_later_than_the_next_ones_gives_a_drift() {
        // The first wake-up was 5 periods late (a cyclictest start on a busy machine), the rest on time.
        let firings = vec![on(1, 5000), on(2, 0), on(3, 0), on(4, 0)];
        let summary = summarize(
            &[Round { window: window(4), measured: Measured { firings, ..Measured::default() } }],
            &[],
        );
        assert!(summary.drift_ppm.is_some_and(f64::is_finite), "{:?}", summary.drift_ppm);
    }

    #[test]
    fn periods_past_a_window_do_not_leave_more_skipped_than_missed() {
        // The first round delivered a period past its window (3 of 2); the second skipped 2 of its 3.
        let first = Measured { firings: vec![on(1, 0), on(2, 0), on(3, 0)], ..Measured::default() };
        let second = Measured { firings: vec![on(1, 0)], skipped: 2, ..Measured::default() };
        let rounds =
            [Round { window: window(2), measured: first }, Round { window: window(3), measured: second }];
        let summary = summarize(&rounds, &[]);
        assert_eq!((summary.expected, summary.fired, summary.missed), (5, 4, 1));
        assert_eq!((summary.skipped, summary.lost), (1, 0));
    }

    #[test]
    fn late_and_missed_periods_during_hotplug_are_told_apart() {
        // Period 1000 ns: late means more than 100 ns. Periods 3 and 4 are missed; 2 and 6 are late.
        let firings = vec![on(1, 0), on(2, 500), on(5, 0), on(6, 300), on(7, 0)];
        // The CPU went offline around period 2's deadline and was back before period 4's.
        let span = [(1_000_000 + 1900, 1_000_000 + 2600)];
        let summary = summarize(
            &[Round { window: window(7), measured: Measured { firings, ..Measured::default() } }],
            &span,
        );
        assert_eq!(summary.late, 2);
        assert_eq!(summary.late_in_hotplug, 1, "period 2, not period 6");
        // Period 3's deadline (3000) is within a period of the span; period 4's (4000) is not.
        assert_eq!(summary.missed_in_hotplug, 1);
        assert_eq!(summary.missed, 2);
    }

    #[test]
    fn a_reference_giving_lateness_only_has_no_jitter_drift_or_timeline() {
        let firings = vec![on(1, 10), on(2, 20)];
        let measured = Measured { firings, latencies_only: true, ..Measured::default() };
        let summary = summarize(&[Round { window: window(2), measured }], &[]);
        assert!(
            summary.jitter.is_none() && summary.drift_ppm.is_none() && summary.firing_times_ns.is_empty()
        );
        assert_eq!(summary.lateness.unwrap().max, 0.02);
    }

    #[test]
    fn rounds_add_up_and_no_period_spans_two_rounds() {
        let first = Measured { firings: vec![on(1, 0), on(2, 10)], ..Measured::default() };
        // The second round's clock is far on: a jitter across rounds would be huge.
        let later = |k: u64| Firing {
            index: k,
            at_ns: 9_000_000 + k * 1000 + 20,
            deadline_ns: Some(9_000_000 + k * 1000),
        };
        let second = Measured { firings: vec![later(1), later(3)], skipped: 1, ..Measured::default() };
        let rounds = [
            Round { window: window(2), measured: first },
            Round { window: Window { start_ns: 9_000_000, period_ns: 1000, count: 3 }, measured: second },
        ];
        let summary = summarize(&rounds, &[]);
        assert_eq!((summary.expected, summary.fired, summary.missed, summary.skipped), (5, 4, 1, 1));
        assert_eq!(summary.jitter_us, [0.01], "1→2 of the first round only");
        assert_eq!(summary.windows.len(), 2);
        // +10,000 ppm in the first round (one period 10 ns long), 0 in the second, two firings each.
        assert!(summary.drift_ppm.is_some_and(|d| (d - 5000.0).abs() < 1e-6), "{:?}", summary.drift_ppm);
    }
}
