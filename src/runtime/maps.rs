//! Script maps from userspace: read (merging per-CPU values), cleared, zeroed.

use crate::output::decode::{self, StackResolver};
use crate::output::value::MapSnapshot;
use crate::sema::maps::MapDecl;
use crate::sema::types::StackType;
use crate::symbols::Symbols;
use bpf::Map;
use std::io;

/// The stacks recorded by the script's probes, symbolized on demand.
pub struct StackTable<'a> {
    /// The stack-trace maps, in the order of `keys`.
    maps: &'a [Map],
    keys: &'a [(bool, u8)],
    symbols: Symbols,
}

impl<'a> StackTable<'a> {
    pub fn new(maps: &'a [Map], keys: &'a [(bool, u8)]) -> StackTable<'a> {
        StackTable { maps, keys, symbols: Symbols::new() }
    }

    /// Names the user frames of exited processes from `journal` too.
    pub fn use_journal(
        &mut self,
        journal: std::sync::Arc<std::sync::Mutex<crate::symbols::journal::ProcessMaps>>,
    ) {
        self.symbols = Symbols::with_journal(journal);
    }
}

impl StackResolver for StackTable<'_> {
    fn symbol(&mut self, user: bool, addr: u64, pid: u32) -> String {
        if user {
            self.symbols.user_symbol(pid, addr)
        } else {
            self.symbols.kernel_symbol(addr)
        }
    }

    fn frames(&mut self, stack: &StackType, id: i64, pid: u32) -> Vec<String> {
        // A negative id is a stack the kernel could not record.
        let Ok(id) = u32::try_from(id) else { return vec![] };
        let Some(index) = self.keys.iter().position(|k| *k == (stack.user, stack.depth)) else {
            return vec![];
        };
        let Ok(Some(bytes)) = self.maps[index].lookup(&id.to_ne_bytes()) else { return vec![] };
        let addrs: Vec<u64> =
            bytes.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8]))).collect();
        if stack.user {
            self.symbols.user_stack(pid, &addrs, stack.mode)
        } else {
            self.symbols.kernel_stack(&addrs, stack.mode)
        }
    }
}

/// The map's contents now.
pub fn snapshot(map: &Map, decl: &MapDecl, stacks: &mut dyn StackResolver) -> io::Result<MapSnapshot> {
    let mut entries = vec![];
    // A key deleted while the map is walked sends the walk back to the start: keys seen again are skipped.
    let mut seen = std::collections::HashSet::new();
    for key in map.keys() {
        if !seen.insert(key.clone()) {
            continue;
        }
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
    Ok(decode::snapshot(decl, entries, stacks))
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
