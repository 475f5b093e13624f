//! `--metrics ADDR`: the script's maps, and steadytrace's own health, as Prometheus metrics.
//!
//! prometheus-client (the Prometheus project's Rust client) writes the OpenMetrics text: names, `# TYPE`
//! and `# HELP`, escaped label values and histogram series as the specification wants. This layer decides
//! what each map becomes ([`maps`]) and which health figures there are ([`health`]); [`format`] serves the
//! classic text format to scrapers that do not ask for OpenMetrics; [`server`] is the HTTP endpoint.

pub mod format;
pub mod health;
pub mod maps;
pub mod server;

pub use format::Format;
use prometheus_client::registry::Registry;

/// The default of `--metrics-max-keys`: the most keys of one map served at a scrape. Prometheus keeps
/// every label set as a series of its own; tens of thousands per family is where it starts to hurt.
pub const DEFAULT_MAX_KEYS: u64 = 10_000;

/// One scrape: the maps as read now, and the health figures.
pub struct Scrape {
    pub maps: maps::Maps,
    pub health: health::Health,
}

impl Scrape {
    /// The exposition in `format`.
    pub fn encode(self, format: Format) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self.maps));
        registry.register_collector(Box::new(self.health));
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &registry).is_err() {
            // Writing into a String fails only if a collector does; what was written is still valid.
            text.push_str("# EOF\n");
        }
        format.from_openmetrics(&text)
    }
}
