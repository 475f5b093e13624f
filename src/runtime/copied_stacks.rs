//! `dw_ustack` in map keys. Each copied stack has its own handle, so a map keyed by `dw_ustack` gets a new key
//! at every event, and a 4096-key map would be full after 4096 samples. So the event loop folds: after each look
//! at the ring buffer that found copies (every 10 ms while they stream in), else every [`FOLD_EVERY`], the keys whose stacks are unwound are taken out of the kernel's map, each handle replaced by
//! the one standing for its stack, and their values merged into entries held here. Printing and `--metrics`
//! read the kernel's entries and the held ones together ([`super::maps::snapshot`]).
//!
//! What is held is what the kernel held, one value merged from every CPU and every handle of a stack, merged
//! as the aggregation merges (counts and sums added, the least of minimums, ...). A BPF program only ever
//! writes a key with a new handle, once per event, so taking a key out loses nothing: a later write makes it
//! anew, and the next fold takes that too. (Stacks the ring buffer had no room for share one handle; their
//! keys stay in the kernel's map.)

use crate::output::merge::{merge, word};
use crate::sema::maps::{MapDecl, MapValue};
use crate::sema::types::Type;
use crate::symbols::unwind::{Unwinder, NO_COPY};
use bpf::Map;
use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the event loop folds when no copies come (copies waiting for their process's mappings are tried
/// again then).
pub const FOLD_EVERY: Duration = Duration::from_millis(100);

/// The unwound stacks and the folded entries, shared by the event loop and the metrics endpoint.
#[derive(Default)]
pub struct CopiedStacks {
    pub unwinder: Unwinder,
    /// By map name: key bytes (handles made canonical) to one merged value.
    held: HashMap<String, HashMap<Vec<u8>, Vec<u8>>>,
}

pub type SharedCopies = Arc<Mutex<CopiedStacks>>;

/// Locks `copies`, also after a panic elsewhere (what it holds stays consistent between calls).
pub fn lock(copies: &SharedCopies) -> std::sync::MutexGuard<'_, CopiedStacks> {
    copies.lock().unwrap_or_else(|e| e.into_inner())
}

impl CopiedStacks {
    /// The entries held for `map`, as `(key, values)` with a single value.
    pub fn held(&self, map: &str) -> Vec<(Vec<u8>, Vec<Vec<u8>>)> {
        self.held.get(map).map_or_else(Vec::new, |entries| {
            entries.iter().map(|(key, value)| (key.clone(), vec![value.clone()])).collect()
        })
    }

    /// `clear(@m)`: drops what is held too.
    pub fn clear(&mut self, map: &str) {
        self.held.remove(map);
    }

    /// `zero(@m)`: zeroes what is held too, keeping the keys.
    pub fn zero(&mut self, map: &str) {
        for value in self.held.get_mut(map).into_iter().flat_map(|m| m.values_mut()) {
            value.fill(0);
        }
    }
}

/// Where in a key laid out as `types` the handles of `dw_ustack` stacks are.
pub fn handle_offsets(types: &[Type], base: usize) -> Vec<usize> {
    let mut offsets = vec![];
    let mut at = base;
    for ty in types {
        match ty {
            Type::Stack(stack) if stack.dwarf => offsets.push(at),
            Type::Tuple(fields) | Type::NamedTuple { fields, .. } => {
                offsets.extend(handle_offsets(fields, at))
            }
            _ => {}
        }
        at += ty.slot_size();
    }
    offsets
}

/// Whether `decl`'s values are copied stacks.
pub fn holds_copies(decl: &MapDecl) -> bool {
    matches!(&decl.value, MapValue::Plain(ty) if !handle_offsets(std::slice::from_ref(ty), 0).is_empty())
}

/// Whether `decl`'s keys hold copied stacks and its values only ever add to a key: aggregations, and plain
/// values only counted (`@[dw_ustack]++`). Another plain value may be read back by a program that would find
/// its key gone, and merging two of them would keep one: such a map keeps a key per event until printed.
pub fn folds(decl: &MapDecl) -> bool {
    !handle_offsets(&decl.key, 0).is_empty()
        && match &decl.value {
            MapValue::Agg(_) => true,
            MapValue::Plain(ty) => decl.counter && ty.is_int(),
        }
}

/// Replaces each handle in `key` by the one standing for its stack; false when one is not unwound yet.
pub fn canonical_key(unwinder: &mut Unwinder, offsets: &[usize], key: &mut [u8]) -> bool {
    for &at in offsets {
        let Some(word) = key.get_mut(at..at + 8) else { return false };
        let handle = u64::from_ne_bytes(word.try_into().expect("8 bytes"));
        if !unwinder.is_unwound(handle) {
            return false;
        }
        word.copy_from_slice(&unwinder.canonical(handle).to_ne_bytes());
    }
    true
}

/// Takes the unwound keys of `map` out of the kernel and merges them into what `copies` holds; with `forget`
/// (the only map whose keys hold copied stacks, and no map holds them as values) the handles merged into another
/// are forgotten, as nothing will ask for them again.
pub fn fold(map: &Map, decl: &MapDecl, copies: &SharedCopies, forget: bool) -> io::Result<()> {
    let offsets = handle_offsets(&decl.key, 0);
    let mut copies = lock(copies);
    copies.unwinder.retry_unwinding();
    let mut seen = std::collections::HashSet::new();
    for key in map.keys() {
        if !seen.insert(key.clone()) {
            continue;
        }
        // The key of stacks that were not copied is written by every such event: taking it out could lose an
        // update made between the program's lookup and its increment. It stays in the kernel's map.
        if offsets.iter().any(|&at| word(&key, at) == NO_COPY) {
            continue;
        }
        let mut canonical = key.clone();
        if !canonical_key(&mut copies.unwinder, &offsets, &mut canonical) {
            continue;
        }
        let values = if decl.is_per_cpu() {
            map.percpu_values(&key)?
        } else {
            map.lookup(&key)?.into_iter().collect()
        };
        if map.delete(&key).is_err() || values.is_empty() {
            continue;
        }
        if forget {
            for &at in &offsets {
                copies.unwinder.forget(word(&key, at));
            }
        }
        let held = copies.held.entry(decl.name.clone()).or_default();
        for value in values {
            match held.get_mut(&canonical) {
                Some(into) => merge(decl, into, &value),
                None => {
                    held.insert(canonical.clone(), value);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_found_in_tuples_too() {
        use crate::sema::types::StackType;
        let dw = Type::Stack(StackType::named("dw_ustack"));
        let fp = Type::Stack(StackType::named("ustack"));
        let types = [Type::U64, Type::Tuple(vec![fp, dw.clone()]), dw];
        assert_eq!(handle_offsets(&types, 0), vec![24, 40]);
    }
}
