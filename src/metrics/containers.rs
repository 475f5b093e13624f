//! The labels a map key's cgroup becomes in `--metrics`: `container_id`, `container`, `pod_uid` and `cgroup`
//! (see [`super::maps::CGROUP_LABELS`]). A cgroup id's path and what it names (`output::container`) are
//! remembered per id; a container's name is asked of Docker ([`super::docker`]) within [`DOCKER_DEADLINE`] and
//! remembered per container, its absence too. A Docker that does not answer is not asked again for
//! [`FORGOTTEN_AFTER`], so that it costs one scrape the deadline at most once in that time.

use super::docker::{self, Unreachable};
use crate::output::container::{self, Runtime};
use std::collections::HashMap;
use std::hash::Hash;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a scrape waits for Docker's answer.
pub const DOCKER_DEADLINE: Duration = Duration::from_millis(200);
/// How long a name (or its absence, or an unreachable Docker) is remembered.
pub const FORGOTTEN_AFTER: Duration = Duration::from_secs(30);
/// How long what a cgroup id names is remembered: a cgroup's path never changes, but a cgroup not found (yet)
/// is looked for again after [`FORGOTTEN_AFTER`].
const IDENTITY_KEPT: Duration = Duration::from_secs(600);
/// The most entries a cache holds; past them it starts anew.
const MOST_REMEMBERED: usize = 16_384;

/// Looks cgroups up for the labels of a scrape; one for the tracer's life.
pub struct Containers {
    socket: PathBuf,
    /// cgroup id → its v2 path (`None`: not found) and what the path names.
    identities: Mutex<Cache<u64, Option<(String, container::Identity)>>>,
    /// container id → its name (`None`: Docker knows none).
    names: Mutex<Cache<String, Option<String>>>,
    /// Docker was unreachable then: not asked again until [`FORGOTTEN_AFTER`] later.
    docker_down: Mutex<Option<Instant>>,
}

impl Default for Containers {
    fn default() -> Self {
        Containers::with_socket(docker::SOCKET.into())
    }
}

impl Containers {
    pub fn with_socket(socket: PathBuf) -> Containers {
        Containers {
            socket,
            identities: Mutex::default(),
            names: Mutex::default(),
            docker_down: Mutex::default(),
        }
    }

    /// The values of [`super::maps::CGROUP_LABELS`] for cgroup `id`: the container's id, its name, the pod's
    /// uid (each absent where there is none, or no name is known), and the cgroup's v2 path (its id, where the
    /// cgroup is gone or not in the v2 hierarchy).
    pub fn labels(&self, id: u64) -> [Option<String>; 4] {
        let found = lock(&self.identities).get(&id);
        let found = found.unwrap_or_else(|| {
            let found = container::v2_path(id).map(|path| {
                let identity = container::identity(&path);
                (path, identity)
            });
            let kept = if found.is_some() { IDENTITY_KEPT } else { FORGOTTEN_AFTER };
            lock(&self.identities).put(id, found.clone(), kept);
            found
        });
        let Some((path, identity)) = found else { return [None, None, None, Some(id.to_string())] };
        let name = identity.container_id.as_deref().and_then(|cid| self.name(cid, identity.runtime));
        [identity.container_id, name, identity.pod_uid, Some(path)]
    }

    /// The container's name, where Docker runs it (or the path does not say which runtime does).
    fn name(&self, id: &str, runtime: Option<Runtime>) -> Option<String> {
        if !matches!(runtime, None | Some(Runtime::Docker)) {
            return None;
        }
        if let Some(name) = lock(&self.names).get(&id.to_string()) {
            return name;
        }
        if lock(&self.docker_down).is_some_and(|since| since.elapsed() < FORGOTTEN_AFTER) {
            return None;
        }
        match docker::container_name(&self.socket, id, DOCKER_DEADLINE) {
            Ok(name) => {
                lock(&self.names).put(id.to_string(), name.clone(), FORGOTTEN_AFTER);
                name
            }
            Err(Unreachable) => {
                *lock(&self.docker_down) = Some(Instant::now());
                None
            }
        }
    }
}

fn lock<T: Default>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Values remembered until their time is up.
struct Cache<K, V>(HashMap<K, (V, Instant)>);

impl<K, V> Default for Cache<K, V> {
    fn default() -> Self {
        Cache(HashMap::new())
    }
}

impl<K: Hash + Eq, V: Clone> Cache<K, V> {
    fn get(&self, key: &K) -> Option<V> {
        self.0.get(key).filter(|(_, until)| Instant::now() < *until).map(|(value, _)| value.clone())
    }

    fn put(&mut self, key: K, value: V, kept: Duration) {
        if self.0.len() >= MOST_REMEMBERED {
            self.0.clear();
        }
        self.0.insert(key, (value, Instant::now() + kept));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup_not_found_is_labelled_by_its_id() {
        let containers = Containers::with_socket("/nonexistent/docker.sock".into());
        // No cgroup has the largest id.
        assert_eq!(containers.labels(u64::MAX), [None, None, None, Some(u64::MAX.to_string())]);
    }

    #[test]
    fn an_unreachable_docker_is_not_asked_again_for_a_while() {
        let containers = Containers::with_socket("/nonexistent/docker.sock".into());
        let id = "a".repeat(64);
        assert_eq!(containers.name(&id, Some(Runtime::Docker)), None);
        assert!(lock(&containers.docker_down).is_some());
        assert_eq!(containers.name(&id, Some(Runtime::Containerd)), None);
    }

    #[test]
    fn the_cache_forgets() {
        let mut cache = Cache::default();
        cache.put(1, "a", Duration::ZERO);
        cache.put(2, "b", Duration::from_secs(60));
        assert_eq!((cache.get(&1), cache.get(&2)), (None, Some("b")));
    }
}
