//! The exposition text, written to the two specifications: OpenMetrics 1.0 and Prometheus's classic text
//! format 0.0.4. Written here rather than by prometheus-client (tried first): its 0.24 writes `&str` label
//! values unescaped (one `"` in a `comm` made the whole scrape unparseable), spells the top bucket `inf`,
//! always writes a histogram's `_sum` (bpftrace's histograms have none, and OpenMetrics forbids NaN), and
//! writes OpenMetrics only. What the formats need of the families served here is small: counters, gauges
//! and histograms, escaped label values, exact integers.

use super::Format;
use std::fmt::Write;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// A sample's value: integers are written exactly (a u64 does not fit an f64).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    Int(i128),
    Float(f64),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Sample {
    Value {
        labels: Vec<(String, String)>,
        value: Number,
    },
    /// `buckets`: (inclusive upper bound, count in that bucket), in order; the last bound is +∞.
    Histogram {
        labels: Vec<(String, String)>,
        buckets: Vec<(f64, u64)>,
        sum: Option<Number>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    /// Without a counter's `_total`.
    pub name: String,
    pub help: String,
    pub kind: Kind,
    pub samples: Vec<Sample>,
}

impl Family {
    /// The series names this family writes.
    pub fn series_names(name: &str) -> [String; 5] {
        ["", "_total", "_bucket", "_count", "_sum"].map(|suffix| format!("{name}{suffix}"))
    }
}

/// `families` as the exposition text in `format`.
pub fn write(families: &[Family], format: Format) -> String {
    let mut text = String::new();
    for family in families {
        write_family(&mut text, family, format);
    }
    if format == Format::OpenMetrics {
        text.push_str("# EOF\n");
    }
    text
}

fn write_family(text: &mut String, family: &Family, format: Format) {
    let (type_name, sample_name) = match (family.kind, format) {
        // OpenMetrics names the family without `_total`; the classic format names it as its samples.
        (Kind::Counter, Format::OpenMetrics) => (family.name.clone(), format!("{}_total", family.name)),
        (Kind::Counter, Format::Text) => (format!("{}_total", family.name), format!("{}_total", family.name)),
        _ => (family.name.clone(), family.name.clone()),
    };
    let kind = match family.kind {
        Kind::Counter => "counter",
        Kind::Gauge => "gauge",
        Kind::Histogram => "histogram",
    };
    let _ = writeln!(text, "# HELP {type_name} {}", escape_help(&family.help, format));
    let _ = writeln!(text, "# TYPE {type_name} {kind}");
    for sample in &family.samples {
        match sample {
            Sample::Value { labels, value } => line(text, &sample_name, labels, None, *value),
            Sample::Histogram { labels, buckets, sum } => {
                let mut cumulative = 0u64;
                for &(bound, count) in buckets {
                    cumulative += count;
                    let le = ("le", bucket_bound(bound));
                    line(
                        text,
                        &format!("{sample_name}_bucket"),
                        labels,
                        Some(le),
                        Number::Int(cumulative.into()),
                    );
                }
                line(text, &format!("{sample_name}_count"), labels, None, Number::Int(cumulative.into()));
                if let Some(sum) = sum {
                    line(text, &format!("{sample_name}_sum"), labels, None, *sum);
                }
            }
        }
    }
}

/// One sample line: `name{labels} value`, with `extra` (a bucket's `le`) after the labels.
fn line(
    text: &mut String,
    name: &str,
    labels: &[(String, String)],
    extra: Option<(&str, String)>,
    value: Number,
) {
    text.push_str(name);
    let all = labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .chain(extra.iter().map(|(k, v)| (*k, v.as_str())));
    let mut first = true;
    for (key, value) in all {
        text.push(if first { '{' } else { ',' });
        first = false;
        let _ = write!(text, "{key}=\"{}\"", escape_label(value));
    }
    if !first {
        text.push('}');
    }
    let _ = writeln!(text, " {}", number(value));
}

/// A bucket's `le`: `+Inf`, or the bound as a float (`7.0`), the same in both formats so that one query
/// matches whichever format a scraper asked for.
fn bucket_bound(bound: f64) -> String {
    if bound == f64::INFINITY {
        "+Inf".into()
    } else if bound.fract() == 0.0 && bound.abs() < 1e15 {
        format!("{bound:.1}")
    } else {
        number(Number::Float(bound))
    }
}

fn number(value: Number) -> String {
    match value {
        Number::Int(n) => n.to_string(),
        Number::Float(f) if f.is_nan() => "NaN".into(),
        Number::Float(f) if f == f64::INFINITY => "+Inf".into(),
        Number::Float(f) if f == f64::NEG_INFINITY => "-Inf".into(),
        Number::Float(f) => f.to_string(),
    }
}

/// A label value as both formats want it: `\`, `"` and a newline escaped.
pub fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// HELP text: OpenMetrics escapes `\`, `"` and newlines, the classic format `\` and newlines.
fn escape_help(help: &str, format: Format) -> String {
    match format {
        Format::OpenMetrics => escape_label(help),
        Format::Text => help.replace('\\', "\\\\").replace('\n', "\\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn families() -> Vec<Family> {
        vec![
            Family {
                name: "a".into(),
                help: "calls.".into(),
                kind: Kind::Counter,
                samples: vec![Sample::Value {
                    labels: labels(&[("comm", "we\"ird\\x\ny")]),
                    value: Number::Int(3),
                }],
            },
            Family {
                name: "g".into(),
                help: "a gauge".into(),
                kind: Kind::Gauge,
                samples: vec![
                    Sample::Value { labels: vec![], value: Number::Int(u64::MAX.into()) },
                    Sample::Value { labels: labels(&[("k", "x{} y")]), value: Number::Float(0.25) },
                ],
            },
            Family {
                name: "h".into(),
                help: "hist".into(),
                kind: Kind::Histogram,
                samples: vec![Sample::Histogram {
                    labels: labels(&[("comm", "sh")]),
                    buckets: vec![(-1.0, 1), (7.0, 2), (f64::INFINITY, 0)],
                    sum: None,
                }],
            },
        ]
    }

    #[test]
    fn openmetrics_names_counters_without_total_escapes_values_and_ends_with_eof() {
        assert_eq!(
            write(&families(), Format::OpenMetrics),
            "# HELP a calls.\n# TYPE a counter\na_total{comm=\"we\\\"ird\\\\x\\ny\"} 3\n\
             # HELP g a gauge\n# TYPE g gauge\ng 18446744073709551615\ng{k=\"x{} y\"} 0.25\n\
             # HELP h hist\n# TYPE h histogram\n\
             h_bucket{comm=\"sh\",le=\"-1.0\"} 1\nh_bucket{comm=\"sh\",le=\"7.0\"} 3\n\
             h_bucket{comm=\"sh\",le=\"+Inf\"} 3\nh_count{comm=\"sh\"} 3\n# EOF\n"
        );
    }

    #[test]
    fn the_classic_text_names_counters_with_total_and_has_no_eof() {
        let text = write(&families(), Format::Text);
        assert!(text.starts_with("# HELP a_total calls.\n# TYPE a_total counter\na_total{"), "{text}");
        assert!(text.contains("g{k=\"x{} y\"} 0.25\n"), "{text}");
        assert!(!text.contains("# EOF"), "{text}");
    }

    #[test]
    fn a_sum_is_written_when_there_is_one() {
        let family = Family {
            name: "s".into(),
            help: "stats".into(),
            kind: Kind::Histogram,
            samples: vec![Sample::Histogram {
                labels: vec![],
                buckets: vec![(f64::INFINITY, 4)],
                sum: Some(Number::Int(10)),
            }],
        };
        assert!(write(&[family], Format::Text).ends_with("s_bucket{le=\"+Inf\"} 4\ns_count 4\ns_sum 10\n"));
    }
}
