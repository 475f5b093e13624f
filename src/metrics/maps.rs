//! The script's maps as metric families, read at scrape time. What each map becomes:
//!
//! - `count()`: a counter; `sum()`, `min()`, `max()`, `avg()` and plain integers: gauges;
//! - `hist()` and `lhist()`: histograms, `le` the inclusive upper bound of each bucket, cumulative, with
//!   `+Inf`; bpftrace's histograms keep no sum, so `_sum` is NaN;
//! - `stats()`: a histogram of one `+Inf` bucket, its `_count` and `_sum` the map's;
//! - other values (strings, tuples, stacks, records, `tseries()`, fine `hist(v, bits)`) are not metrics.
//!
//! A map `@name` is the family `steadytrace_map_name` (`steadytrace_map` for `@`). Each key part is a label
//! named as the script names it (`@opens[comm, $fd]`: `comm`, `fd`; see [`label_names`]), else `key` for a
//! key of one part and `key0`, `key1`, ... for several; label values are capped at [`LABEL_CAP`] bytes.
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

/// One map as read at a scrape, with what the script calls its key parts (`MapDecl::key_names`).
#[derive(Debug)]
pub struct ScrapedMap {
    pub snapshot: MapSnapshot,
    pub key_names: Vec<Option<String>>,
}

/// The maps of one scrape.
#[derive(Debug)]
pub struct Maps(Vec<ScrapedMap>);

impl Maps {
    /// The maps, each cut to its `max_keys` keys of the largest values; with, per map that was cut, how
    /// many keys were left out.
    pub fn capped(mut maps: Vec<ScrapedMap>, max_keys: usize) -> (Maps, Vec<(String, u64)>) {
        let mut left_out = vec![];
        for ScrapedMap { snapshot: map, .. } in &mut maps {
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
        for ScrapedMap { snapshot: map, key_names } in &self.0 {
            let Some(kind) = map.entries.first().and_then(|(_, value)| metric_type(value)) else { continue };
            let parts = map.entries.first().map_or(0, |(key, _)| key.0.len());
            let names = label_names(key_names, parts);
            let name = family_name(&map.name);
            let help = format!("the script's map {}", map.name);
            let mut family = encoder.encode_descriptor(&name, &help, None, kind)?;
            for (key, value) in &map.entries {
                let labels = labels(&names, key);
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

/// The label of each of a key's `parts`: what the script calls the part, where that makes a label name that is
/// neither reserved nor taken by an earlier part; else `key` (one part) or `keyN`.
pub fn label_names(key_names: &[Option<String>], parts: usize) -> Vec<String> {
    let mut names: Vec<String> = vec![];
    for i in 0..parts {
        let fallback = if parts == 1 { "key".to_string() } else { format!("key{i}") };
        let named =
            key_names.get(i).cloned().flatten().filter(|name| usable_label(name) && !names.contains(name));
        names.push(named.unwrap_or(fallback));
    }
    names
}

/// A label name Prometheus takes as written: `[a-zA-Z_][a-zA-Z0-9_]*`, not `__`-prefixed (reserved), not `le`
/// (a histogram's bucket), `quantile`, or `job` and `instance` (which Prometheus sets on every scraped series).
fn usable_label(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("__")
        && !["le", "quantile", "job", "instance"].contains(&name)
}

fn labels(names: &[String], key: &Key) -> Vec<(String, String)> {
    names.iter().cloned().zip(key.0.iter().map(label_value)).collect()
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

    fn snapshot(name: &str, entries: Vec<(Key, Value)>) -> ScrapedMap {
        ScrapedMap { snapshot: MapSnapshot::new(name, entries), key_names: vec![] }
    }

    /// The OpenMetrics text of `maps` alone.
    fn encode(maps: Vec<ScrapedMap>) -> Result<String, std::fmt::Error> {
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
        let kept: Vec<_> = maps[0].snapshot.entries.iter().map(|(_, v)| weight(v)).collect();
        assert_eq!(kept, [90.0, 80.0, 70.0]);
        let (_, left_out) = Maps::capped(vec![snapshot("@c", vec![(Key::int(1), Value::Count(1))])], 1);
        assert!(left_out.is_empty());
    }

    #[test]
    fn labels_are_named_as_the_script_names_the_key_parts() {
        let named = |names: &[Option<&str>], parts| {
            label_names(&names.iter().map(|n| n.map(String::from)).collect::<Vec<_>>(), parts)
        };
        assert_eq!(named(&[Some("comm"), Some("fd")], 2), ["comm", "fd"]);
        assert_eq!(named(&[None], 1), ["key"]);
        assert_eq!(named(&[Some("pid"), None, Some("pid")], 3), ["pid", "key1", "key2"]);
        assert_eq!(
            named(&[Some("le"), Some("__x"), Some("instance"), Some("9a")], 4),
            ["key0", "key1", "key2", "key3"]
        );
        assert_eq!(named(&[], 2), ["key0", "key1"]);
        let text = encode(vec![ScrapedMap {
            snapshot: MapSnapshot::new("@opens", vec![(Key::str(b"cat"), Value::Count(4))]),
            key_names: vec![Some("comm".into())],
        }])
        .unwrap();
        assert!(text.contains("steadytrace_map_opens_total{comm=\"cat\"} 4\n"), "{text}");
    }
}
