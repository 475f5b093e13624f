//! Script maps from userspace: read (merging per-CPU values), cleared, zeroed.

use super::copied_stacks::{self, CopiedStacks, SharedCopies};
use crate::output::decode::{self, StackResolver};
use crate::output::value::MapSnapshot;
use crate::sema::maps::{MapDecl, MapValue};
use crate::sema::types::StackType;
use crate::symbols::journal::Journal;
use crate::symbols::unwind::StackCopy;
use crate::symbols::{DebugDirs, Symbols};
use bpf::Map;
use std::collections::HashMap;
use std::io;

/// The stacks recorded by the script's probes, symbolized on demand.
pub struct StackTable<'a> {
    /// The stack-trace maps, in the order of `keys`.
    maps: &'a [Map],
    keys: &'a [(bool, u8)],
    symbols: Symbols,
    /// `dw_ustack`'s copies, unwound, and the entries folded out of maps keyed by them.
    copies: SharedCopies,
}

impl<'a> StackTable<'a> {
    pub fn new(maps: &'a [Map], keys: &'a [(bool, u8)], copies: SharedCopies) -> StackTable<'a> {
        StackTable { maps, keys, symbols: Symbols::new(), copies }
    }

    /// Names the user frames of exited processes from `journal` too, and unwinds their copied stacks.
    pub fn use_journal(&mut self, journal: Journal) {
        let debug_dirs = self.symbols.debug_dirs().clone();
        self.symbols = Symbols::with_journal(journal.clone());
        self.symbols.use_debug_dirs(debug_dirs);
        copied_stacks::lock(&self.copies).unwinder.use_journal(journal);
    }

    /// Looks for binaries' separate debug files in `debug_dirs` (`--debuginfo`) first, for symbols and for
    /// copied stacks' `.debug_frame`.
    pub fn use_debug_dirs(&mut self, debug_dirs: DebugDirs) {
        self.symbols.use_debug_dirs(debug_dirs.clone());
        copied_stacks::lock(&self.copies).unwinder.use_debug_dirs(debug_dirs);
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

    fn take_stack_copy(&mut self, copy: StackCopy) {
        copied_stacks::lock(&self.copies).unwinder.take(copy);
    }

    fn frames(&mut self, stack: &StackType, id: i64, pid: u32) -> Vec<String> {
        if stack.dwarf {
            let unwound = copied_stacks::lock(&self.copies).unwinder.frames(id as u64);
            return match unwound {
                Some((pid, addrs)) => self.symbols.user_stack(pid, &addrs, stack.mode),
                None => vec![],
            };
        }
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

/// A key's bytes and its value per CPU (one value for a map shared by all CPUs).
type Entry = (Vec<u8>, Vec<Vec<u8>>);

/// When a map is read: while tracing, or at its end, when every record has been taken from the ring buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// Entries whose copied stacks (`dw_ustack`) are still in the ring buffer are left for a later read.
    Live,
    Final,
}

/// The map's contents now.
pub fn snapshot(
    map: &Map,
    decl: &MapDecl,
    stacks: &mut StackTable<'_>,
    reading: Reading,
) -> io::Result<MapSnapshot> {
    let offsets = copied_stacks::handle_offsets(&decl.key, 0);
    let entries = if offsets.is_empty() {
        entries(map, decl)?
    } else {
        // Held while the kernel's map is read, so that no fold moves an entry from it to the held ones
        // meanwhile (read twice, or not at all).
        let mut copies = copied_stacks::lock(&stacks.copies);
        let entries = entries(map, decl)?;
        with_copied_stacks(decl, &offsets, entries, &mut copies, reading)
    };
    Ok(decode::snapshot(decl, entries, stacks))
}

/// The kernel's entries of `map`, each with its value per CPU (one for a map shared by all).
fn entries(map: &Map, decl: &MapDecl) -> io::Result<Vec<Entry>> {
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
    Ok(entries)
}

/// Keys holding a `dw_ustack` hold a handle per copied stack, so one stack is under as many keys as times it
/// was taken: each handle is replaced by the one that stands for its stack, the entries folded out of the
/// kernel's map are added, and the values of keys that become equal are merged as the values of several CPUs
/// are.
fn with_copied_stacks(
    decl: &MapDecl,
    offsets: &[usize],
    entries: Vec<Entry>,
    copies: &mut CopiedStacks,
    reading: Reading,
) -> Vec<Entry> {
    let held = copies.held(&decl.name);
    let mut merged: Vec<Entry> = vec![];
    let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
    for (mut key, values) in entries.into_iter().chain(held) {
        let handles = || offsets.iter().map(|&at| word(&key, at));
        if reading == Reading::Live && !handles().all(|h| copies.unwinder.has_arrived(h)) {
            continue;
        }
        // A handle still unwinding is unwound now, with whatever is known.
        for handle in handles() {
            let _ = copies.unwinder.frames(handle);
        }
        copied_stacks::canonical_key(&mut copies.unwinder, offsets, &mut key);
        match index.get(&key) {
            // Values of several CPUs are merged when decoded; a plain value has one, merged here.
            Some(&i) if matches!(decl.value, MapValue::Plain(_)) => {
                if let Some(into) = merged[i].1.first_mut() {
                    for value in &values {
                        crate::output::merge::merge(decl, into, value);
                    }
                }
            }
            Some(&i) => merged[i].1.extend(values),
            None => {
                index.insert(key.clone(), merged.len());
                merged.push((key, values));
            }
        }
    }
    merged
}

fn word(bytes: &[u8], at: usize) -> u64 {
    bytes.get(at..at + 8).map_or(0, |w| u64::from_ne_bytes(w.try_into().expect("8 bytes")))
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
