//! The kernel's clocks as a compiled program needs them.

/// CLOCK_TAI minus CLOCK_BOOTTIME in nanoseconds: the TAI clock read between two readings of the boot
/// clock, from the closest of a few tries.
pub fn tai_minus_boot() -> u64 {
    use nix::time::{clock_gettime, ClockId};
    let read =
        |clock| clock_gettime(clock).map_or(0, |t| t.tv_sec() as i128 * 1_000_000_000 + t.tv_nsec() as i128);
    (0..10)
        .map(|_| {
            let before = read(ClockId::CLOCK_BOOTTIME);
            let tai = read(ClockId::CLOCK_TAI);
            let after = read(ClockId::CLOCK_BOOTTIME);
            (after - before, tai - (before + after) / 2)
        })
        .min_by_key(|&(width, _)| width)
        .map_or(0, |(_, offset)| offset as u64)
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of `bpf_ktime_get_ns`.
pub fn monotonic_ns() -> u64 {
    let ts = nix::time::ClockId::CLOCK_MONOTONIC.now().expect("CLOCK_MONOTONIC exists on every Linux");
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}
