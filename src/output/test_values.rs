//! Values built as the BPF side would count them, for the formatters' tests.

use super::value::{hist_bucket_index, lhist_bucket_index, lhist_slots, Value};

pub fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap()
}

/// A hist value built from samples.
pub fn hist(samples: &[i64]) -> Value {
    let mut counts = vec![0; 65];
    for &s in samples {
        counts[hist_bucket_index(s)] += 1;
    }
    Value::Hist(counts)
}

/// An lhist value built from samples.
pub fn lhist(samples: &[i64], min: i64, max: i64, step: i64) -> Value {
    let mut counts = vec![0; lhist_slots(min, max, step)];
    for &s in samples {
        counts[lhist_bucket_index(s, min, max, step)] += 1;
    }
    Value::Lhist { min, max, step, counts }
}
