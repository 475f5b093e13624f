//! One kernel value merged into another as the aggregation would have had both come to one key: a map's
//! per-CPU values folded into one (`decode`), and the entries of one stack under several handles (copied
//! stacks, `runtime/copied_stacks.rs`). Values are as the kernel holds them: native-endian words.

use crate::sema::maps::{Agg, MapDecl, MapValue};

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
    match &decl.value {
        MapValue::Plain(_) if decl.counter => set_word(into, 0, word(into, 0).wrapping_add(word(from, 0))),
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
}
