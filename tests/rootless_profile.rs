//! `profile` probes with no perf event (issue 37): where perf_event_open is refused, as in a rootless
//! container (root of an unprivileged user namespace with a delegated BPF filesystem, made for real by
//! examples/delegated_userns.rs as in tests/rootless.rs), each CPU is sampled by a BPF timer pinned to it
//! (Linux 6.7), whose softirq runs the probe in the context the timer interrupted. A kernel without pinned
//! timers skips the tests that need them, saying so, and still gets the error naming the ways out.

mod common;

use common::delegated::*;
use common::*;
use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

const HZ: f64 = 99.0;
/// How long the workload spins on cpu1.
const SPIN_MS: u64 = 2000;
/// The CPU the workload is pinned to.
const BUSY_CPU: u32 = 1;

/// Whether this kernel pins BPF timers to a CPU (Linux 6.7), as `--info` says; [`skip`]s the test when not.
fn has_pinned_timers(test: &str) -> bool {
    let info = stdout(&output_of(Command::new(BIN).arg("--info")));
    if info.lines().any(|line| line == "timer_cpu_pin: yes") {
        return true;
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    skip(
        test,
        &format!(
            "kernel {} does not pin BPF timers to a CPU (BPF_F_TIMER_CPU_PIN, Linux 6.7): profile probes cannot run without perf events here",
            release.trim()
        ),
    );
    false
}

/// Everything a sampling test needs: root, both CPUs online and kept so, pinned timers.
fn ready(test: &str) -> Option<KernelState> {
    let state = KernelState::acquire(test)?;
    (has_online_cpus(test, 2) && has_pinned_timers(test)).then_some(state)
}

fn workload_command() -> String {
    format!("{} spin {BUSY_CPU} {SPIN_MS}", workload().display())
}

/// The entries of map `@name` in text output: each key (the text between the brackets, a stack's lines
/// joined by `;`) and its count.
fn entries(out: &str, name: &str) -> BTreeMap<String, u64> {
    let mut found = BTreeMap::new();
    let mut rest = out;
    let open = format!("@{name}[");
    while let Some(at) = rest.find(&open) {
        let after = &rest[at + open.len()..];
        let Some(end) = after.find("]: ") else { break };
        let key: Vec<&str> = after[..end].lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        let count: String = after[end + 3..].chars().take_while(char::is_ascii_digit).collect();
        found.insert(key.join(";"), count.parse().unwrap_or_else(|_| panic!("a count after {key:?}: {out}")));
        rest = &after[end..];
    }
    found
}

/// The online CPUs.
fn online_cpus() -> Vec<u32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").expect("the online CPUs");
    let mut cpus = vec![];
    for range in text.trim().split(',') {
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        cpus.extend(first.parse::<u32>().unwrap()..=last.parse::<u32>().unwrap());
    }
    cpus
}

/// What one CPU's samples must look like: about HZ a second for as long as sampling can have run.
fn assert_rate(samples: u64, cpu: u32, elapsed: Duration, out: &str) {
    let (least, most) = (HZ * SPIN_MS as f64 / 1000.0 * 0.7, HZ * elapsed.as_secs_f64() * 1.2 + 5.0);
    assert!(
        (least..=most).contains(&(samples as f64)),
        "cpu{cpu}: {samples} samples, expected {least:.0}..{most:.0} (99 Hz over {SPIN_MS} ms to {elapsed:?})\n{out}"
    );
}

/// Where the workload's `workload_spin` is in its address space: its own word (`workload_spin at 0x…`, in
/// the output), with the size of the symbol in its ELF file. In a rootless container user stacks print as
/// addresses (the symbolizer opens mapped files through /proc/PID/map_files, closed there).
fn spin_function(out: &str) -> std::ops::Range<u64> {
    use object::{Object, ObjectSymbol};
    let start = out
        .lines()
        .find_map(|line| line.strip_prefix("workload_spin at 0x"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or_else(|| panic!("the workload did not say where workload_spin is\n{out}"));
    let data = std::fs::read(workload()).expect("the workload binary");
    let file = object::File::parse(&*data).expect("the workload is ELF");
    let size =
        file.symbols().find(|s| s.name() == Ok("workload_spin")).expect("workload_spin in .symtab").size();
    start..start + size
}

/// The script: every sample counted per CPU; the workload's by CPU and comm, with the top of its user
/// stack; the idle task's by CPU and comm; and the `probe` builtin.
const SAMPLING: &str = r#"profile:hz:99 {
    @samples[cpu] = count();
    @probe[probe] = count();
    if (pid == cpid) { @workload[cpu, comm] = count(); @top[ustack(1)] = count(); }
    if (pid == 0) { @idle[cpu, comm] = count(); }
}"#;

/// The samples of a run of [`SAMPLING`]: each CPU's within the rate, the busy CPU's mostly the workload
/// (pid and comm), its function at the top of its user stacks, the idle task as swapper/CPU.
fn assert_sampled(out: &str, elapsed: Duration) {
    let samples = entries(out, "samples");
    for cpu in online_cpus() {
        let n = samples.get(&cpu.to_string()).copied().unwrap_or(0);
        assert_rate(n, cpu, elapsed, out);
    }
    let total: u64 = samples.values().sum();
    assert_eq!(entries(out, "probe"), BTreeMap::from([("profile:hz:99".to_string(), total)]), "{out}");
    let busy = samples[&BUSY_CPU.to_string()];
    let workload = entries(out, "workload");
    let named = workload.get(&format!("{BUSY_CPU}, workload")).copied().unwrap_or(0);
    assert!(named * 10 >= busy * 8, "the workload in {named} of cpu{BUSY_CPU}'s {busy} samples\n{out}");
    let spin = spin_function(out);
    let in_spin = |frame: &str| {
        frame.starts_with("workload_spin+")
            || frame
                .strip_prefix("0x")
                .and_then(|hex| u64::from_str_radix(hex, 16).ok())
                .is_some_and(|a| spin.contains(&a))
    };
    let in_function: u64 = entries(out, "top").iter().filter(|(k, _)| in_spin(k)).map(|(_, n)| n).sum();
    let of_workload: u64 = workload.values().sum();
    assert!(
        in_function * 10 >= of_workload * 9,
        "workload_spin in {in_function} of {of_workload} user stacks\n{out}"
    );
    for key in entries(out, "idle").keys() {
        let (cpu, comm) = key.split_once(", ").expect("cpu, comm");
        assert_eq!(comm, format!("swapper/{cpu}"), "pid 0 is the idle task\n{out}");
    }
}

#[test]
fn rootless_profile_samples_every_cpu_on_bpf_timers() {
    let test = "rootless_profile_samples_every_cpu_on_bpf_timers";
    let Some(_state) = ready(test) else { return };
    if !can_delegate(test) {
        return;
    }
    let command = workload_command();
    let started = Instant::now();
    let output = output_of(&mut inside(&[BIN, "-v", "-e", SAMPLING, "-c", &command]));
    let elapsed = started.elapsed();
    let (out, err) = (stdout(&output), stderr(&output));
    assert!(output.status.success(), "{:?}\n{out}{err}", output.status);
    assert!(err.contains("profile:hz:99 runs on a BPF timer on every online CPU"), "{err}");
    assert!(err.contains("(perf_event_open is refused: "), "{err}");
    assert_sampled(&out, elapsed);
}

#[test]
fn rootless_info_names_the_profile_engine() {
    let test = "rootless_info_names_the_profile_engine";
    if !can_trace(test) || !has_pinned_timers(test) || !can_delegate(test) {
        return;
    }
    let info = stdout(&output_of(&mut inside(&[BIN, "--info"])));
    assert!(
        info.contains("\nprofile_engine: BPF timers, one per CPU (perf_event_open is refused: "),
        "{info}"
    );
    let host = stdout(&output_of(Command::new(BIN).arg("--info")));
    assert!(host.contains("\nprofile_engine: perf events (perf_event_open is allowed)\n"), "{host}");
}

/// Where the kernel lacks pinned timers, profile is the one error naming perf_event_paranoid, and says
/// which release would run it (STEADYTRACE_KERNEL_WITHOUT makes this kernel one).
#[test]
fn rootless_profile_without_pinned_timers_is_one_error_naming_linux_6_7() {
    let test = "rootless_profile_without_pinned_timers_is_one_error_naming_linux_6_7";
    if !can_delegate(test) {
        return;
    }
    let script = "profile:hz:99 { @ = count(); } interval:ms:300 { exit(); }";
    let mut command = inside(&["env", "STEADYTRACE_KERNEL_WITHOUT=timer_cpu_pin", BIN, "-q", "-e", script]);
    let output = output_of(&mut command);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("steadytrace: cannot attach `profile:hz:99`: the kernel denied perf_event_open"),
        "{err}"
    );
    assert!(
        err.contains("user namespace other than the host's") && err.contains("perf_event_paranoid"),
        "{err}"
    );
    assert!(err.contains("Linux 6.7 and later would sample profile probes without perf events"), "{err}");
}

/// On the host (kallsyms readable), the timer engine chosen by STEADYTRACE_PROFILE_ENGINE: the same
/// samples as perf events give, and kernel stacks that start at the interrupted code: none of the
/// softirq's frames, an empty stack for user code, the idle loop for the idle task.
#[test]
fn on_the_host_the_timer_engine_samples_as_perf_events_do() {
    let test = "on_the_host_the_timer_engine_samples_as_perf_events_do";
    let Some(_state) = ready(test) else { return };
    let command = workload_command();
    for engine in ["timer", "perf"] {
        let started = Instant::now();
        let output = output_of(
            Command::new(BIN)
                .env("STEADYTRACE_PROFILE_ENGINE", engine)
                .args(["-q", "-e", SAMPLING, "-c", &command]),
        );
        let elapsed = started.elapsed();
        let out = stdout(&output);
        assert!(output.status.success(), "{engine}: {:?}\n{out}{}", output.status, stderr(&output));
        assert_sampled(&out, elapsed);
    }
    let script = "profile:hz:99 /pid == cpid/ { @work[kstack] = count(); } profile:hz:99 /pid == 0/ { @idle[kstack] = count(); }";
    let output = output_of(
        Command::new(BIN)
            .env("STEADYTRACE_PROFILE_ENGINE", "timer")
            .args(["-q", "-e", script, "-c", &command]),
    );
    let (out, err) = (stdout(&output), stderr(&output));
    assert!(output.status.success(), "{:?}\n{out}{err}", output.status);
    assert!(!err.contains("could not be counted"), "{err}");
    let (work, idle) = (entries(&out, "work"), entries(&out, "idle"));
    for stack in work.keys().chain(idle.keys()) {
        for frame in
            ["bpf_prog_", "bpf_trace_run", "__hrtimer_run_queues", "hrtimer_run_softirq", "handle_softirqs"]
        {
            assert!(!stack.contains(frame), "the softirq's {frame} in {stack}\n{out}");
        }
    }
    let user: u64 = work.get("").copied().unwrap_or(0);
    assert!(
        user * 10 >= work.values().sum::<u64>() * 8,
        "{user} empty kernel stacks of the spinning workload\n{out}"
    );
    for stack in idle.keys() {
        assert!(stack.contains("cpu_startup_entry+"), "an idle stack without the idle loop: {stack}\n{out}");
    }
}
