//! steadytrace's own health while it traces: what the threads that keep the probes alive have done,
//! shared with `--metrics`, which reads it at each scrape. The counters the programs keep in the kernel
//! (records lost, updates dropped) are read from their maps.

use super::percpu::Revivals;
use super::timer::Timer;
use bpf::Map;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

#[derive(Default)]
pub struct Health {
    probes_attached: AtomicU64,
    /// Whether the hotplug thread runs (there are per-CPU perf probes): only then are CPUs watched.
    watching_cpus: std::sync::atomic::AtomicBool,
    cpus_went_offline: AtomicU64,
    cpus_came_online: AtomicU64,
    revivals: Mutex<Revivals>,
    /// The timer, once it runs: its per-interval counts of skipped periods.
    timer: OnceLock<Timer>,
}

impl Health {
    pub fn attached(&self, probes: usize) {
        self.probes_attached.store(probes as u64, Ordering::Relaxed);
    }

    pub fn watching_cpus(&self) {
        self.watching_cpus.store(true, Ordering::Relaxed);
    }

    pub fn cpus_changed(&self, went_offline: usize, came_online: usize) {
        self.cpus_went_offline.fetch_add(went_offline as u64, Ordering::Relaxed);
        self.cpus_came_online.fetch_add(came_online as u64, Ordering::Relaxed);
    }

    pub fn revived(&self, revivals: Revivals) {
        *self.revivals.lock().unwrap_or_else(|e| e.into_inner()) = revivals;
    }

    pub fn timer_started(&self, timer: &Timer) {
        let _ = self.timer.set(timer.clone());
    }

    pub fn probes_attached(&self) -> u64 {
        self.probes_attached.load(Ordering::Relaxed)
    }

    /// (went offline, came online) transitions the hotplug thread saw; `None` when it does not run.
    pub fn cpu_transitions_seen(&self) -> Option<(u64, u64)> {
        self.watching_cpus.load(Ordering::Relaxed).then(|| {
            (self.cpus_went_offline.load(Ordering::Relaxed), self.cpus_came_online.load(Ordering::Relaxed))
        })
    }

    pub fn revivals(&self) -> Revivals {
        *self.revivals.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Periods skipped so far per interval probe; empty before the timer runs.
    pub fn skipped_periods(&self) -> Vec<(String, u64)> {
        let counts = self.timer.get().map(Timer::counts).unwrap_or_default();
        counts.into_iter().map(|c| (c.name, c.skipped)).collect()
    }
}

/// Output records lost so far: the per-CPU counter of the `Lost` map, summed.
pub fn lost_records(lost: &Map) -> u64 {
    lost.percpu_values(&0u32.to_ne_bytes())
        .unwrap_or_default()
        .iter()
        .filter_map(|value| Some(u64::from_ne_bytes(value.get(..8)?.try_into().ok()?)))
        .sum()
}

/// Failed updates so far per script map (in the script's map order), from the `Dropped` map.
pub fn dropped_updates(dropped: &Map) -> Vec<u64> {
    dropped
        .lookup(&0u32.to_ne_bytes())
        .ok()
        .flatten()
        .unwrap_or_default()
        .chunks_exact(8)
        .map(|bytes| u64::from_ne_bytes(bytes.try_into().expect("chunks of 8")))
        .collect()
}
