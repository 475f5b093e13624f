//! Script maps from userspace: read (merging per-CPU values), cleared, zeroed.

use crate::output::decode;
use crate::output::value::MapSnapshot;
use crate::sema::maps::MapDecl;
use bpf::Map;
use std::io;

/// The map's contents now.
pub fn snapshot(map: &Map, decl: &MapDecl) -> io::Result<MapSnapshot> {
    let mut entries = vec![];
    for key in map.keys() {
        let values = if decl.is_per_cpu() {
            map.percpu_values(&key)?
        } else {
            map.lookup(&key)?.into_iter().collect()
        };
        // A key deleted between listing and lookup has no values: skip it.
        if !values.is_empty() {
            entries.push((key, values));
        }
    }
    Ok(decode::snapshot(decl, entries))
}

/// Deletes every entry.
pub fn clear(map: &Map) -> io::Result<()> {
    for key in map.keys() {
        // Another CPU may delete the same key meanwhile; what matters is that it is gone.
        let _ = map.delete(&key);
    }
    Ok(())
}

/// Sets every value to zero, keeping the keys.
pub fn zero(map: &Map, decl: &MapDecl) -> io::Result<()> {
    let zeros = vec![0u8; decl.value_size()];
    for key in map.keys() {
        if decl.is_per_cpu() {
            let cpus = map.percpu_values(&key)?.len();
            map.update_percpu(&key, &vec![zeros.clone(); cpus])?;
        } else {
            map.update(&key, &zeros)?;
        }
    }
    Ok(())
}
