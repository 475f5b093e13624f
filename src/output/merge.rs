//! One value merged into another as the aggregation would have had both come to one key: a map's per-CPU
//! values folded into one (`decode`), the entries of one stack under several handles (copied stacks,
//! `runtime/copied_stacks.rs`), and keys that read the same once decoded (`--metrics`' series). Values are
//! as the kernel holds them, native-endian words; decoded ones are laid out so again to be merged.

use super::value::Value;
use crate::sema::maps::{Agg, MapDecl, MapValue};
use crate::sema::types::Type;

/// The 8-byte word at `at`; 0 past the end.
pub fn word(bytes: &[u8], at: usize) -> u64 {
    bytes.get(at..at + 8).map_or(0, |w| u64::from_ne_bytes(w.try_into().expect("8 bytes")))
}

fn set_word(bytes: &mut [u8], at: usize, value: u64) {
    if let Some(w) = bytes.get_mut(at..at + 8) {
        w.copy_from_slice(&value.to_ne_bytes());
    }
}

/// Merges one kernel value into another, as the aggregation would have had both come to one key.
pub fn merge(decl: &MapDecl, into: &mut [u8], from: &[u8]) {
    merge_as(&decl.value, decl.counter, into, from)
}

fn merge_as(value: &MapValue, counter: bool, into: &mut [u8], from: &[u8]) {
    match value {
        MapValue::Plain(_) if counter => set_word(into, 0, word(into, 0).wrapping_add(word(from, 0))),
        // Another plain value: the later write wins.
        MapValue::Plain(_) => into.copy_from_slice(&from[..into.len().min(from.len())]),
        MapValue::Agg(Agg::Count | Agg::Sum { .. } | Agg::Hist { .. } | Agg::Lhist { .. }) => {
            set_word(into, 0, word(into, 0).wrapping_add(word(from, 0)))
        }
        MapValue::Agg(Agg::Avg | Agg::Stats) => {
            set_word(into, 0, word(into, 0).wrapping_add(word(from, 0)));
            set_word(into, 8, word(into, 8).wrapping_add(word(from, 8)));
        }
        // `[value][set]`: a value counts only where set.
        MapValue::Agg(agg @ (Agg::Min | Agg::Max)) => {
            if word(from, 8) == 0 {
                return;
            }
            let (a, b) = (word(into, 0) as i64, word(from, 0) as i64);
            let better = if *agg == Agg::Min { b < a } else { b > a };
            if word(into, 8) == 0 || better {
                set_word(into, 0, b as u64);
                set_word(into, 8, word(from, 8));
            }
        }
        MapValue::Agg(Agg::Tseries(_)) => {}
    }
}

/// Merges a decoded value into another as [`merge`] merges the kernel's, for keys the kernel holds apart
/// that read the same once decoded (the stacks of two processes through the same functions). A plain value
/// not `counter` keeps the one merged into, as what is no number does: of two keys, neither was written
/// after the other.
pub fn merge_decoded(into: &mut Value, from: &Value, counter: bool) {
    match (into, from) {
        (Value::Hist(a), Value::Hist(b))
        | (Value::FineHist { counts: a, .. }, Value::FineHist { counts: b, .. })
        | (Value::Lhist { counts: a, .. }, Value::Lhist { counts: b, .. }) => {
            // Each bucket is an entry of its own in the kernel.
            let bucket = MapValue::Agg(Agg::Hist { bits: 0 });
            a.resize(a.len().max(b.len()), 0);
            for (a, &b) in a.iter_mut().zip(b) {
                *a = merge_words(&bucket, false, [*a, 0], [b, 0])[0];
            }
        }
        (into, from) if std::mem::discriminant(into) == std::mem::discriminant(from) => {
            let (Some((held, a)), Some((_, b))) = (as_held(into, counter), as_held(from, counter)) else {
                return;
            };
            let [first, second] = merge_words(&held, counter, a, b);
            match into {
                Value::Count(n) => *n = first,
                Value::Sum { value, .. } | Value::Int { value, .. } => *value = first,
                Value::Min(v) | Value::Max(v) => *v = first as i64,
                Value::Avg { count, total } | Value::Stats { count, total } => {
                    (*count, *total) = (first, second as i64)
                }
                _ => {}
            }
        }
        _ => {}
    }
}

/// A decoded number as the kernel held it, `[first][second]`, with what merges it there; a decoded min or
/// max was set.
fn as_held(value: &Value, counter: bool) -> Option<(MapValue, [u64; 2])> {
    Some(match *value {
        Value::Int { value, .. } if counter => (MapValue::Plain(Type::I64), [value, 0]),
        Value::Count(n) => (MapValue::Agg(Agg::Count), [n, 0]),
        Value::Sum { value, signed } => (MapValue::Agg(Agg::Sum { signed }), [value, 0]),
        Value::Min(v) => (MapValue::Agg(Agg::Min), [v as u64, 1]),
        Value::Max(v) => (MapValue::Agg(Agg::Max), [v as u64, 1]),
        Value::Avg { count, total } => (MapValue::Agg(Agg::Avg), [count, total as u64]),
        Value::Stats { count, total } => (MapValue::Agg(Agg::Stats), [count, total as u64]),
        _ => return None,
    })
}

fn merge_words(value: &MapValue, counter: bool, into: [u64; 2], from: [u64; 2]) -> [u64; 2] {
    let bytes = |[a, b]: [u64; 2]| [a.to_ne_bytes(), b.to_ne_bytes()].concat();
    let mut merged = bytes(into);
    merge_as(value, counter, &mut merged, &bytes(from));
    [word(&merged, 0), word(&merged, 8)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sema::types::Type;

    fn decl(value: MapValue) -> MapDecl {
        let span = crate::lang::Span::default();
        MapDecl {
            name: "m".into(),
            key: vec![],
            key_names: vec![],
            cgroup_parts: vec![],
            value,
            span,
            shared: false,
            counter: false,
        }
    }

    #[test]
    fn counted_plain_values_are_added_and_others_replaced() {
        let counted = MapDecl { counter: true, ..decl(MapValue::Plain(Type::I64)) };
        let mut value = pair(3, 0);
        merge(&counted, &mut value, &pair(1, 0));
        assert_eq!(word(&value, 0), 4);
        merge(&decl(MapValue::Plain(Type::I64)), &mut value, &pair(9, 0));
        assert_eq!(word(&value, 0), 9);
    }

    fn pair(a: u64, b: u64) -> Vec<u8> {
        [a.to_ne_bytes(), b.to_ne_bytes()].concat()
    }

    #[test]
    fn values_merge_as_their_aggregation_does() {
        let mut count = pair(3, 0);
        merge(&decl(MapValue::Agg(Agg::Count)), &mut count, &pair(4, 0));
        assert_eq!(word(&count, 0), 7);
        let mut avg = pair(2, 10);
        merge(&decl(MapValue::Agg(Agg::Avg)), &mut avg, &pair(3, 5));
        assert_eq!((word(&avg, 0), word(&avg, 8)), (5, 15));
        let mut min = pair(5, 1);
        merge(&decl(MapValue::Agg(Agg::Min)), &mut min, &pair(-2i64 as u64, 1));
        assert_eq!(word(&min, 0) as i64, -2);
        merge(&decl(MapValue::Agg(Agg::Min)), &mut min, &pair(-9i64 as u64, 0));
        assert_eq!(word(&min, 0) as i64, -2, "an unset value does not count");
        let mut max = pair(0, 0);
        merge(&decl(MapValue::Agg(Agg::Max)), &mut max, &pair(-4i64 as u64, 1));
        assert_eq!((word(&max, 0) as i64, word(&max, 8)), (-4, 1), "the first set value is taken");
    }

    #[test]
    fn decoded_values_merge_as_the_kernel_values_do() {
        let merged = |mut into: Value, from: Value, counter| {
            merge_decoded(&mut into, &from, counter);
            into
        };
        assert_eq!(merged(Value::Count(2), Value::Count(3), false), Value::Count(5));
        assert_eq!(merged(Value::Min(4), Value::Min(-1), false), Value::Min(-1));
        assert_eq!(merged(Value::Max(4), Value::Max(-1), false), Value::Max(4));
        let avg = merged(Value::Avg { count: 1, total: -3 }, Value::Avg { count: 2, total: 9 }, false);
        assert_eq!(avg, Value::Avg { count: 3, total: 6 });
        assert_eq!(
            merged(Value::Hist(vec![1, 2]), Value::Hist(vec![0, 1, 4]), false),
            Value::Hist(vec![1, 3, 4])
        );
        assert_eq!(merged(Value::uint(7), Value::uint(9), true), Value::uint(16));
        assert_eq!(merged(Value::uint(7), Value::uint(9), false), Value::uint(7), "set, not counted");
        assert_eq!(merged(Value::str(b"a"), Value::str(b"b"), false), Value::str(b"a"));
    }
}
