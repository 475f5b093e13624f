//! The two exposition formats, and which one a scraper asked for. Prometheus asks for OpenMetrics first
//! (its `Accept` header); curl, older Prometheus servers and many other scrapers ask for nothing or for the
//! classic text format (`text/plain; version=0.0.4`), which is what they get then.
//!
//! prometheus-client writes OpenMetrics only. For the families written here the classic text differs in
//! three ways, which [`Format::from_openmetrics`] makes: a counter's `# HELP`/`# TYPE` name carries its
//! `_total`, there is no `# EOF` line, and an empty label set is written as nothing rather than `{}`.

use std::collections::HashSet;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    Text,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics when it weighs that at least as high as plain
    /// text, the classic text otherwise (also with no header, or `*/*`).
    pub fn accepted(accept: Option<&str>) -> Format {
        let (mut openmetrics, mut text) = (None::<f32>, None::<f32>);
        for range in accept.unwrap_or_default().split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default().to_ascii_lowercase();
            let quality = parts
                .filter_map(|p| p.strip_prefix("q=").and_then(|q| q.trim().parse::<f32>().ok()))
                .next()
                .unwrap_or(1.0);
            let best = match media.as_str() {
                "application/openmetrics-text" => &mut openmetrics,
                "text/plain" => &mut text,
                _ => continue,
            };
            *best = Some(best.map_or(quality, |q| q.max(quality)));
        }
        match (openmetrics, text) {
            (Some(om), text) if om > 0.0 && om >= text.unwrap_or(0.0) => Format::OpenMetrics,
            _ => Format::Text,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
        }
    }

    /// The exposition in this format, from prometheus-client's OpenMetrics text.
    pub fn from_openmetrics(self, openmetrics: &str) -> String {
        // The encoder spells the top bucket `inf`; Prometheus reads it, but keeps the label as written, so
        // that a query for `le="+Inf"` (the specification's spelling, and every dashboard's) finds nothing.
        let openmetrics = openmetrics.replace("le=\"inf\"}", "le=\"+Inf\"}");
        if self == Format::OpenMetrics {
            return openmetrics;
        }
        let counters: HashSet<&str> = openmetrics
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
            .collect();
        let mut text = String::with_capacity(openmetrics.len());
        for line in openmetrics.lines().filter(|&line| line != "# EOF") {
            text.push_str(&classic_line(line, &counters));
            text.push('\n');
        }
        text
    }
}

/// One line of OpenMetrics as the classic text writes it.
fn classic_line(line: &str, counters: &HashSet<&str>) -> String {
    for comment in ["# HELP ", "# TYPE "] {
        if let Some(rest) = line.strip_prefix(comment) {
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            if counters.contains(name) {
                return format!("{comment}{name}_total {tail}");
            }
            return line.to_string();
        }
    }
    line.replacen("{} ", " ", 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_gets_openmetrics_and_curl_the_classic_text() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::accepted(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(Format::accepted(Some("*/*")), Format::Text);
        assert_eq!(Format::accepted(None), Format::Text);
        assert_eq!(Format::accepted(Some("text/plain;version=0.0.4")), Format::Text);
        assert_eq!(Format::accepted(Some("application/openmetrics-text;q=0.2, text/plain")), Format::Text);
        assert_eq!(Format::accepted(Some("application/openmetrics-text;q=0")), Format::Text);
    }

    #[test]
    fn the_classic_text_names_counters_with_total_and_has_no_eof() {
        let openmetrics = "# HELP a_calls calls.\n# TYPE a_calls counter\na_calls_total{} 3\n# HELP g gauge.\n# TYPE g gauge\ng{key=\"x\"} 1.5\nh_bucket{le=\"inf\"} 2\n# EOF\n";
        assert_eq!(
            Format::Text.from_openmetrics(openmetrics),
            "# HELP a_calls_total calls.\n# TYPE a_calls_total counter\na_calls_total 3\n# HELP g gauge.\n# TYPE g gauge\ng{key=\"x\"} 1.5\nh_bucket{le=\"+Inf\"} 2\n"
        );
        assert!(Format::OpenMetrics
            .from_openmetrics(openmetrics)
            .ends_with("h_bucket{le=\"+Inf\"} 2\n# EOF\n"));
    }
}
