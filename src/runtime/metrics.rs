//! What `--metrics` reads at each scrape: its own handles on the script's maps (and the stack maps their
//! keys refer to, and the counters the programs keep), snapshotted and encoded apart from the event reader,
//! and the health the tracer's threads share.

use super::copied_stacks::SharedCopies;
use super::health::{self, Health};
use super::maps::{self, StackTable};
use crate::codegen::{Compiled, FixedMap};
use crate::metrics::containers::Containers;
use crate::metrics::health::EndpointCounts;
use crate::metrics::maps::ScrapedMap;
use crate::metrics::{self, Format, Scrape};
use crate::sema::maps::MapDecl;
use crate::sema::types::Type;
use bpf::Map;
use std::collections::HashSet;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub struct MetricsSource {
    maps: Vec<(Map, MapDecl)>,
    stack_maps: Vec<Map>,
    stack_keys: Vec<(bool, u8)>,
    lost: Map,
    dropped: Map,
    health: Arc<Health>,
    copies: SharedCopies,
    max_keys: usize,
    /// Maps already said (on stderr) to be over `max_keys`: each is said once.
    said_over_cap: Mutex<HashSet<String>>,
    /// Which container each cgroup key part is, remembered between scrapes.
    containers: Containers,
}

impl MetricsSource {
    pub fn new(
        compiled: &Compiled,
        all_maps: &[Map],
        health: Arc<Health>,
        copies: SharedCopies,
        max_keys: usize,
    ) -> io::Result<MetricsSource> {
        let maps = all_maps[compiled.layout.script_maps()]
            .iter()
            .zip(&compiled.script_maps)
            .map(|(map, decl)| Ok((map.try_clone()?, with_cgroup_ids(decl))))
            .collect::<io::Result<Vec<_>>>()?;
        let stack_maps = all_maps[compiled.layout.stack_maps()]
            .iter()
            .map(Map::try_clone)
            .collect::<io::Result<Vec<_>>>()?;
        Ok(MetricsSource {
            maps,
            stack_maps,
            stack_keys: compiled.stack_maps.clone(),
            lost: all_maps[FixedMap::Lost.index()].try_clone()?,
            dropped: all_maps[FixedMap::Dropped.index()].try_clone()?,
            health,
            copies,
            max_keys,
            said_over_cap: Mutex::default(),
            containers: Containers::default(),
        })
    }

    /// The maps and the health now (with the endpoint's own counts), in `format`; a map that cannot be read
    /// is left out of this scrape.
    pub fn scrape(&self, format: Format, endpoint: EndpointCounts) -> String {
        let started = Instant::now();
        let mut stacks = StackTable::new(&self.stack_maps, &self.stack_keys, Arc::clone(&self.copies));
        let snapshots = self
            .maps
            .iter()
            .filter_map(|(map, decl)| {
                let snapshot = maps::snapshot(map, decl, &mut stacks, maps::Reading::Live).ok()?;
                Some(ScrapedMap {
                    snapshot,
                    key_names: decl.key_names.clone(),
                    cgroup_parts: decl.cgroup_parts.clone(),
                    counter: decl.counter,
                })
            })
            .collect();
        let cgroups = |id| self.containers.labels(id);
        let (maps, keys_left_out) = metrics::maps::Maps::capped(snapshots, self.max_keys, &cgroups);
        self.say_over_cap(&keys_left_out);
        let revivals = self.health.revivals();
        let health = metrics::health::Health {
            lost_events: health::lost_records(&self.lost),
            probes_attached: self.health.probes_attached(),
            cpu_transitions: self.health.cpu_transitions_seen(),
            revivals: self.health.cpu_transitions_seen().map(|_| {
                [
                    ("reopened", revivals.reopened),
                    ("reenabled", revivals.reenabled),
                    ("new_cpu", revivals.new_cpu),
                    ("moved", revivals.moved),
                ]
            }),
            skipped_periods: self.health.skipped_periods(),
            dropped_updates: self
                .maps
                .iter()
                .map(|(_, decl)| format!("@{}", decl.name))
                .zip(health::dropped_updates(&self.dropped))
                .collect(),
            keys_left_out,
            scrape_seconds: started.elapsed().as_secs_f64(),
            endpoint,
        };
        Scrape { maps, health }.encode(format)
    }

    fn say_over_cap(&self, left_out: &[(String, u64)]) {
        let mut said = self.said_over_cap.lock().unwrap_or_else(|e| e.into_inner());
        for (map, n) in left_out {
            if said.insert(map.clone()) {
                crate::stderr!(
                    "steadytrace: --metrics: {map} has more than {} keys: the {n} of the smallest values are left out of the scrape (--metrics-max-keys raises the cap)",
                    self.max_keys
                );
            }
        }
    }
}

/// `decl` with its cgroup key parts (`cgroup_path()`, `container_id()`) read as the integers they are: the
/// metrics label them by the cgroup's id ([`Containers`]), not by the text they print as.
fn with_cgroup_ids(decl: &MapDecl) -> MapDecl {
    let mut decl = decl.clone();
    for (ty, cgroup) in decl.key.iter_mut().zip(&decl.cgroup_parts) {
        if *cgroup && matches!(ty, Type::CgroupPath { .. } | Type::ContainerId) {
            *ty = Type::U64;
        }
    }
    decl
}
