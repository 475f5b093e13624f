//! The machine's state around a run, so that a report says whether it was measured on a quiet machine:
//! the kernel, the online CPUs, load average and runnable tasks before and after, how much of the CPUs
//! other programs used meanwhile, and steal time where the hypervisor reports it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Others using more than this share of the online CPUs during the run make it a busy machine.
const BUSY_SHARE: f64 = 0.2;
/// Steal above this share of CPU time makes it a busy machine too: the hypervisor ran something else, and
/// it takes a virtual CPU away for milliseconds at a time, whatever runs on it (1.7% here came with stalls of
/// 10 ms seen alike by the timer thread, cyclictest and the kernel's own hrtimers).
const BUSY_STEAL: f64 = 0.01;

/// One look at the machine.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// 1, 5 and 15 minute load averages.
    pub load_average: [f64; 3],
    /// Tasks running or ready to run (the kernel's `procs_running`, this benchmark's threads included).
    pub runnable: u32,
    /// When it was taken (CLOCK_MONOTONIC ns).
    at_ns: u64,
    /// The machine's CPU time in clock ticks: busy (not idle nor waiting for I/O), and stolen. Idle time
    /// is not read: a CPU going offline and back makes the kernel's idle counters jump, while the busy
    /// ones only count ticks; the time there was comes from the clock instead.
    busy_ticks: u64,
    steal_ticks: u64,
    /// This process's CPU time in clock ticks (its --load threads included).
    own_ticks: u64,
}

impl Snapshot {
    pub fn now() -> Snapshot {
        let mut snapshot = Snapshot { at_ns: crate::runtime::timer::monotonic_ns(), ..Snapshot::default() };
        if let Ok(text) = std::fs::read_to_string("/proc/loadavg") {
            for (slot, field) in snapshot.load_average.iter_mut().zip(text.split_whitespace()) {
                *slot = field.parse().unwrap_or(0.0);
            }
        }
        if let Ok(text) = std::fs::read_to_string("/proc/stat") {
            snapshot.read_stat(&text);
        }
        if let Ok(text) = std::fs::read_to_string("/proc/self/stat") {
            snapshot.own_ticks = own_ticks(&text).unwrap_or(0);
        }
        snapshot
    }

    fn read_stat(&mut self, text: &str) {
        for line in text.lines() {
            let mut fields = line.split_whitespace();
            match fields.next() {
                Some("cpu") => {
                    // user nice system idle iowait irq softirq steal (guest time is counted in user).
                    let ticks: Vec<u64> = fields.take(8).map(|f| f.parse().unwrap_or(0)).collect();
                    let at = |i: usize| ticks.get(i).copied().unwrap_or(0);
                    self.busy_ticks = [0, 1, 2, 5, 6, 7].iter().map(|&i| at(i)).sum();
                    self.steal_ticks = at(7);
                }
                Some("procs_running") => {
                    self.runnable = fields.next().and_then(|f| f.parse().ok()).unwrap_or(0);
                }
                _ => {}
            }
        }
    }
}

/// utime + stime of a `/proc/self/stat` line (fields 14 and 15, counted after the command name).
fn own_ticks(stat: &str) -> Option<u64> {
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 1..)?.split_whitespace().collect();
    Some(fields.get(14 - 3)?.parse::<u64>().ok()? + fields.get(15 - 3)?.parse::<u64>().ok()?)
}

/// The machine during a run.
#[derive(Clone, Debug)]
pub struct Machine {
    pub kernel: String,
    pub online: Vec<u32>,
    pub before: Snapshot,
    pub after: Snapshot,
    /// Runnable tasks over the run: (CLOCK_MONOTONIC ns, procs_running).
    pub runnable: Vec<(u64, u32)>,
}

impl Machine {
    /// The clock ticks the online CPUs had between the two snapshots.
    fn ticks_between(&self) -> Option<f64> {
        let seconds = self.after.at_ns.checked_sub(self.before.at_ns)? as f64 / 1e9;
        let per_second = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().unwrap_or(100);
        Some(seconds * per_second as f64 * self.online.len() as f64).filter(|&t| t > 0.0)
    }

    /// Share of the CPUs' time other programs used between the two snapshots (this process excluded),
    /// 0..=1; `None` when no time passed.
    pub fn others_share(&self) -> Option<f64> {
        let total = self.ticks_between()?;
        let busy = self.after.busy_ticks.saturating_sub(self.before.busy_ticks);
        let own = self.after.own_ticks.saturating_sub(self.before.own_ticks);
        let steal = self.after.steal_ticks.saturating_sub(self.before.steal_ticks);
        // Stolen time is counted apart: it is not a program of this machine.
        Some((busy.saturating_sub(own).saturating_sub(steal) as f64 / total).min(1.0))
    }

    /// Share of the CPUs' time the hypervisor gave to others, 0..=1; `None` where the kernel never counted
    /// any (no hypervisor, or one that does not report it).
    pub fn steal_share(&self) -> Option<f64> {
        let total = self.ticks_between()?;
        if self.after.steal_ticks == 0 {
            return None;
        }
        Some((self.after.steal_ticks.saturating_sub(self.before.steal_ticks) as f64 / total).min(1.0))
    }

    /// Why the machine counts as busy during the run, when it does.
    pub fn busy_reason(&self) -> Option<String> {
        let cpus = self.online.len().max(1) as f64;
        let mut reasons = vec![];
        if let Some(share) = self.others_share().filter(|&s| s > BUSY_SHARE) {
            reasons.push(format!("other programs used {:.0}% of the {} online CPUs", share * 100.0, cpus));
        }
        if let Some(steal) = self.steal_share().filter(|&s| s > BUSY_STEAL) {
            reasons.push(format!("the hypervisor stole {:.0}% of the CPU time", steal * 100.0));
        }
        let load = self.before.load_average[0].max(self.after.load_average[0]);
        if load >= cpus {
            reasons.push(format!("the load average reached {load:.2} on {cpus} CPUs"));
        }
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }
}

/// Samples the runnable tasks every `every` until finished.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<(u64, u32)>>>,
    thread: Option<JoinHandle<()>>,
    kernel: String,
    online: Vec<u32>,
    before: Snapshot,
}

impl Sampler {
    pub fn start(every: Duration, online: Vec<u32>) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(vec![]));
        let (thread_stop, thread_samples) = (Arc::clone(&stop), Arc::clone(&samples));
        let before = Snapshot::now();
        let thread = std::thread::Builder::new()
            .name("bench-machine".into())
            .spawn(move || {
                while !thread_stop.load(Ordering::Relaxed) {
                    let at = crate::runtime::timer::monotonic_ns();
                    let runnable = Snapshot::now().runnable;
                    thread_samples.lock().unwrap_or_else(|e| e.into_inner()).push((at, runnable));
                    std::thread::sleep(every);
                }
            })
            .ok();
        Sampler { stop, samples, thread, kernel: crate::kernel::release(), online, before }
    }

    pub fn finish(mut self) -> Machine {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let runnable = std::mem::take(&mut *self.samples.lock().unwrap_or_else(|e| e.into_inner()));
        Machine {
            kernel: std::mem::take(&mut self.kernel),
            online: std::mem::take(&mut self.online),
            before: std::mem::take(&mut self.before),
            after: Snapshot::now(),
            runnable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two snapshots 5 s apart on 2 CPUs: 1000 clock ticks at USER_HZ 100.
    fn machine(before: &str, after: &str, own: (u64, u64)) -> Machine {
        let snapshot = |stat: &str, own_ticks, at_ns| {
            let mut s = Snapshot { own_ticks, at_ns, ..Snapshot::default() };
            s.read_stat(stat);
            s
        };
        Machine {
            kernel: "6.18".into(),
            online: vec![0, 1],
            before: snapshot(before, own.0, 1_000_000_000),
            after: snapshot(after, own.1, 6_000_000_000),
            runnable: vec![],
        }
    }

    #[test]
    fn others_share_leaves_out_this_process_idle_and_steal() {
        // 1000 ticks pass: 600 busy (100 of them ours, 50 stolen), 300 idle, 100 iowait.
        let m = machine(
            "cpu  0 0 0 0 0 0 0 0 0 0\nprocs_running 3\n",
            "cpu  400 0 150 300 100 0 0 50 0 0\nprocs_running 5\n",
            (10, 110),
        );
        assert_eq!(m.others_share(), Some(0.45));
        assert_eq!(m.steal_share(), Some(0.05));
        assert_eq!((m.before.runnable, m.after.runnable), (3, 5));
        assert!(m.busy_reason().unwrap().contains("other programs used 45% of the 2 online CPUs"));
    }

    #[test]
    fn a_quiet_machine_is_not_busy_and_no_steal_is_not_zero_steal() {
        let m = machine("cpu  0 0 0 0 0 0 0 0\n", "cpu  10 0 10 980 0 0 0 0\n", (0, 15));
        assert_eq!(m.steal_share(), None, "a kernel that never counted steal");
        assert_eq!(m.busy_reason(), None);
    }

    #[test]
    fn own_ticks_are_counted_after_the_command_name() {
        let stat = "12 (a) b) S 1 2 3 4 5 6 7 8 9 10 20 30 0 0";
        assert_eq!(own_ticks(stat), Some(50));
    }

    #[test]
    fn a_snapshot_of_this_machine_reads_its_counters() {
        let s = Snapshot::now();
        assert!(s.busy_ticks > 0 && s.runnable >= 1, "{s:?}");
    }
}
