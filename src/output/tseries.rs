//! `tseries()` maps: the per-CPU `(value, meta, epoch)` triples of each (key, slot) reduced to one point per
//! interval, and the series printed as current bpftrace prints them (a text graph, or JSON points).

use super::value::{Point, Value};
use crate::sema::tseries::{Reduce, Tseries};
use std::collections::BTreeMap;

fn word(bytes: &[u8], at: usize) -> u64 {
    bytes.get(at..at + 8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes)
}

/// One slot's CPUs merged, as bpftrace merges them: only the latest epoch counts; `(0, 0)` for a slot no
/// CPU wrote (epoch 0 means unused).
fn reduce_slot(cpus: &[Vec<u8>], series: &Tseries) -> (u64, i128) {
    let as_number = |bits: u64| if series.signed { bits as i64 as i128 } else { bits as i128 };
    let mut by_epoch: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for cpu in cpus {
        let (value, meta, epoch) = (word(cpu, 0), word(cpu, 8), word(cpu, 16));
        if epoch == 0 {
            continue;
        }
        let Some(current) = by_epoch.get_mut(&epoch) else {
            by_epoch.insert(epoch, (value, meta));
            continue;
        };
        match series.reduce {
            // The most recent write wins (meta is its time).
            Reduce::Last if meta > current.1 => *current = (value, meta),
            Reduce::Last => {}
            Reduce::Avg => *current = (current.0.wrapping_add(value), current.1.wrapping_add(meta)),
            Reduce::Sum => current.0 = current.0.wrapping_add(value),
            Reduce::Min | Reduce::Max => {
                let smaller = as_number(value) < as_number(current.0);
                if smaller == (series.reduce == Reduce::Min) {
                    current.0 = value;
                }
            }
        }
    }
    let Some((&epoch, &(value, meta))) = by_epoch.iter().next_back() else { return (0, 0) };
    let value = match series.reduce {
        Reduce::Avg if meta != 0 && series.signed => ((value as i64).wrapping_div(meta as i64)) as i128,
        Reduce::Avg if meta != 0 => (value / meta) as i128,
        _ => as_number(value),
    };
    (epoch, value)
}

/// Every key's series (keys as the raw bytes of the user's key), from the map's entries `(key bytes with
/// the slot after the user's `user_key_len` bytes, one triple per CPU)`. All series end at the latest
/// epoch of the whole map and show at most `intervals` intervals, each from its own first value on.
pub fn series(
    series: &Tseries,
    user_key_len: usize,
    entries: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
) -> Vec<(Vec<u8>, Vec<Point>)> {
    let mut by_key: BTreeMap<Vec<u8>, BTreeMap<u64, i128>> = BTreeMap::new();
    for (key, cpus) in entries {
        let (epoch, value) = reduce_slot(&cpus, series);
        let user_key = key.get(..user_key_len).unwrap_or(&key).to_vec();
        by_key.entry(user_key).or_default().entry(epoch).or_insert(value);
    }
    let last =
        by_key.values().filter_map(|values| values.keys().next_back().copied()).max().unwrap_or(u64::MAX);
    let first = last.wrapping_sub(series.intervals).wrapping_add(1);
    by_key
        .into_iter()
        .map(|(key, values)| {
            let from = values.keys().copied().filter(|&e| e >= first).min().unwrap_or(last).min(last);
            let points = if first > last {
                vec![]
            } else {
                (first.max(from)..=last)
                    .map(|epoch| (epoch.wrapping_mul(series.interval), values.get(&epoch).copied()))
                    .collect()
            };
            (key, points)
        })
        .collect()
}

/// The unit the interval is shown in: the digits after the seconds (0, 3, 6 or 9) and its name.
fn unit(interval: u64) -> (usize, &'static str) {
    match interval {
        1_000_000_000.. => (0, ""),
        1_000_000.. => (3, "ms"),
        1_000.. => (6, "μs"),
        _ => (9, "ns"),
    }
}

/// The local time of `nanos` since 1970 as `%H:%M:%S`, with `digits` of the fraction of the second.
fn clock_time(nanos: u64, digits: usize) -> String {
    let seconds = (nanos / 1_000_000_000) as i64;
    let mut text = String::from_utf8_lossy(&crate::sys::format_local_time(c"%H:%M:%S", seconds)).into_owned();
    if digits > 0 {
        let fraction = nanos % 1_000_000_000 / 10u64.pow(9 - digits as u32);
        text.push_str(&format!(".{fraction:0digits$}"));
    }
    text
}

/// `s` padded with spaces to `width` bytes (C++ `setw` counts bytes): on the left, or on the right.
fn pad(s: &str, width: usize, left: bool) -> String {
    let fill = " ".repeat(width.saturating_sub(s.len()));
    if left {
        format!("{s}{fill}")
    } else {
        format!("{fill}{s}")
    }
}

const GRAPH_WIDTH: usize = 53;
const LABEL_WIDTH: usize = 21;

/// The text graph: a head with the value range and the time unit, a row per interval (`*` at the value,
/// `.` at zero when the range spans it, `-` for an interval without a value), the range again at the foot.
/// `<no data>` for an empty series.
pub fn text(points: &[Point], signed: bool) -> Vec<u8> {
    if points.is_empty() {
        return b"<no data>".to_vec();
    }
    let present = || points.iter().filter_map(|(_, v)| *v);
    // bpftrace starts both from the first point; a missing first point stays the minimum (and prints empty).
    let mut min = points[0].1;
    let mut max = points[0].1;
    for v in present() {
        if min.is_some_and(|m| v < m) {
            min = Some(v);
        }
        if max.is_none_or(|m| v > m) {
            max = Some(v);
        }
    }
    if min == max {
        // Room on both sides of a flat line, within the type's range.
        let (low, high) = if signed { (i64::MIN as i128, i64::MAX as i128) } else { (0, u64::MAX as i128) };
        min = min.map(|m| if m > low { m - 1 } else { m });
        max = max.map(|m| if m < high { m + 1 } else { m });
    }
    let shown = |v: Option<i128>| v.map_or(String::new(), |v| v.to_string());
    let interval = (points[points.len() - 1].0 - points[0].0) / (points.len() as u64 - 1).max(1);
    let (digits, unit_name) = unit(interval);
    let mut time_format = "hh:mm:ss".to_string();
    let mut time_size = time_format.len();
    if digits > 0 {
        time_format.push('.');
        time_format.push_str(unit_name);
        time_size += 1 + digits;
    }
    let range_line = |out: &mut String| {
        out.push_str(&pad(&shown(min), LABEL_WIDTH, true));
        out.push_str(&pad(&shown(max), GRAPH_WIDTH - LABEL_WIDTH, false));
        out.push('\n');
    };
    let mut out = " ".repeat(time_size + 1);
    range_line(&mut out);
    out.push_str(&pad(&time_format, time_size + 1, true));
    out.push_str(&format!("|{}|\n", "_".repeat(GRAPH_WIDTH - 2)));
    let distance = |from: Option<i128>, to: Option<i128>| match (from, to) {
        (Some(a), Some(b)) => b - a,
        _ => 0,
    };
    let span = distance(min, max);
    let zero_offset = match (min, max) {
        (Some(lo), Some(hi)) if lo < 0 && hi > 0 => {
            (GRAPH_WIDTH as f32 * (-lo) as f32 / span as f32) as usize
        }
        _ => 0,
    };
    for &(start, value) in points {
        let mut line = vec![b' '; GRAPH_WIDTH];
        line[0] = b'|';
        line[GRAPH_WIDTH - 1] = b'|';
        if zero_offset > 0 {
            line[zero_offset.min(GRAPH_WIDTH - 1)] = b'.';
        }
        out.push_str(&clock_time(start, digits));
        out.push(' ');
        match value {
            Some(v) => {
                let offset = if span != 0 {
                    ((GRAPH_WIDTH - 1) as f32 * distance(min, Some(v)) as f32 / span as f32) as i64
                } else {
                    (GRAPH_WIDTH / 2) as i64
                };
                line[offset.clamp(0, GRAPH_WIDTH as i64 - 1) as usize] = b'*';
                out.push_str(&String::from_utf8_lossy(&line));
                out.push_str(&format!(" {v}\n"));
            }
            None => {
                out.push_str(&String::from_utf8_lossy(&line));
                out.push_str(" -\n");
            }
        }
    }
    let mut bottom = "_".repeat(GRAPH_WIDTH - 2);
    bottom.insert(0, 'v');
    bottom.push('v');
    out.push_str(&format!("{} {bottom}\n", " ".repeat(time_size)));
    out.push_str(&" ".repeat(time_size + 1));
    range_line(&mut out);
    out.into_bytes()
}

/// The JSON points, without spaces as 0.27.1 writes them:
/// `[{"interval_start":"1970-01-01 00:00:00.500000000","value":9},...]`, intervals without a value left out;
/// times in UTC, as C++'s `operator<<` of a `system_clock` time prints them.
pub fn json(points: &[Point]) -> Vec<u8> {
    let items: Vec<String> = points
        .iter()
        .filter_map(|&(start, value)| {
            value.map(|v| format!("{{\"interval_start\":\"{}\",\"value\":{v}}}", utc(start)))
        })
        .collect();
    format!("[{}]", items.join(",")).into_bytes()
}

/// `YYYY-MM-DD HH:MM:SS.nnnnnnnnn` in UTC.
fn utc(nanos: u64) -> String {
    let seconds = nanos / 1_000_000_000;
    let (days, day_seconds) = ((seconds / 86_400) as i64, seconds % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:09}",
        day_seconds / 3600,
        day_seconds / 60 % 60,
        day_seconds % 60,
        nanos % 1_000_000_000
    )
}

/// The value of one key's series.
pub fn value(points: Vec<Point>, series: &Tseries) -> Value {
    Value::Tseries { points, signed: series.signed }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_points_without_spaces() {
        // bpftrace 0.27.1 -f json -e 'interval:ms:100 { @t = tseries(5, 100ms, 3); } interval:ms:350 { exit(); }'
        // printed `[{"interval_start":"2026-12-05 19:12:38.300000000","value":5},{...}]`.
        let points = [(500_000_000, Some(5)), (600_000_000, None), (700_000_000, Some(-2))];
        assert_eq!(
            String::from_utf8(json(&points)).unwrap(),
            r#"[{"interval_start":"1970-01-01 00:00:00.500000000","value":5},{"interval_start":"1970-01-01 00:00:00.700000000","value":-2}]"#
        );
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(500_000_000), "1970-01-01 00:00:00.500000000");
        assert_eq!(utc(1_709_251_199_000_000_001), "2024-02-29 23:59:59.000000001");
    }
}
