//! steadytrace's own health as metric families, beside the script's maps. None of these names starts
//! with `steadytrace_map_`, which is the maps' prefix, so that no map name can collide with them.

use super::exposition::{Family, Kind, Number, Sample};

/// The health figures of one scrape.
#[derive(Debug, Default)]
pub struct Health {
    /// Output records the full ring buffer refused.
    pub lost_events: u64,
    pub probes_attached: u64,
    /// (went offline, came online), as seen while per-CPU perf probes are kept.
    pub cpu_transitions: Option<(u64, u64)>,
    /// Per-CPU perf events brought back after hotplug, by how: reopened, reenabled, new_cpu, moved.
    pub revivals: Option<[(&'static str, u64); 4]>,
    /// Interval periods skipped because the timer thread woke up too late, by probe.
    pub skipped_periods: Vec<(String, u64)>,
    /// Map updates that failed because the map was full, by map.
    pub dropped_updates: Vec<(String, u64)>,
    /// Keys left out of this scrape by `--metrics-max-keys`, by map.
    pub keys_left_out: Vec<(String, u64)>,
    /// How long this scrape took reading the maps.
    pub scrape_seconds: f64,
    /// The endpoint's own requests, this scrape among them.
    pub endpoint: EndpointCounts,
}

/// Scrapes the endpoint served, and requests it refused by reason (`unauthorized`, `tls_handshake`, ...),
/// since start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointCounts {
    pub served: u64,
    pub refused: Vec<(&'static str, u64)>,
}

impl Health {
    pub fn families(&self) -> Vec<Family> {
        let one = |value: u64| vec![(None, Number::Int(value.into()))];
        let by = |samples: &[(String, u64)]| {
            samples.iter().map(|(label, n)| (Some(label.clone()), Number::Int((*n).into()))).collect()
        };
        let mut families = vec![
            family(
                "steadytrace_lost_events",
                "Output records lost because the ring buffer was full.",
                Kind::Counter,
                "",
                one(self.lost_events),
            ),
            family(
                "steadytrace_probes_attached",
                "Probes attached and running.",
                Kind::Gauge,
                "",
                one(self.probes_attached),
            ),
            family(
                "steadytrace_interval_periods_skipped",
                "Interval periods skipped because the timer thread woke up more than a period late.",
                Kind::Counter,
                "probe",
                by(&self.skipped_periods),
            ),
            family(
                "steadytrace_dropped_map_updates",
                "Map updates that failed because the map was full.",
                Kind::Counter,
                "map",
                by(&self.dropped_updates),
            ),
            family(
                "steadytrace_metrics_keys_left_out",
                "Keys of a map left out of this scrape by --metrics-max-keys.",
                Kind::Gauge,
                "map",
                by(&self.keys_left_out),
            ),
            family(
                "steadytrace_scrape_duration_seconds",
                "Seconds this scrape took reading the maps.",
                Kind::Gauge,
                "",
                vec![(None, Number::Float(self.scrape_seconds))],
            ),
            family(
                "steadytrace_metrics_scrapes",
                "Scrapes the metrics endpoint answered, this one among them.",
                Kind::Counter,
                "",
                one(self.endpoint.served),
            ),
            family(
                "steadytrace_metrics_requests_refused",
                "Requests the metrics endpoint refused, by reason.",
                Kind::Counter,
                "reason",
                self.endpoint
                    .refused
                    .iter()
                    .map(|(reason, n)| (Some(reason.to_string()), Number::Int((*n).into())))
                    .collect(),
            ),
        ];
        if let Some((offline, online)) = self.cpu_transitions {
            let samples = [("offline", offline), ("online", online)];
            families.push(family(
                "steadytrace_cpu_transitions",
                "CPU hotplug transitions seen while per-CPU perf probes are kept.",
                Kind::Counter,
                "to",
                samples.iter().map(|(to, n)| (Some(to.to_string()), Number::Int((*n).into()))).collect(),
            ));
        }
        if let Some(revivals) = self.revivals {
            families.push(family(
                "steadytrace_perf_event_revivals",
                "Per-CPU perf events brought back after CPU hotplug, by how.",
                Kind::Counter,
                "how",
                revivals.iter().map(|(how, n)| (Some(how.to_string()), Number::Int((*n).into()))).collect(),
            ));
        }
        families
    }
}

/// A family of samples by one label (`label`, the value beside each sample), or of one unlabelled sample.
fn family(name: &str, help: &str, kind: Kind, label: &str, samples: Vec<(Option<String>, Number)>) -> Family {
    let samples = samples
        .into_iter()
        .map(|(value_of_label, value)| {
            let labels = value_of_label.map(|v| vec![(label.to_string(), v)]).unwrap_or_default();
            Sample::Value { labels, value }
        })
        .collect();
    Family { name: name.into(), help: help.into(), kind, samples }
}
