//! The CPUs online now, as the kernel lists them (`0-3,8`). Read by the runtime, which also follows their
//! changes (`runtime::cpus`), and by the privilege checks, which need one CPU to try a perf event on; and
//! running something on one of them, for what the kernel keeps on the CPU it was armed from (BPF timers).

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

/// Runs `f` on `cpu`: the calling thread is pinned there meanwhile, then given back the CPUs it had, so
/// that what `f` arms in the kernel (a pinned BPF timer's hrtimer) lives on that CPU. Fails, without
/// running `f`, where the thread may not run there (EINVAL: a CPU not up yet, or outside its cpuset).
pub fn on_cpu<T>(cpu: u32, f: impl FnOnce() -> T) -> io::Result<T> {
    use nix::sched::{sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    let mut before = CpuSet::new();
    for allowed in allowed()? {
        before.set(allowed as usize)?;
    }
    let mut only = CpuSet::new();
    only.set(cpu as usize)?;
    sched_setaffinity(Pid::from_raw(0), &only)?;
    let result = f();
    let _ = sched_setaffinity(Pid::from_raw(0), &before);
    Ok(result)
}

/// The CPUs the calling thread may run on (its affinity, within its cpuset), offline ones included:
/// `Cpus_allowed_list` of `/proc/thread-self/status`. `sched_getaffinity` leaves offline CPUs out, so a
/// mask read from it while a CPU is offline, and set again, would keep the thread off that CPU for good.
pub fn allowed() -> io::Result<BTreeSet<u32>> {
    let status = std::fs::read_to_string("/proc/thread-self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .map(parse_cpu_list)
        .ok_or_else(|| io::Error::other("/proc/thread-self/status has no Cpus_allowed_list"))
}
