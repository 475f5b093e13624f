//! The script's maps as metric families, read at scrape time. What each map becomes:
//!
//! - `count()`: a counter; `sum()`, `min()`, `max()`, `avg()` and plain integers: gauges;
//! - `hist()` and `lhist()`: histograms, `le` the inclusive upper bound of each bucket, cumulative, with
//!   `+Inf`; bpftrace's histograms keep no sum, so `_sum` is NaN;
//! - `stats()`: a histogram of one `+Inf` bucket, its `_count` and `_sum` the map's;
//! - other values (strings, tuples, stacks, records, `tseries()`, fine `hist(v, bits)`) are not metrics.
//!
//! A map `@name` is the family `steadytrace_map_name` (`steadytrace_map` for `@`); a key of one part is the
//! label `key`, of several parts `key0`, `key1`, ...; label values are capped at [`LABEL_CAP`] bytes.
//! A map with more keys than `--metrics-max-keys` is served with those of the largest values
//! ([`Maps::capped`]).

use crate::output::value::{hist_bucket_range, lhist_bucket_range, Key, KeyPart, MapSnapshot, Stack, Value};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use std::collections::HashMap;

/// Histograms carry no exemplars.
type NoExemplars<'a> =
    Option<&'a HashMap<usize, prometheus_client::metrics::exemplar::Exemplar<Vec<(String, String)>, f64>>>;

/// Longest label value, in bytes: a stack or a long string key is cut there (on a character boundary).
pub const LABEL_CAP: usize = 512;

/// The maps of one scrape.
#[derive(Debug)]
pub struct Maps(Vec<MapSnapshot>);

impl Maps {
    /// The maps, each cut to its `max_keys` keys of the largest values; with, per map that was cut, how
    /// many keys were left out.
    pub fn capped(mut maps: Vec<MapSnapshot>, max_keys: usize) -> (Maps, Vec<(String, u64)>) {
        let mut left_out = vec![];
        for map in &mut maps {
            if map.entries.len() > max_keys {
                left_out.push((map.name.clone(), (map.entries.len() - max_keys) as u64));
                map.entries.sort_by(|(_, a), (_, b)| weight(b).total_cmp(&weight(a)));
                map.entries.truncate(max_keys);
            }
        }
        (Maps(maps), left_out)
    }
}

/// What ranks a key for [`Maps::capped`]: its value, or its histogram's count.
fn weight(value: &Value) -> f64 {
    match value {
        Value::Count(n) => *n as f64,
        Value::Int { value, signed: true } | Value::Sum { value, signed: true } => *value as i64 as f64,
        Value::Int { value, signed: false } | Value::Sum { value, signed: false } => *value as f64,
        Value::Min(v) | Value::Max(v) => *v as f64,
        Value::Avg { count, total } if *count > 0 => *total as f64 / *count as f64,
        Value::Stats { count, .. } => *count as f64,
        Value::Hist(counts) | Value::Lhist { counts, .. } => total(counts) as f64,
        _ => 0.0,
    }
}

impl Collector for Maps {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        for map in &self.0 {
            let Some(kind) = map.entries.first().and_then(|(_, value)| metric_type(value)) else { continue };
            let name = family_name(&map.name);
            let help = format!("the script's map {}", map.name);
            let mut family = encoder.encode_descriptor(&name, &help, None, kind)?;
            for (key, value) in &map.entries {
                let labels = labels(key);
                let sample = family.encode_family(&labels)?;
                encode_value(value, sample)?;
            }
        }
        Ok(())
    }
}

/// What a map whose values are like `value` becomes; `None` for what is no number.
fn metric_type(value: &Value) -> Option<MetricType> {
    Some(match value {
        Value::Count(_) => MetricType::Counter,
        Value::Int { .. } | Value::Sum { .. } | Value::Min(_) | Value::Max(_) | Value::Avg { .. } => {
            MetricType::Gauge
        }
        Value::Hist(_) | Value::Lhist { .. } | Value::Stats { .. } => MetricType::Histogram,
        _ => return None,
    })
}

fn encode_value(
    value: &Value,
    mut sample: prometheus_client::encoding::MetricEncoder<'_>,
) -> Result<(), std::fmt::Error> {
    let none: NoExemplars = None;
    match value {
        Value::Count(n) => ConstCounter::new(*n).encode(sample),
        Value::Int { value, signed: true } => ConstGauge::new(*value as i64).encode(sample),
        Value::Int { value, signed: false } => ConstGauge::new(*value as f64).encode(sample),
        Value::Sum { value, signed } => {
            let value = if *signed { *value as i64 as f64 } else { *value as f64 };
            ConstGauge::new(value).encode(sample)
        }
        Value::Min(v) | Value::Max(v) => ConstGauge::new(*v).encode(sample),
        Value::Avg { count, total } => {
            let average = if *count == 0 { 0 } else { total / *count as i64 };
            ConstGauge::new(average).encode(sample)
        }
        Value::Stats { count, total } => {
            sample.encode_histogram(*total as f64, *count, &[(f64::INFINITY, *count)], none)
        }
        Value::Hist(counts) => {
            let buckets = buckets(counts.iter().enumerate().map(|(i, &n)| (hist_bucket_range(i).1, n)));
            sample.encode_histogram(f64::NAN, total(counts), &buckets, none)
        }
        Value::Lhist { min, max, step, counts } => {
            let bounds =
                counts.iter().enumerate().map(|(i, &n)| (lhist_bucket_range(i, *min, *max, *step).1, n));
            sample.encode_histogram(f64::NAN, total(counts), &buckets(bounds), none)
        }
        _ => Ok(()),
    }
}

fn total(counts: &[u64]) -> u64 {
    counts.iter().sum()
}

/// `(upper bound, count)` per bucket as the encoder takes them (it makes the counts cumulative), with an
/// open top bucket `+Inf` (empty, when the last bucket has a bound).
fn buckets(counts: impl Iterator<Item = (Option<i64>, u64)>) -> Vec<(f64, u64)> {
    let mut out: Vec<(f64, u64)> =
        counts.map(|(bound, n)| (bound.map_or(f64::INFINITY, |b| b as f64), n)).collect();
    if out.last().is_none_or(|(bound, _)| bound.is_finite()) {
        out.push((f64::INFINITY, 0));
    }
    out
}

/// `steadytrace_map_NAME`: the map's name without `@`, anything outside `[a-zA-Z0-9_]` as `_`.
fn family_name(map: &str) -> String {
    let bare: String = map
        .trim_start_matches('@')
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if bare.is_empty() {
        "steadytrace_map".into()
    } else {
        format!("steadytrace_map_{bare}")
    }
}

fn labels(key: &Key) -> Vec<(String, String)> {
    match key.0.as_slice() {
        [] => vec![],
        [one] => vec![("key".into(), label_value(one))],
        parts => parts.iter().enumerate().map(|(i, part)| (format!("key{i}"), label_value(part))).collect(),
    }
}

fn label_value(part: &KeyPart) -> String {
    let text = match part {
        KeyPart::Int { value, signed: true } => (*value as i64).to_string(),
        KeyPart::Int { value, signed: false } => value.to_string(),
        KeyPart::Bool(b) => b.to_string(),
        KeyPart::Str(bytes) => {
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            String::from_utf8_lossy(&bytes[..end]).into_owned()
        }
        KeyPart::Stack(stack) => stack_label(stack),
        KeyPart::Tuple(parts) => {
            format!("({})", parts.iter().map(label_value).collect::<Vec<_>>().join(", "))
        }
    };
    cap(text)
}

/// A stack as one label: its frames, outermost first, joined by `;` as folded stacks are.
fn stack_label(stack: &Stack) -> String {
    stack.frames.iter().rev().map(|f| f.trim()).collect::<Vec<_>>().join(";")
}

fn cap(mut text: String) -> String {
    if text.len() > LABEL_CAP {
        let mut end = LABEL_CAP;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(name: &str, entries: Vec<(Key, Value)>) -> MapSnapshot {
        MapSnapshot::new(name, entries)
    }

    /// The OpenMetrics text of `maps` alone.
    fn encode(maps: Vec<MapSnapshot>) -> Result<String, std::fmt::Error> {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(Maps(maps)));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry)?;
        Ok(crate::metrics::Format::OpenMetrics.from_openmetrics(&text))
    }

    #[test]
    fn counts_are_counters_with_a_label_per_key_part() {
        let text = encode(vec![
            snapshot(
                "@calls",
                vec![(Key::str(b"bash\0\0"), Value::Count(7)), (Key::str(b"sh"), Value::Count(2))],
            ),
            snapshot("@", vec![(Key::scalar(), Value::Count(3))]),
            snapshot(
                "@by",
                vec![(
                    Key(vec![KeyPart::Int { value: 1, signed: true }, KeyPart::Bool(true)]),
                    Value::Sum { value: (-4i64) as u64, signed: true },
                )],
            ),
        ])
        .unwrap();
        assert!(text.contains("# TYPE steadytrace_map_calls counter\n"), "{text}");
        assert!(text.contains("steadytrace_map_calls_total{key=\"bash\"} 7\n"), "{text}");
        assert!(text.contains("steadytrace_map_total{} 3\n"), "{text}");
        assert!(text.contains("steadytrace_map_by{key0=\"1\",key1=\"true\"} -4"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn a_hist_is_a_cumulative_histogram_whose_inf_bucket_is_the_count() {
        // hist buckets: negative, 0, 1, [2,3], [4,7]: 1 + 2 + 0 + 3 + 4 values.
        let text =
            encode(vec![snapshot("@lat", vec![(Key::scalar(), Value::Hist(vec![1, 2, 0, 3, 4]))])]).unwrap();
        for line in [
            "steadytrace_map_lat_bucket{le=\"-1.0\"} 1",
            "steadytrace_map_lat_bucket{le=\"0.0\"} 3",
            "steadytrace_map_lat_bucket{le=\"1.0\"} 3",
            "steadytrace_map_lat_bucket{le=\"3.0\"} 6",
            "steadytrace_map_lat_bucket{le=\"7.0\"} 10",
            "steadytrace_map_lat_bucket{le=\"+Inf\"} 10",
            "steadytrace_map_lat_count{} 10",
        ] {
            assert!(text.contains(line), "no `{line}` in\n{text}");
        }
    }

    #[test]
    fn strings_are_not_metrics_and_long_labels_are_cut() {
        let text = encode(vec![snapshot("@s", vec![(Key::scalar(), Value::Str(b"x".to_vec()))])]).unwrap();
        assert!(!text.contains("steadytrace_map_s"), "{text}");
        let long = "é".repeat(LABEL_CAP);
        assert_eq!(cap(long).len(), LABEL_CAP);
        assert_eq!(family_name("@a.b"), "steadytrace_map_a_b");
    }

    #[test]
    fn a_map_over_the_cap_keeps_its_largest_keys() {
        let entries = (0..10u64).map(|i| (Key::int(i as i64), Value::Count(i * 10))).collect();
        let (Maps(maps), left_out) = Maps::capped(vec![snapshot("@c", entries)], 3);
        assert_eq!(left_out, vec![("@c".to_string(), 7)]);
        let kept: Vec<_> = maps[0].entries.iter().map(|(_, v)| weight(v)).collect();
        assert_eq!(kept, [90.0, 80.0, 70.0]);
        let (_, left_out) = Maps::capped(vec![snapshot("@c", vec![(Key::int(1), Value::Count(1))])], 1);
        assert!(left_out.is_empty());
    }
}
