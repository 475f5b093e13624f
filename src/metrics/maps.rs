//! The script's maps as metric families, read at scrape time. What each map becomes:
//!
//! - `count()`: a counter; `sum()`, `min()`, `max()`, `avg()` and plain integers: gauges;
//! - `hist()` and `lhist()`: histograms, `le` the inclusive upper bound of each bucket, cumulative, with
//!   `+Inf`; bpftrace's histograms keep no sum, so they have no `_sum`;
//! - `stats()`: a histogram of one `+Inf` bucket, its `_count` and `_sum` the map's (no `_sum` where the total
//!   is negative, which OpenMetrics forbids);
//! - other values (strings, tuples, stacks, records, `tseries()`, fine `hist(v, bits)`) are not metrics.
//!
//! A map `@name` is the family `steadytrace_map_name` (`steadytrace_map` for `@`). Each key part is a label
//! named as the script names it (`@opens[comm, $fd]`: `comm`, `fd`; see [`label_names`]), else `key` for a
//! key of one part and `key0`, `key1`, ... for several; label values are capped at [`LABEL_CAP`] bytes. A
//! key part that is a cgroup id (`cgroup`, `cgroup_path()`, `container_id()`) is four labels,
//! [`CGROUP_LABELS`]: which container and pod the cgroup is (their values come from `containers.rs`).
//! A map with more keys than `--metrics-max-keys` is served with those of the largest values
//! ([`Maps::capped`]). Two maps whose series names would be the same (`@` and `@total`; a `hist()` `@h` and
//! `@h_count`) cannot both keep their names: the later in the script gets `_2` (`_3`, ...).

use super::exposition::{Family, Kind, Number, Sample};
use crate::output::merge::merge_decoded;
use crate::output::value::{hist_bucket_range, lhist_bucket_range, Key, KeyPart, MapSnapshot, Stack, Value};
use std::collections::HashSet;

/// Longest label value, in bytes: a longer one is cut there and marked with a hash of the whole, so that two
/// long values never become one label.
pub const LABEL_CAP: usize = 512;

/// The labels of a key part that is a cgroup id: the container's 64-hex id, its name, the pod's uid, the
/// cgroup's v2 path. Absent where there is none.
pub const CGROUP_LABELS: [&str; 4] = ["container_id", "container", "pod_uid", "cgroup"];

/// The values of [`CGROUP_LABELS`] for a cgroup id.
pub type CgroupLabels<'a> = &'a dyn Fn(u64) -> [Option<String>; 4];

/// One map as read at a scrape, with what the script calls its key parts (`MapDecl::key_names`).
#[derive(Debug)]
pub struct ScrapedMap {
    pub snapshot: MapSnapshot,
    pub key_names: Vec<Option<String>>,
    /// Which key parts are cgroup ids (`MapDecl::cgroup_parts`), decoded as integers.
    pub cgroup_parts: Vec<bool>,
    /// Its plain values only ever added to (`MapDecl::counter`): two of them under one series are added.
    pub counter: bool,
}

/// A map's series: each key's labels, and its value.
#[derive(Debug)]
struct Served {
    name: String,
    entries: Vec<(Vec<(String, String)>, Value)>,
}

/// The maps of one scrape, in the script's order (empty ones included: they keep their names reserved).
#[derive(Debug)]
pub struct Maps(Vec<Served>);

impl Maps {
    /// The maps as series, keys that read the same merged ([`one_per_series`]), each cut to its `max_keys` keys
    /// of the largest values; with, per map that was cut, how many keys were left out. `cgroups` gives the
    /// labels of a cgroup key part.
    pub fn capped(
        maps: Vec<ScrapedMap>,
        max_keys: usize,
        cgroups: CgroupLabels,
    ) -> (Maps, Vec<(String, u64)>) {
        let mut left_out = vec![];
        let mut served = vec![];
        for scraped in maps {
            let mut map = one_per_series(scraped, cgroups);
            if map.entries.len() > max_keys {
                left_out.push((map.name.clone(), (map.entries.len() - max_keys) as u64));
                map.entries.sort_by(|(_, a), (_, b)| weight(b).total_cmp(&weight(a)));
                map.entries.truncate(max_keys);
            }
            served.push(map);
        }
        (Maps(served), left_out)
    }

    /// The metric families of the maps that hold numbers.
    pub fn families(&self) -> Vec<Family> {
        let mut taken = HashSet::new();
        let mut families = vec![];
        for map in &self.0 {
            let name = free_name(&family_name(&map.name), &mut taken);
            let Some(kind) = map.entries.first().and_then(|(_, value)| metric_kind(value)) else { continue };
            let samples =
                map.entries.iter().filter_map(|(labels, value)| sample(labels.clone(), value)).collect();
            families.push(Family { name, help: format!("The script's map {}.", map.name), kind, samples });
        }
        families
    }
}

/// The map's keys as labels. Keys that differ but read the same are one series (a label set is a series
/// once): stacks of two processes running one program at different addresses, two `dw_ustack` copies unwound
/// to different return addresses in the same functions. Their values are merged as the map's aggregation
/// merges ([`merge_decoded`]: a plain value not counted keeps the first), the first key standing for them.
fn one_per_series(scraped: ScrapedMap, cgroups: CgroupLabels) -> Served {
    let parts = scraped.snapshot.entries.first().map_or(0, |(key, _)| key.0.len());
    let names = part_labels(&scraped.key_names, &scraped.cgroup_parts, parts);
    let mut merged: Vec<(Vec<(String, String)>, Value)> = vec![];
    let mut index: std::collections::HashMap<Vec<(String, String)>, usize> = std::collections::HashMap::new();
    for (key, value) in scraped.snapshot.entries {
        let labels = labels(&names, &key, cgroups);
        match index.entry(labels.clone()) {
            std::collections::hash_map::Entry::Occupied(at) => {
                merge_decoded(&mut merged[*at.get()].1, &value, scraped.counter)
            }
            std::collections::hash_map::Entry::Vacant(at) => {
                at.insert(merged.len());
                merged.push((labels, value));
            }
        }
    }
    Served { name: scraped.snapshot.name, entries: merged }
}

/// `wanted`, or `wanted_2`, `wanted_3`, ... : the first whose series names are all free; they are taken.
fn free_name(wanted: &str, taken: &mut HashSet<String>) -> String {
    let name = (1..)
        .map(|n| if n == 1 { wanted.to_string() } else { format!("{wanted}_{n}") })
        .find(|name| Family::series_names(name).iter().all(|series| !taken.contains(series)))
        .expect("an unbounded search finds a free name");
    taken.extend(Family::series_names(&name));
    name
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
        Value::Hist(counts) | Value::Lhist { counts, .. } => counts.iter().sum::<u64>() as f64,
        _ => 0.0,
    }
}

/// What a map whose values are like `value` becomes; `None` for what is no number.
fn metric_kind(value: &Value) -> Option<Kind> {
    Some(match value {
        Value::Count(_) => Kind::Counter,
        Value::Int { .. } | Value::Sum { .. } | Value::Min(_) | Value::Max(_) | Value::Avg { .. } => {
            Kind::Gauge
        }
        Value::Hist(_) | Value::Lhist { .. } | Value::Stats { .. } => Kind::Histogram,
        _ => return None,
    })
}

fn sample(labels: Vec<(String, String)>, value: &Value) -> Option<Sample> {
    let int =
        |value: u64, signed: bool| Number::Int(if signed { (value as i64).into() } else { value.into() });
    let value = match value {
        Value::Count(n) => int(*n, false),
        Value::Int { value, signed } | Value::Sum { value, signed } => int(*value, *signed),
        Value::Min(v) | Value::Max(v) => Number::Int((*v).into()),
        // As bpftrace prints it: the integer mean.
        Value::Avg { count, total } => {
            Number::Int(if *count == 0 { 0 } else { (total / *count as i64).into() })
        }
        Value::Stats { count, total } => {
            let sum = (*total >= 0).then_some(Number::Int((*total).into()));
            return Some(Sample::Histogram { labels, buckets: vec![(f64::INFINITY, *count)], sum });
        }
        Value::Hist(counts) => {
            let bounds = counts.iter().enumerate().map(|(i, &n)| (hist_bucket_range(i).1, n));
            return Some(Sample::Histogram { labels, buckets: buckets(bounds), sum: None });
        }
        Value::Lhist { min, max, step, counts } => {
            let bounds =
                counts.iter().enumerate().map(|(i, &n)| (lhist_bucket_range(i, *min, *max, *step).1, n));
            return Some(Sample::Histogram { labels, buckets: buckets(bounds), sum: None });
        }
        _ => return None,
    };
    Some(Sample::Value { labels, value })
}

/// `(upper bound, count)` per bucket, with an open top bucket `+Inf` (empty, when the last bucket has a bound).
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
/// neither reserved nor taken by an earlier part; else `key` (one part) or `keyN`, made unique with `_`.
pub fn label_names(key_names: &[Option<String>], parts: usize) -> Vec<String> {
    part_labels(key_names, &[], parts).into_iter().flatten().collect()
}

/// The labels of each of a key's `parts`: one as [`label_names`] says, or for a part that is a cgroup id
/// (`cgroup_parts`) the [`CGROUP_LABELS`], each made unique with `_` where an earlier part took it.
fn part_labels(key_names: &[Option<String>], cgroup_parts: &[bool], parts: usize) -> Vec<Vec<String>> {
    let mut names: Vec<String> = vec![];
    let mut per_part = vec![];
    let unique = |mut name: String, names: &mut Vec<String>| {
        while names.contains(&name) {
            name.push('_');
        }
        names.push(name.clone());
        name
    };
    for i in 0..parts {
        if cgroup_parts.get(i).copied().unwrap_or(false) {
            per_part.push(CGROUP_LABELS.iter().map(|label| unique(label.to_string(), &mut names)).collect());
            continue;
        }
        let named =
            key_names.get(i).cloned().flatten().filter(|name| usable_label(name) && !names.contains(name));
        let name = named.unwrap_or_else(|| if parts == 1 { "key".to_string() } else { format!("key{i}") });
        per_part.push(vec![unique(name, &mut names)]);
    }
    per_part
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

fn labels(names: &[Vec<String>], key: &Key, cgroups: CgroupLabels) -> Vec<(String, String)> {
    let mut labels = vec![];
    for (names, part) in names.iter().zip(&key.0) {
        match (&names[..], part) {
            ([name], _) => labels.push((name.clone(), label_value(part))),
            (names, KeyPart::Int { value, .. }) => {
                let values = cgroups(*value);
                for (name, value) in names.iter().zip(values) {
                    if let Some(value) = value.filter(|v| !v.is_empty()) {
                        labels.push((name.clone(), cap(utf8_or_escaped(value.as_bytes()), false)));
                    }
                }
            }
            (names, _) => labels.push((names[names.len() - 1].clone(), label_value(part))),
        }
    }
    labels
}

fn label_value(part: &KeyPart) -> String {
    match part {
        KeyPart::Int { value, signed: true } => (*value as i64).to_string(),
        KeyPart::Int { value, signed: false } => value.to_string(),
        KeyPart::Bool(b) => b.to_string(),
        KeyPart::Str(bytes) => {
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            cap(utf8_or_escaped(&bytes[..end]), false)
        }
        KeyPart::Stack(stack) => cap(stack_label(stack), true),
        KeyPart::Tuple(parts) => {
            cap(format!("({})", parts.iter().map(label_value).collect::<Vec<_>>().join(", ")), false)
        }
        KeyPart::Pointer(address) => format!("{address:#x}"),
        // As text output writes them: `{ .a = 1, .b = x }`, `[127,0,0,1]`, `[1,2,3]`.
        KeyPart::Record { .. } | KeyPart::Bytes(_) | KeyPart::Array(_) => {
            let mut text = vec![];
            crate::output::text::write_key_part(&mut text, part);
            cap(utf8_or_escaped(&text), false)
        }
    }
}

/// Label values are UTF-8: a byte that is not valid there is written `\xNN`, so that two keys differing only in
/// such bytes stay two labels.
fn utf8_or_escaped(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// A stack as one label: its frames, outermost first, joined by `;` as folded stacks are.
fn stack_label(stack: &Stack) -> String {
    stack.frames.iter().rev().map(|f| f.trim()).collect::<Vec<_>>().join(";")
}

/// `text` cut to [`LABEL_CAP`] bytes (on a character boundary) where longer, marked `…#HASH` with a hash of the
/// whole text; a stack (`keep_end`) keeps its innermost frames, the end of the text.
fn cap(text: String, keep_end: bool) -> String {
    if text.len() <= LABEL_CAP {
        return text;
    }
    let mark = format!("…#{:016x}", fnv1a(text.as_bytes()));
    let room = LABEL_CAP - mark.len();
    if keep_end {
        let mut start = text.len() - room;
        while !text.is_char_boundary(start) {
            start += 1;
        }
        format!("{mark}{}", &text[start..])
    } else {
        let mut end = room;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}{mark}", &text[..end])
    }
}

/// FNV-1a: the same for the same text in every scrape and every run.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::exposition::write;
    use crate::metrics::Format;

    fn scraped(name: &str, entries: Vec<(Key, Value)>) -> ScrapedMap {
        ScrapedMap {
            snapshot: MapSnapshot::new(name, entries),
            key_names: vec![],
            cgroup_parts: vec![],
            counter: false,
        }
    }

    fn no_cgroups(id: u64) -> [Option<String>; 4] {
        [None, None, None, Some(id.to_string())]
    }

    fn encode(maps: Vec<ScrapedMap>) -> String {
        write(&Maps::capped(maps, usize::MAX, &no_cgroups).0.families(), Format::OpenMetrics)
    }

    #[test]
    fn counts_are_counters_with_a_label_per_key_part() {
        let text = encode(vec![
            scraped(
                "@calls",
                vec![(Key::str(b"bash\0\0"), Value::Count(7)), (Key::str(b"sh"), Value::Count(2))],
            ),
            scraped("@", vec![(Key::scalar(), Value::Count(3))]),
            scraped(
                "@by",
                vec![(
                    Key(vec![KeyPart::Int { value: 1, signed: true }, KeyPart::Bool(true)]),
                    Value::Sum { value: (-4i64) as u64, signed: true },
                )],
            ),
        ]);
        assert!(text.contains("# TYPE steadytrace_map_calls counter\n"), "{text}");
        assert!(text.contains("steadytrace_map_calls_total{key=\"bash\"} 7\n"), "{text}");
        assert!(text.contains("steadytrace_map_total 3\n"), "{text}");
        assert!(text.contains("steadytrace_map_by{key0=\"1\",key1=\"true\"} -4\n"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn keys_that_read_the_same_are_one_series() {
        // Two processes' stacks through the same functions at different addresses; "sh" and "sh\0".
        let stack = |frames: &[&str]| {
            let frames = frames.iter().map(|f| f.to_string()).collect();
            Key(vec![KeyPart::Stack(Stack::new(crate::symbols::StackMode::Bpftrace, frames))])
        };
        let text = encode(vec![
            scraped(
                "@s",
                vec![
                    (stack(&["leaf+9", "main+26"]), Value::Count(2)),
                    (stack(&["leaf+9", "main+26"]), Value::Count(3)),
                    (stack(&["mid+9", "main+26"]), Value::Count(1)),
                ],
            ),
            scraped(
                "@h",
                vec![
                    (Key::str(b"sh"), Value::Hist(vec![1, 2])),
                    (Key::str(b"sh\0"), Value::Hist(vec![0, 1, 4])),
                ],
            ),
        ]);
        assert!(text.contains("steadytrace_map_s_total{key=\"main+26;leaf+9\"} 5\n"), "{text}");
        assert!(text.contains("steadytrace_map_s_total{key=\"main+26;mid+9\"} 1\n"), "{text}");
        assert_eq!(text.matches("steadytrace_map_s_total{").count(), 2, "{text}");
        assert!(text.contains("steadytrace_map_h_count{key=\"sh\"} 8\n"), "{text}");
        // A plain value set (not counted) keeps the first; counted, they are added.
        let pids = |counter| ScrapedMap {
            counter,
            ..scraped(
                "@p",
                vec![
                    (Key::str(b"sh"), Value::Int { value: 7, signed: false }),
                    (Key::str(b"sh\0"), Value::Int { value: 9, signed: false }),
                ],
            )
        };
        assert!(encode(vec![pids(false)]).contains("steadytrace_map_p{key=\"sh\"} 7\n"));
        assert!(encode(vec![pids(true)]).contains("steadytrace_map_p{key=\"sh\"} 16\n"));
        // The cap counts series: the two keys reading "sh" are one, and nothing is left out.
        let (_, left_out) = Maps::capped(vec![pids(true)], 1, &no_cgroups);
        assert!(left_out.is_empty(), "{left_out:?}");
    }

    #[test]
    fn a_hist_is_a_cumulative_histogram_whose_inf_bucket_is_the_count_and_has_no_sum() {
        // hist buckets: negative, 0, 1, [2,3], [4,7]: 1 + 2 + 0 + 3 + 4 values.
        let text = encode(vec![ScrapedMap {
            snapshot: MapSnapshot::new("@lat", vec![(Key::str(b"sh"), Value::Hist(vec![1, 2, 0, 3, 4]))]),
            key_names: vec![Some("comm".into())],
            cgroup_parts: vec![],
            counter: false,
        }]);
        for line in [
            "steadytrace_map_lat_bucket{comm=\"sh\",le=\"-1.0\"} 1",
            "steadytrace_map_lat_bucket{comm=\"sh\",le=\"0.0\"} 3",
            "steadytrace_map_lat_bucket{comm=\"sh\",le=\"1.0\"} 3",
            "steadytrace_map_lat_bucket{comm=\"sh\",le=\"3.0\"} 6",
            "steadytrace_map_lat_bucket{comm=\"sh\",le=\"7.0\"} 10",
            "steadytrace_map_lat_bucket{comm=\"sh\",le=\"+Inf\"} 10",
            "steadytrace_map_lat_count{comm=\"sh\"} 10",
        ] {
            assert!(text.contains(line), "no `{line}` in\n{text}");
        }
        assert!(!text.contains("_sum"), "{text}");
    }

    #[test]
    fn a_stats_map_has_its_sum_unless_negative() {
        let text = encode(vec![scraped(
            "@s",
            vec![
                (Key::int(1), Value::Stats { count: 2, total: 10 }),
                (Key::int(2), Value::Stats { count: 1, total: -3 }),
            ],
        )]);
        assert!(text.contains("steadytrace_map_s_sum{key=\"1\"} 10\n"), "{text}");
        assert!(!text.contains("steadytrace_map_s_sum{key=\"2\"}"), "{text}");
        assert!(text.contains("steadytrace_map_s_count{key=\"2\"} 1\n"), "{text}");
    }

    #[test]
    fn strings_are_not_metrics_and_long_labels_are_cut_apart() {
        let text = encode(vec![scraped("@s", vec![(Key::scalar(), Value::Str(b"x".to_vec()))])]);
        assert!(!text.contains("steadytrace_map_s"), "{text}");
        let (a, b) = ("é".repeat(LABEL_CAP) + "a", "é".repeat(LABEL_CAP) + "b");
        let (a, b) = (cap(a, false), cap(b, false));
        assert!(a.len() <= LABEL_CAP && b.len() <= LABEL_CAP && a != b, "{a} {b}");
        let stack = "outer;".repeat(200) + "leaf";
        assert!(cap(stack, true).ends_with(";outer;leaf"));
        assert_eq!(family_name("@a.b"), "steadytrace_map_a_b");
    }

    #[test]
    fn invalid_utf8_bytes_are_escaped_and_stay_apart() {
        let text = encode(vec![scraped(
            "@c",
            vec![(Key::str(b"w\xff"), Value::Count(1)), (Key::str(b"w\xfe"), Value::Count(2))],
        )]);
        assert!(text.contains("steadytrace_map_c_total{key=\"w\\\\xff\"} 1\n"), "{text}");
        assert!(text.contains("steadytrace_map_c_total{key=\"w\\\\xfe\"} 2\n"), "{text}");
    }

    #[test]
    fn maps_whose_series_names_would_collide_are_told_apart() {
        let text = encode(vec![
            scraped("@", vec![(Key::scalar(), Value::Count(1))]),
            scraped("@total", vec![(Key::scalar(), Value::int(5))]),
            scraped("@h", vec![(Key::scalar(), Value::Hist(vec![0, 1]))]),
            scraped("@h_count", vec![(Key::scalar(), Value::int(2))]),
        ]);
        assert!(text.contains("\nsteadytrace_map_total 1\n"), "{text}");
        assert!(text.contains("\nsteadytrace_map_total_2 5\n"), "{text}");
        assert!(text.contains("\nsteadytrace_map_h_count 1\n"), "{text}");
        assert!(text.contains("\nsteadytrace_map_h_count_2 2\n"), "{text}");
    }

    #[test]
    fn a_map_over_the_cap_keeps_its_largest_keys() {
        let entries = (0..10u64).map(|i| (Key::int(i as i64), Value::Count(i * 10))).collect();
        let (Maps(maps), left_out) = Maps::capped(vec![scraped("@c", entries)], 3, &no_cgroups);
        assert_eq!(left_out, vec![("@c".to_string(), 7)]);
        let kept: Vec<_> = maps[0].entries.iter().map(|(_, v)| weight(v)).collect();
        assert_eq!(kept, [90.0, 80.0, 70.0]);
        let one = scraped("@c", vec![(Key::int(1), Value::Count(1))]);
        let (_, left_out) = Maps::capped(vec![one], 1, &no_cgroups);
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
        assert_eq!(named(&[Some("key1"), None], 2), ["key1", "key1_"]);
        assert_eq!(
            named(&[Some("le"), Some("__x"), Some("instance"), Some("9a")], 4),
            ["key0", "key1", "key2", "key3"]
        );
        assert_eq!(named(&[], 2), ["key0", "key1"]);
    }

    #[test]
    fn a_cgroup_key_part_is_the_container_and_pod_labels() {
        const ID: &str = "18105278c658ff9cf2f2c93960e6b97731ee871ca841f1908c4b0863d677384f";
        let cgroups = |id: u64| match id {
            7 => [Some(ID.to_string()), Some("web".into()), None, Some(format!("/docker/{ID}"))],
            8 => {
                [None, None, Some("12345678-1234-1234-1234-123456789abc".into()), Some("/kubepods/x".into())]
            }
            _ => [None, None, None, Some("/".into())],
        };
        let map = ScrapedMap {
            snapshot: MapSnapshot::new(
                "@calls",
                vec![
                    (
                        Key(vec![KeyPart::Int { value: 7, signed: false }, KeyPart::Str(b"sh".to_vec())]),
                        Value::Count(3),
                    ),
                    (
                        Key(vec![KeyPart::Int { value: 8, signed: false }, KeyPart::Str(b"sh".to_vec())]),
                        Value::Count(5),
                    ),
                    (
                        Key(vec![KeyPart::Int { value: 1, signed: false }, KeyPart::Str(b"sh".to_vec())]),
                        Value::Count(1),
                    ),
                ],
            ),
            key_names: vec![Some("cgroup".into()), Some("container".into())],
            cgroup_parts: vec![true, false],
            counter: false,
        };
        let text = write(&Maps::capped(vec![map], usize::MAX, &cgroups).0.families(), Format::OpenMetrics);
        let docker = format!(
            "steadytrace_map_calls_total{{container_id=\"{ID}\",container=\"web\",cgroup=\"/docker/{ID}\",key1=\"sh\"}} 3\n"
        );
        assert!(text.contains(&docker), "{text}");
        let pod = "steadytrace_map_calls_total{pod_uid=\"12345678-1234-1234-1234-123456789abc\",cgroup=\"/kubepods/x\",key1=\"sh\"} 5\n";
        assert!(text.contains(pod), "{text}");
        assert!(text.contains("steadytrace_map_calls_total{cgroup=\"/\",key1=\"sh\"} 1\n"), "{text}");
        // A later part cannot take a cgroup's label names; two cgroup parts are told apart.
        assert_eq!(
            part_labels(&[None, Some("container".into())], &[true, false], 2),
            [CGROUP_LABELS.map(String::from).to_vec(), vec!["key1".to_string()]]
        );
        assert_eq!(
            part_labels(&[], &[true, true], 2)[1],
            ["container_id_", "container_", "pod_uid_", "cgroup_"]
        );
    }
}
