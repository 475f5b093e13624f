//! Which container and which pod a cgroup v2 path is about, from the names container runtimes and the kubelet
//! give their cgroups: a pure function of the path ([`identity`]), and `container_id()`'s value, the id of the
//! container whose cgroup a cgroup id is ([`container_id`]).
//!
//! The shapes known (the last container id in the path wins, so a container nested in another is the inner one):
//! - Docker: `docker-<id>.scope` (systemd driver), `/docker/<id>` (cgroupfs driver);
//! - containerd: `cri-containerd-<id>.scope`; CRI-O: `crio-<id>.scope` (not `crio-conmon-<id>.scope`, its
//!   monitor); Podman: `libpod-<id>.scope`, and its `libpod-<id>.scope/container` child;
//! - the kubelet's pods: `kubepods-<qos>-pod<uid with _ for ->.slice` (systemd driver), `kubepods/<qos>/pod<uid>`
//!   (cgroupfs driver), guaranteed pods without the QoS level; a container of a pod under the cgroupfs driver is
//!   a bare `<id>` below its pod.

/// What a cgroup's path says of it; empty for a cgroup that is no container's (`/user.slice/...`, `/`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// The container's full id: 64 lowercase hex digits.
    pub container_id: Option<String>,
    /// The runtime the path's naming shows.
    pub runtime: Option<Runtime>,
    /// The pod's uid as Kubernetes writes it (`12345678-1234-1234-1234-123456789abc`; a static pod's is 32 hex
    /// digits without dashes).
    pub pod_uid: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    Docker,
    Containerd,
    Crio,
    Podman,
}

/// The identity `path` (a cgroup v2 path, `/` its root) names; never fails, empty where nothing matches.
pub fn identity(path: &str) -> Identity {
    let mut found = Identity::default();
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    for (i, part) in parts.iter().enumerate() {
        if let Some(uid) = pod_uid(part) {
            found.pod_uid = Some(uid);
            continue;
        }
        let parent = i.checked_sub(1).map(|p| parts[p]);
        if let Some((id, runtime)) = container(part, parent, found.pod_uid.is_some()) {
            found.container_id = Some(id.to_string());
            found.runtime = runtime;
        }
    }
    found
}

/// The container id a cgroup `path` names, or an empty string.
pub fn id_of_path(path: &str) -> String {
    identity(path).container_id.unwrap_or_default()
}

/// `container_id(id)`'s value: the id of the container whose cgroup v2 the cgroup `id` is, or empty.
pub fn container_id(cgroup_id: u64) -> String {
    v2_path(cgroup_id).map(|path| id_of_path(&path)).unwrap_or_default()
}

/// The path of cgroup `id` in the cgroup v2 hierarchy (`/docker/<id>`), where it is there.
pub fn v2_path(cgroup_id: u64) -> Option<String> {
    let paths = super::cgroup::paths(cgroup_id, "unified");
    paths.strip_prefix("unified:").map(String::from)
}

/// A container's id and runtime from one path component; `parent` the component above it, `in_pod` whether a
/// pod's component came before (where the cgroupfs driver puts a bare id).
fn container<'a>(part: &'a str, parent: Option<&str>, in_pod: bool) -> Option<(&'a str, Option<Runtime>)> {
    if let Some(scope) = part.strip_suffix(".scope") {
        for (prefix, runtime) in [
            ("docker-", Runtime::Docker),
            ("cri-containerd-", Runtime::Containerd),
            ("crio-", Runtime::Crio),
            ("libpod-", Runtime::Podman),
        ] {
            if let Some(id) = scope.strip_prefix(prefix).filter(|id| is_container_id(id)) {
                return Some((id, Some(runtime)));
            }
        }
        return None;
    }
    if !is_container_id(part) {
        return None;
    }
    match parent {
        Some("docker") => Some((part, Some(Runtime::Docker))),
        _ if in_pod => Some((part, None)),
        _ => None,
    }
}

/// A pod's uid from its cgroup's name: `pod<uid>` (cgroupfs) or `kubepods[-qos]-pod<uid_>.slice` (systemd).
fn pod_uid(part: &str) -> Option<String> {
    let uid = match part.strip_suffix(".slice") {
        Some(slice) if slice.starts_with("kubepods") => slice.rsplit_once("-pod")?.1.replace('_', "-"),
        Some(_) => return None,
        None => part.strip_prefix("pod")?.to_string(),
    };
    is_pod_uid(&uid).then_some(uid)
}

/// `8-4-4-4-12` hex digits, or 32 without dashes (a static pod's uid is a hash of its manifest).
fn is_pod_uid(uid: &str) -> bool {
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    let groups: Vec<&str> = uid.split('-').collect();
    match groups[..] {
        [a, b, c, d, e] => hex(a, 8) && hex(b, 4) && hex(c, 4) && hex(d, 4) && hex(e, 12),
        [whole] => hex(whole, 32),
        _ => false,
    }
}

fn is_container_id(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "18105278c658ff9cf2f2c93960e6b97731ee871ca841f1908c4b0863d677384f";
    const UID: &str = "12345678-1234-1234-1234-123456789abc";
    const UID_: &str = "12345678_1234_1234_1234_123456789abc";

    fn is(path: &str, id: Option<&str>, runtime: Option<Runtime>, pod: Option<&str>) {
        let want = Identity { container_id: id.map(String::from), runtime, pod_uid: pod.map(String::from) };
        assert_eq!(identity(path), want, "{path}");
    }

    #[test]
    fn docker_under_either_driver() {
        is(&format!("/docker/{ID}"), Some(ID), Some(Runtime::Docker), None);
        is(&format!("/system.slice/docker-{ID}.scope"), Some(ID), Some(Runtime::Docker), None);
        // Docker in Docker: the inner container.
        let inner = "a".repeat(64);
        is(&format!("/docker/{ID}/docker/{inner}"), Some(&inner), Some(Runtime::Docker), None);
        // The daemon itself and its cgroup parent are no container.
        is("/system.slice/docker.service", None, None, None);
        is("/docker", None, None, None);
    }

    #[test]
    fn kubepods_under_the_systemd_driver() {
        for qos in ["besteffort", "burstable"] {
            let path = format!(
                "/kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{UID_}.slice/cri-containerd-{ID}.scope"
            );
            is(&path, Some(ID), Some(Runtime::Containerd), Some(UID));
        }
        // Guaranteed: no QoS level; CRI-O.
        is(
            &format!("/kubepods.slice/kubepods-pod{UID_}.slice/crio-{ID}.scope"),
            Some(ID),
            Some(Runtime::Crio),
            Some(UID),
        );
        // The pod's own cgroup, and CRI-O's monitor, name no container.
        is(&format!("/kubepods.slice/kubepods-pod{UID_}.slice"), None, None, Some(UID));
        is(
            &format!("/kubepods.slice/kubepods-pod{UID_}.slice/crio-conmon-{ID}.scope"),
            None,
            None,
            Some(UID),
        );
        // Docker as the kubelet's runtime (dockershim, cri-dockerd).
        is(
            &format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/docker-{ID}.scope"),
            Some(ID),
            Some(Runtime::Docker),
            Some(UID),
        );
        is("/kubepods.slice/kubepods-burstable.slice", None, None, None);
    }

    #[test]
    fn kubepods_under_the_cgroupfs_driver() {
        is(&format!("/kubepods/besteffort/pod{UID}/{ID}"), Some(ID), None, Some(UID));
        is(&format!("/kubepods/burstable/pod{UID}/{ID}"), Some(ID), None, Some(UID));
        is(&format!("/kubepods/pod{UID}/{ID}"), Some(ID), None, Some(UID));
        // A static pod's uid is a hash without dashes.
        let hash = "5b1d9b9e3c6a4e1f8a2b3c4d5e6f7a8b";
        is(&format!("/kubepods/pod{hash}/{ID}"), Some(ID), None, Some(hash));
        // A bare id outside any pod or /docker is not taken for a container.
        is(&format!("/something/{ID}"), None, None, None);
    }

    #[test]
    fn podman() {
        is(&format!("/machine.slice/libpod-{ID}.scope"), Some(ID), Some(Runtime::Podman), None);
        is(&format!("/machine.slice/libpod-{ID}.scope/container"), Some(ID), Some(Runtime::Podman), None);
        let rootless = format!("/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope");
        is(&rootless, Some(ID), Some(Runtime::Podman), None);
    }

    #[test]
    fn no_container() {
        for path in [
            "/",
            "",
            "/user.slice/user-1000.slice/session-3.scope",
            "/system.slice/containerd.service",
            "/init.scope",
            "/docker-short.scope",
            &format!("/system.slice/docker-{}.scope", ID.to_uppercase()),
            &format!("/system.slice/docker-{ID}0.scope"),
            "/kubepods.slice/kubepods-podnot_a_uid.slice",
            "/podman/pod12345678",
        ] {
            is(path, None, None, None);
        }
        assert_eq!(id_of_path("/"), "");
    }

    /// Random strings made of the pieces the names are built from, and random bytes: no panic.
    #[test]
    fn random_paths_never_panic() {
        let pieces = [
            "/",
            "docker",
            "-",
            ".scope",
            ".slice",
            "kubepods",
            "pod",
            "_",
            ID,
            UID,
            UID_,
            "crio-",
            "libpod-",
            "cri-containerd-",
            "é",
            "\0",
            "",
            "//",
        ];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let mut path = String::new();
            for _ in 0..next() % 12 {
                if next() % 5 == 0 {
                    path.push(char::from_u32((next() % 0x800) as u32).unwrap_or('x'));
                } else {
                    path.push_str(pieces[(next() as usize) % pieces.len()]);
                }
            }
            let found = identity(&path);
            if let Some(id) = found.container_id {
                assert!(is_container_id(&id), "{path:?}: {id}");
            }
        }
    }
}
