//! The two exposition formats, and which one a scraper asked for. Prometheus asks for OpenMetrics first
//! (its `Accept` header); curl, older Prometheus servers and many other scrapers ask for nothing or for the
//! classic text format (`text/plain; version=0.0.4`), which is what they get then.

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
}
