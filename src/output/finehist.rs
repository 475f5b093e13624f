//! `hist(v, bits)` with `bits` from 1 to 5: each power of 2 split into `2^bits` buckets. Bucket 0 holds the
//! negative values, bucket `b` the values from the upper bound of bucket `b - 1` up to its own
//! ([`upper`]); labels as current bpftrace prints them.

/// The first value above bucket `bucket`, and its label (`K`, `M`, ... for powers of 1024 from 2^10 on).
pub fn upper(bucket: usize, bits: u32) -> (u64, String) {
    if bucket <= 2 << bits {
        return (bucket as u64, bucket.to_string());
    }
    let n = 1u64 << bits;
    let fraction = bucket as u64 & (n - 1);
    let power = ((bucket >> bits) - 1) as u32;
    let value = (n + fraction).checked_shl(power).unwrap_or(u64::MAX);
    let decade = (power / 10).min(6);
    let suffix = ["", "K", "M", "G", "T", "P", "E"][decade as usize];
    (value, format!("{}{suffix}", (n + fraction) << (power - 10 * decade)))
}

/// The text label of bucket `bucket`: `(..., 0)`, `[5]` for a bucket of one value, else `[lo, hi)`.
pub fn label(bucket: usize, bits: u32) -> String {
    if bucket == 0 {
        return "(..., 0)".to_string();
    }
    let ((low, low_label), (high, _)) = (upper(bucket - 1, bits), upper(bucket, bits));
    if high.wrapping_sub(low) == 1 {
        format!("[{low_label}]")
    } else {
        format!("[{low_label}, {})", upper(bucket, bits).1)
    }
}

/// The inclusive range of bucket `bucket` as JSON prints it (`None`: open below).
pub fn range(bucket: usize, bits: u32) -> (Option<i64>, Option<i64>) {
    if bucket == 0 {
        return (None, Some(-1));
    }
    (Some(upper(bucket - 1, bits).0 as i64), Some(upper(bucket, bits).0.wrapping_sub(1) as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_of_three_bits() {
        // Values 0 to 15 one bucket each, then 8 buckets per power of 2.
        assert_eq!(label(1, 3), "[0]");
        assert_eq!(label(16, 3), "[15]");
        assert_eq!(range(17, 3), (Some(16), Some(17)));
        assert_eq!(range(64, 3), (Some(960), Some(1023)));
        // The suffix comes with the power of 2 of the bucket size, not the value: 8 << 7 stays 1024.
        assert_eq!(label(64, 3), "[960, 1024)");
        assert_eq!(label(65, 3), "[1024, 1152)");
        assert_eq!(label(89, 3), "[8K, 9K)");
        assert_eq!(label(0, 3), "(..., 0)");
    }
}
