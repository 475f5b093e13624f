//! `--metrics ADDR`: the script's maps, and steadytrace's own health, as Prometheus metrics.
//!
//! What each map becomes ([`maps`]) and which health figures there are ([`health`]), as metric families;
//! [`exposition`] writes them in the format a scraper asks for ([`format`]); [`server`] is the HTTP endpoint.

pub mod containers;
pub mod docker;
pub mod exposition;
pub mod format;
pub mod health;
pub mod maps;
pub mod server;
pub mod web_config;

pub use format::Format;

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
        let mut families = self.maps.families();
        families.extend(self.health.families());
        exposition::write(&families, format)
    }
}
