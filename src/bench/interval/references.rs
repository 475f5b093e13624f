//! References measured by other programs in the same run, so that the floor is a number measured beside
//! the engines and not a claim: cyclictest (Debian's rt-tests) sleeping until the same deadlines at the
//! same priority, and rtla timerlat (the kernel's own timer-latency tracer, its per-CPU kernel threads).

use super::scheduling::Scheduling;
use super::{Firing, Measured, Setup};
use crate::runtime::timer::monotonic_ns;
use std::process::{Command, Stdio};
use std::time::Duration;

/// cyclictest: one thread on absolute `clock_nanosleep` deadlines, every wake-up's lateness printed (`-v`,
/// in ns with `-N`). `--default-system` keeps it from tuning the machine (it would otherwise hold
/// /dev/cpu_dma_latency at 0), so that it runs on the machine the engines ran on.
pub fn run_cyclictest(setup: &Setup<'_>) -> Result<Measured, String> {
    let program = crate::executable::find_in_path("cyclictest")
        .ok_or("cyclictest is not installed (Debian: apt-get install rt-tests)")?;
    let window = setup.window;
    let interval_us = whole_microseconds(window.period_ns, "cyclictest")?;
    // `-p 0` would make cyclictest default to SCHED_FIFO 2: at SCHED_OTHER it is given no priority at all.
    let policy: Vec<String> = if setup.rt > 0 {
        vec!["--policy=fifo".into(), "-p".into(), setup.rt.to_string()]
    } else {
        vec!["--policy=other".into()]
    };
    let mut child = Command::new(program)
        .args(["-v", "-N", "-q", "-t1", "-d0", "--default-system"])
        .args(["-i", &interval_us.to_string(), "-l", &window.count.to_string()])
        .args(&policy)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run cyclictest: {e}"))?;
    let started_ns = monotonic_ns();
    let scheduling = watch_measuring_thread(child.id(), setup);
    if setup.interrupt.is_set() {
        let _ = child.kill();
    }
    let output = child.wait_with_output().map_err(|e| format!("cyclictest: {e}"))?;
    let latencies = cyclictest_latencies(&String::from_utf8_lossy(&output.stdout));
    if !output.status.success() || latencies.is_empty() {
        return Err(failure("cyclictest", &output, "no output"));
    }
    // cyclictest's deadlines are its start + k × period: the firings are placed on the run's clock from
    // when it was started, within its start-up time.
    let firings = latencies
        .iter()
        .enumerate()
        .map(|(k, &late)| {
            let deadline = started_ns + (k as u64 + 1) * window.period_ns;
            Firing { index: k as u64 + 1, at_ns: deadline + late, deadline_ns: Some(deadline) }
        })
        .collect();
    Ok(Measured { firings, scheduling, ..Measured::default() })
}

/// The scheduling of cyclictest's measuring thread (its second task), as last read while it ran; progress
/// is shown meanwhile. Returns once the program has exited.
fn watch_measuring_thread(pid: u32, setup: &Setup<'_>) -> Option<Scheduling> {
    let mut scheduling = None;
    let alive = || std::path::Path::new(&format!("/proc/{pid}/task/{pid}/stat")).exists();
    let mut ticks = 0u32;
    while alive() && !setup.interrupt.is_set() {
        // The last reading counts: the thread may set its own policy after it starts.
        if let Some(now) = measuring_thread(pid) {
            scheduling = Some(now);
        }
        // Often until the measuring thread has been seen: a short run may be over within milliseconds.
        std::thread::sleep(Duration::from_millis(if scheduling.is_none() { 1 } else { 20 }));
        ticks += 1;
        if ticks % 10 == 0 {
            setup.progress.show(&setup.window, 0);
        }
        // A zombie still has its task directory: stop when it says so.
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if state.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')) {
            break;
        }
    }
    scheduling
}

fn measuring_thread(pid: u32) -> Option<Scheduling> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .filter_map(Result::ok)
        .filter(|task| task.file_name() != pid.to_string().as_str())
        .find_map(|task| Scheduling::of_task(&std::fs::read_to_string(task.path().join("stat")).ok()?))
}

/// The latencies (ns) of `-v -N` output, lines `THREAD: LOOP: VALUE`, in loop order.
fn cyclictest_latencies(stdout: &str) -> Vec<u64> {
    stdout
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(':').map(str::trim);
            let (thread, cycle, value) = (fields.next()?, fields.next()?, fields.next()?);
            let numbers = thread.parse::<u32>().is_ok() && cycle.parse::<u64>().is_ok();
            if !numbers || fields.next().is_some() {
                return None;
            }
            value.parse().ok()
        })
        .collect()
}

/// rtla timerlat hist: the kernel's timerlat tracer wakes one kernel thread per CPU at each period and
/// measures how late it ran. It reports histograms (1 µs buckets), not firings in order: lateness only.
pub fn run_timerlat(setup: &Setup<'_>) -> Result<Measured, String> {
    let program = crate::executable::find_in_path("rtla")
        .ok_or("rtla is not installed (Debian: apt-get install rtla)")?;
    let tracers = crate::kernel::tracefs::root()
        .and_then(|root| std::fs::read_to_string(root.join("available_tracers")).map_err(|e| e.to_string()))
        .map_err(|e| format!("cannot read the kernel's tracers: {e}"))?;
    if !tracers.split_whitespace().any(|t| t == "timerlat") {
        return Err("this kernel has no timerlat tracer (CONFIG_TIMERLAT_TRACER, Linux 5.14)".into());
    }
    let window = setup.window;
    let period_us = whole_microseconds(window.period_ns, "rtla timerlat")?;
    let seconds = ((window.count * window.period_ns) as f64 / 1e9).ceil().max(1.0);
    let priority = if setup.rt > 0 { format!("f:{}", setup.rt) } else { "o:0".into() };
    let output = Command::new(program)
        .args(["timerlat", "hist", "-d", &format!("{seconds}s"), "-p", &period_us.to_string()])
        .args(["-P", &priority, "-b", "1", "-E", "100000"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run rtla: {e}"))?;
    let histogram = timerlat_thread_histogram(&String::from_utf8_lossy(&output.stdout));
    if !output.status.success() || histogram.is_empty() {
        return Err(failure("rtla timerlat", &output, "no histogram"));
    }
    let firings = histogram
        .iter()
        .flat_map(|&(us, count)| std::iter::repeat_n(us * 1000, count as usize))
        .enumerate()
        .map(|(k, late)| Firing { index: k as u64 + 1, at_ns: late, deadline_ns: Some(0) })
        .collect();
    let scheduling = Scheduling::Thread {
        policy: if setup.rt > 0 { "SCHED_FIFO" } else { "SCHED_OTHER" },
        priority: u32::from(setup.rt),
        slack_ns: None,
    };
    Ok(Measured { firings, latencies_only: true, scheduling: Some(scheduling), ..Measured::default() })
}

/// The thread-latency histogram of `rtla timerlat hist -b 1` output, summed over CPUs: (µs, count). Its
/// table has an `Index` header naming columns `IRQ-CPU` and `Thr-CPU`, then one row per bucket.
fn timerlat_thread_histogram(stdout: &str) -> Vec<(u64, u64)> {
    let mut columns: Vec<usize> = vec![];
    let mut buckets = vec![];
    for line in stdout.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.first() {
            Some(&"Index") => {
                columns = (1..fields.len()).filter(|&i| fields[i].starts_with("Thr-")).collect();
            }
            Some(first) if !columns.is_empty() => {
                let Ok(us) = first.parse::<u64>() else { continue };
                let count: u64 = columns.iter().filter_map(|&i| fields.get(i)?.parse::<u64>().ok()).sum();
                if count > 0 {
                    buckets.push((us, count));
                }
            }
            _ => {}
        }
    }
    buckets
}

/// Why a reference gave nothing to use: its exit status and the last line it wrote to stderr.
fn failure(program: &str, output: &std::process::Output, otherwise: &str) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let said = stderr.lines().rfind(|l| !l.trim().is_empty()).unwrap_or(otherwise);
    format!("{program} failed ({}): {said}", output.status)
}

fn whole_microseconds(period_ns: u64, program: &str) -> Result<u64, String> {
    if period_ns % 1000 != 0 || period_ns < 1000 {
        return Err(format!("{program} takes whole microseconds: --period {period_ns}ns is not"));
    }
    Ok(period_ns / 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cyclictest_verbose_lines_give_latencies_in_loop_order() {
        let out = "# /dev/cpu_dma_latency set to 0us\n       0:       0:   31178\n       0:       1:   49640\nT: 0 ( 1) P: 1\n";
        assert_eq!(cyclictest_latencies(out), [31178, 49640]);
    }

    #[test]
    fn timerlat_thread_columns_are_summed_over_cpus() {
        // The layout of rtla timerlat hist's table (Documentation/tools/rtla/rtla-timerlat-hist.rst).
        let out = "# RTLA timerlat histogram\n# Time unit is microseconds (us)\n\
                   Index   IRQ-000   Thr-000   IRQ-001   Thr-001\n\
                   0        276489         0    206089         0\n\
                   1        318327     35487    388149     30024\n\
                   2          3282    122584      4019    126527\n\
                   over:         0         0         0         0\n\
                   count:   598098    158071    598257    156551\n";
        assert_eq!(timerlat_thread_histogram(out), [(1, 65511), (2, 249111)]);
    }

    #[test]
    fn periods_must_be_whole_microseconds() {
        assert_eq!(whole_microseconds(10_000_000, "x"), Ok(10_000));
        assert!(whole_microseconds(1500, "x").is_err());
    }
}
