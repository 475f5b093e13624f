//! steadytrace's own health as metric families, beside the script's maps. None of these names starts
//! with `steadytrace_map_`, which is the maps' prefix, so that no map name can collide with them.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

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
}

/// One family: its name (without `_total`), help, type, and samples by one label.
struct Family<'a> {
    name: &'a str,
    help: &'a str,
    kind: MetricType,
    label: &'a str,
    samples: Vec<(String, f64)>,
}

impl Collector for Health {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let one = |value: u64| vec![(String::new(), value as f64)];
        let by = |samples: &[(String, u64)]| samples.iter().map(|(k, v)| (k.clone(), *v as f64)).collect();
        let mut families = vec![
            Family {
                name: "steadytrace_lost_events",
                help: "Output records lost because the ring buffer was full.",
                kind: MetricType::Counter,
                label: "",
                samples: one(self.lost_events),
            },
            Family {
                name: "steadytrace_probes_attached",
                help: "Probes attached and running.",
                kind: MetricType::Gauge,
                label: "",
                samples: one(self.probes_attached),
            },
            Family {
                name: "steadytrace_interval_periods_skipped",
                help: "Interval periods skipped because the timer thread woke up more than a period late.",
                kind: MetricType::Counter,
                label: "probe",
                samples: by(&self.skipped_periods),
            },
            Family {
                name: "steadytrace_dropped_map_updates",
                help: "Map updates that failed because the map was full.",
                kind: MetricType::Counter,
                label: "map",
                samples: by(&self.dropped_updates),
            },
            Family {
                name: "steadytrace_metrics_keys_left_out",
                help: "Keys of a map left out of this scrape by --metrics-max-keys.",
                kind: MetricType::Gauge,
                label: "map",
                samples: by(&self.keys_left_out),
            },
            Family {
                name: "steadytrace_scrape_duration_seconds",
                help: "Seconds this scrape took reading the maps.",
                kind: MetricType::Gauge,
                label: "",
                samples: vec![(String::new(), self.scrape_seconds)],
            },
        ];
        if let Some((offline, online)) = self.cpu_transitions {
            families.push(Family {
                name: "steadytrace_cpu_transitions",
                help: "CPU hotplug transitions seen while per-CPU perf probes are kept.",
                kind: MetricType::Counter,
                label: "to",
                samples: vec![("offline".into(), offline as f64), ("online".into(), online as f64)],
            });
        }
        if let Some(revivals) = self.revivals {
            families.push(Family {
                name: "steadytrace_perf_event_revivals",
                help: "Per-CPU perf events brought back after CPU hotplug, by how.",
                kind: MetricType::Counter,
                label: "how",
                samples: revivals.iter().map(|(how, n)| (how.to_string(), *n as f64)).collect(),
            });
        }
        for family in &families {
            let mut descriptor = encoder.encode_descriptor(family.name, family.help, None, family.kind)?;
            for (value, sample) in &family.samples {
                let labels: Vec<(&str, &str)> = match family.label {
                    "" => vec![],
                    label => vec![(label, value.as_str())],
                };
                let metric = descriptor.encode_family(&labels)?;
                match family.kind {
                    MetricType::Counter => ConstCounter::new(*sample as u64).encode(metric)?,
                    _ => ConstGauge::new(*sample).encode(metric)?,
                }
            }
        }
        Ok(())
    }
}
