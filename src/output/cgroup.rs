//! `cgroup_path()` values: a cgroup id as its paths in the mounted cgroup hierarchies, as current bpftrace
//! prints them: `unified:/user.slice/...` for cgroup v2, then each v1 hierarchy by its mount point's name,
//! in name order, joined by `,`; hierarchies without that cgroup are left out.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The paths of cgroup `id` in the hierarchies whose names match `filter` (`*` matches any run of
/// characters; empty matches every hierarchy).
pub fn paths(id: u64, filter: &str) -> String {
    let mut found = vec![];
    for (name, root) in hierarchies() {
        if filter.is_empty() || wildcard_match(filter, &name) {
            if let Some(path) = path_in(id, &root) {
                found.push(format!("{name}:{path}"));
            }
        }
    }
    found.join(",")
}

/// The mounted hierarchies: the cgroup v2 one named `unified` first, then v1 ones by mount point name, each once.
fn hierarchies() -> Vec<(String, PathBuf)> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let (mut v2, mut v1) = (vec![], vec![]);
    for line in mounts.lines() {
        let mut fields = line.split(' ');
        let (Some(kind), Some(dir)) = (fields.next(), fields.next()) else { continue };
        let dir = PathBuf::from(dir);
        if !dir.is_dir() {
            continue;
        }
        match kind {
            "cgroup2" => v2.push(("unified".to_string(), dir)),
            "cgroup" => {
                let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                v1.push((name, dir));
            }
            _ => {}
        }
    }
    // A hierarchy mounted twice (bind mounts into a chroot or a container) is still one hierarchy.
    v2.truncate(1);
    v1.sort();
    v1.dedup_by(|a, b| a.0 == b.0);
    v2.extend(v1);
    v2
}

/// The path below `root` of the directory whose inode is `id` (`/` for the root itself), remembered.
fn path_in(id: u64, root: &Path) -> Option<String> {
    static KNOWN: Mutex<Option<HashMap<(u64, PathBuf), String>>> = Mutex::new(None);
    let key = (id, root.to_path_buf());
    if let Some(path) = KNOWN.lock().ok()?.get_or_insert_with(HashMap::new).get(&key) {
        // A cgroup removed and its inode reused elsewhere: look again.
        let still = std::fs::metadata(root.join(path.trim_start_matches('/'))).is_ok_and(|m| m.ino() == id);
        if still {
            return Some(path.clone());
        }
    }
    let found = if std::fs::metadata(root).ok()?.ino() == id {
        Some("/".to_string())
    } else {
        search(id, root, root)
    };
    if let (Some(path), Ok(mut known)) = (&found, KNOWN.lock()) {
        known.get_or_insert_with(HashMap::new).insert(key, path.clone());
    }
    found
}

fn search(id: u64, root: &Path, dir: &Path) -> Option<String> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let Ok(kind) = entry.file_type() else { continue };
        if !kind.is_dir() {
            continue;
        }
        let path = entry.path();
        if entry.metadata().is_ok_and(|m| m.ino() == id) {
            return Some(format!("/{}", path.strip_prefix(root).ok()?.display()));
        }
        if let Some(found) = search(id, root, &path) {
            return Some(found);
        }
    }
    None
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters.
fn wildcard_match(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, rest)) => {
            let Some(tail) = name.strip_prefix(head) else { return false };
            (0..=tail.len()).filter(|&i| tail.is_char_boundary(i)).any(|i| wildcard_match(rest, &tail[i..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert!(wildcard_match("unified", "unified"));
        assert!(wildcard_match("uni*", "unified"));
        assert!(wildcard_match("*fie*", "unified"));
        assert!(!wildcard_match("cpu*", "unified"));
        assert!(wildcard_match("*", ""));
    }
}
