//! The CPUs online now, as the kernel lists them (`0-3,8`). Read by the runtime, which also follows their
//! changes (`runtime::cpus`), and by the privilege checks, which need one CPU to try a perf event on.

use std::collections::BTreeSet;
use std::io;

pub const ONLINE: &str = "/sys/devices/system/cpu/online";

/// Parses a kernel CPU list such as `0-3,8`.
pub fn parse_cpu_list(text: &str) -> BTreeSet<u32> {
    let mut cpus = BTreeSet::new();
    for range in text.trim().split(',').filter(|r| !r.is_empty()) {
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        if let (Ok(first), Ok(last)) = (first.parse::<u32>(), last.parse::<u32>()) {
            cpus.extend(first..=last);
        }
    }
    cpus
}

/// The CPUs online now.
pub fn online() -> io::Result<BTreeSet<u32>> {
    Ok(parse_cpu_list(&std::fs::read_to_string(ONLINE)?))
}
