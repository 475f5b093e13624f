//! `--metrics ADDR` (issue 24, in progress): the script's maps as Prometheus metrics.

pub mod exposition;
pub mod server;
