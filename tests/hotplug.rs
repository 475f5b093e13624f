//! Per-CPU perf probes (profile, software, hardware) and the perf interval engine through CPU hotplug
//! of cpu1, on the real kernel. Every test that takes cpu1 offline holds the hotplug lock and puts cpu1
//! back online, also when it fails; the others hold the kernel state lock, so that cpu1 stays online
//! meanwhile. cpu-clock samples only come from a busy CPU here, so cpu1 is kept busy by a spinner.

mod common;

use common::*;
use std::process::Stdio;
use std::time::Duration;

const SAMPLES_ON_CPU1: &str = r#"profile:hz:100 /cpu == 1/ { printf("%lu\n", nsecs); }"#;

/// Sample times (CLOCK_MONOTONIC ns) printed by the tracer, one per line.
fn times(lines: &[String]) -> Vec<u64> {
    lines.iter().filter_map(|l| l.trim().parse().ok()).collect()
}

fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// What samples `profile` probes: perf events (the default where perf_event_open is allowed), or the BPF timer
/// per CPU that rootless containers get (Linux 6.7), chosen here with STEADYTRACE_PROFILE_ENGINE.
#[derive(Clone, Copy)]
enum Engine {
    Perf,
    Timer,
}

/// The tracer with `args`, sampling through `engine`; `None` (the test skipped) when this kernel cannot.
fn profile_tracer(test: &str, engine: Engine, args: &[&str]) -> Option<std::process::Command> {
    let mut command = tracer(args);
    if let Engine::Timer = engine {
        let info = tracer(&["--info"]).output().expect("run --info");
        if !String::from_utf8_lossy(&info.stdout).lines().any(|line| line == "timer_cpu_pin: yes") {
            skip(test, "no BPF timers pinned to a CPU here (Linux 6.7)");
            return None;
        }
        command.env("STEADYTRACE_PROFILE_ENGINE", "timer");
    }
    Some(command)
}

#[test]
fn profile_counts_cpu1_again_within_200ms_of_its_return() {
    profile_counts_cpu1_again("profile_counts_cpu1_again_within_200ms_of_its_return", Engine::Perf);
}

#[test]
fn profile_on_bpf_timers_counts_cpu1_again_within_200ms_of_its_return() {
    profile_counts_cpu1_again(
        "profile_on_bpf_timers_counts_cpu1_again_within_200ms_of_its_return",
        Engine::Timer,
    );
}

fn profile_counts_cpu1_again(test: &str, engine: Engine) {
    let Some(mut command) = profile_tracer(test, engine, &["-e", SAMPLES_ON_CPU1]) else { return };
    let Some(mut hotplug) = Hotplug::acquire(test, 1) else {
        return;
    };
    let _busy = Spinner::on_cpu(1);
    let mut child = Reaped::spawn(command.stdout(Stdio::piped()).stderr(Stdio::piped())).unwrap();
    let _stderr = wait_for_stderr_line(&mut child, "Attached");
    let lines = collect_lines(&mut child);
    sleep_ms(500);
    let offline_at = monotonic_ns();
    hotplug.set_online(1, false);
    sleep_ms(300);
    hotplug.set_online(1, true);
    let back_at = monotonic_ns();
    sleep_ms(1500);
    let end_at = monotonic_ns();
    child.kill().unwrap();
    let _ = child.wait();
    drop(hotplug);
    let samples = times(&lines.join().unwrap());

    assert!(samples.iter().any(|&t| t < offline_at), "cpu1 was never sampled before going offline");
    let first_after = samples.iter().find(|&&t| t > back_at).copied();
    let delay_ms = first_after.map(|t| (t - back_at) / 1_000_000);
    assert!(
        delay_ms.is_some_and(|d| d <= 200),
        "cpu1 not sampled within 200 ms of its return (first after: {delay_ms:?} ms)"
    );
    // The last second: 100 Hz ±10%.
    let last_second = samples.iter().filter(|&&t| t > end_at - 1_000_000_000 && t <= end_at).count();
    assert!(
        (90..=110).contains(&last_second),
        "{last_second} samples on cpu1 in the last second, expected 100 ±10%"
    );
}

#[test]
fn profile_started_with_cpu1_offline_covers_it_once_online() {
    profile_covers_cpu1_once_online("profile_started_with_cpu1_offline_covers_it_once_online", Engine::Perf);
}

#[test]
fn profile_on_bpf_timers_started_with_cpu1_offline_covers_it_once_online() {
    let test = "profile_on_bpf_timers_started_with_cpu1_offline_covers_it_once_online";
    profile_covers_cpu1_once_online(test, Engine::Timer);
}

fn profile_covers_cpu1_once_online(test: &str, engine: Engine) {
    // -v: a failure shows what the tracer did when cpu1 came online.
    let Some(mut command) = profile_tracer(test, engine, &["-v", "-e", SAMPLES_ON_CPU1]) else { return };
    let Some(mut hotplug) = Hotplug::acquire(test, 1) else {
        return;
    };
    hotplug.set_online(1, false);
    let mut child = Reaped::spawn(command.stdout(Stdio::piped()).stderr(Stdio::piped())).unwrap();
    let stderr = wait_for_stderr_line(&mut child, "Attached");
    let lines = collect_lines(&mut child);
    hotplug.set_online(1, true);
    let back_at = monotonic_ns();
    let _busy = Spinner::on_cpu(1);
    sleep_ms(700);
    child.kill().unwrap();
    let _ = child.wait();
    drop(hotplug);
    let samples = times(&lines.join().unwrap());
    let after = samples.iter().filter(|&&t| t > back_at).count();
    assert!(
        after >= 30,
        "only {after} samples on cpu1 after it came online; stderr: {}",
        stderr.join().unwrap()
    );
}

#[test]
fn twenty_fast_flaps_leak_nothing_and_end_covered() {
    let Some(mut hotplug) = Hotplug::acquire("twenty_fast_flaps_leak_nothing_and_end_covered", 1) else {
        return;
    };
    let _busy = Spinner::on_cpu(1);
    let mut child =
        Reaped::spawn(tracer(&["-e", SAMPLES_ON_CPU1]).stdout(Stdio::piped()).stderr(Stdio::piped()))
            .unwrap();
    let stderr = wait_for_stderr_line(&mut child, "Attached");
    let lines = collect_lines(&mut child);
    sleep_ms(200);
    let fds_before = fd_count(child.id());
    for _ in 0..20 {
        hotplug.set_online(1, false);
        sleep_ms(25);
        hotplug.set_online(1, true);
        sleep_ms(25);
    }
    let back_at = monotonic_ns();
    sleep_ms(500);
    let fds_after = fd_count(child.id());
    assert!(child.try_wait().unwrap().is_none(), "the tracer died during the flapping");
    child.kill().unwrap();
    let _ = child.wait();
    drop(hotplug);
    assert_eq!(fds_before, fds_after, "file descriptors before and after 20 flaps");
    let after = times(&lines.join().unwrap()).into_iter().filter(|&t| t > back_at).count();
    assert!(
        after >= 20,
        "only {after} samples on cpu1 after the last flap; stderr: {}",
        stderr.join().unwrap()
    );
}

#[test]
fn perf_interval_engine_moves_off_a_cpu_going_offline() {
    let Some(mut hotplug) = Hotplug::acquire("perf_interval_engine_moves_off_a_cpu_going_offline", 1) else {
        return;
    };
    // The CPU-clock event only ticks on a busy CPU: keep both busy.
    let (_busy0, _busy1) = (Spinner::on_cpu(0), Spinner::on_cpu(1));
    let script = r#"interval:ms:10 { printf("%lu\n", nsecs); }"#;
    let mut child = Reaped::spawn(
        tracer(&["--interval-engine", "perf", "--interval-cpu", "1", "-e", script])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .unwrap();
    let _stderr = wait_for_stderr_line(&mut child, "Attached");
    let lines = collect_lines(&mut child);
    sleep_ms(300);
    let start = monotonic_ns();
    for _ in 0..5 {
        hotplug.set_online(1, false);
        sleep_ms(150);
        hotplug.set_online(1, true);
        sleep_ms(150);
    }
    let end = monotonic_ns();
    child.kill().unwrap();
    let _ = child.wait();
    drop(hotplug);
    let firings = times(&lines.join().unwrap());
    let mut window = start;
    while window + 100_000_000 <= end {
        assert!(
            firings.iter().any(|&t| t >= window && t < window + 100_000_000),
            "no firing in the 100 ms window {} ms into the flapping",
            (window - start) / 1_000_000
        );
        window += 100_000_000;
    }
}

#[test]
fn dash_p_limits_profile_to_one_process() {
    // Not a hotplug test, but its counts depend on both CPUs staying online.
    let Some(_kernel) = KernelState::acquire("dash_p_limits_profile_to_one_process") else { return };
    let _busy = Spinner::on_cpu(0);
    let me = std::process::id();
    let output = tracer(&[
        "-q",
        "-p",
        &me.to_string(),
        "-e",
        r#"profile:hz:100 { @[pid] = count(); } interval:ms:500 { exit(); }"#,
    ])
    .output()
    .unwrap();
    let text = stdout(&output);
    let keys: Vec<&str> = text.lines().filter(|l| l.starts_with("@[")).collect();
    assert!(!keys.is_empty(), "nothing sampled: {text} {}", stderr(&output));
    assert!(keys.iter().all(|l| l.starts_with(&format!("@[{me}]"))), "another process was sampled:\n{text}");
}

#[test]
fn a_missing_hardware_event_is_named_in_the_error() {
    if !can_trace("a_missing_hardware_event_is_named_in_the_error") {
        return;
    }
    let output = tracer(&["-q", "-e", "hardware:cycles:100000 { @ = count(); } interval:ms:100 { exit(); }"])
        .output()
        .unwrap();
    if output.status.success() {
        skip("a_missing_hardware_event_is_named_in_the_error", "this machine has hardware counters");
        return;
    }
    let errors = stderr(&output);
    assert!(errors.contains("`hardware:cpu-cycles:100000`"), "{errors}");
    assert!(errors.contains("this machine does not have that event"), "{errors}");
}

#[test]
fn software_events_count_on_every_cpu() {
    let Some(_kernel) = KernelState::acquire("software_events_count_on_every_cpu") else { return };
    if !has_online_cpus("software_events_count_on_every_cpu", 2) {
        return;
    }
    let _busy = Spinner::on_cpu(1);
    let output =
        tracer(&["-q", "-e", "software:cpu-clock:1000000 { @[cpu] = count(); } interval:ms:300 { exit(); }"])
            .output()
            .unwrap();
    let text = stdout(&output);
    assert!(
        text.contains("@[1]: "),
        "cpu1 (busy) was not counted ({}):\n{text}{}",
        output.status,
        stderr(&output)
    );
}

/// Sends `signal` to the process `pid`.
fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, signal) }, 0, "kill({pid}, {signal})");
}

#[test]
fn a_stopped_tracer_samples_cpu1_again_within_100ms_of_sigcont() {
    let test = "a_stopped_tracer_samples_cpu1_again_within_100ms_of_sigcont";
    let Some(mut hotplug) = Hotplug::acquire(test, 1) else {
        return;
    };
    let _busy = Spinner::on_cpu(1);
    let mut child =
        Reaped::spawn(tracer(&["-v", "-e", SAMPLES_ON_CPU1]).stdout(Stdio::piped()).stderr(Stdio::piped()))
            .unwrap();
    let stderr = wait_for_stderr_line(&mut child, "Attached");
    let lines = collect_lines(&mut child);
    sleep_ms(300);
    // cpu1 leaves and returns while the tracer cannot run: the online mask looks as it did before.
    signal(child.id(), libc::SIGSTOP);
    sleep_ms(50);
    hotplug.set_online(1, false);
    sleep_ms(200);
    hotplug.set_online(1, true);
    sleep_ms(200);
    let continued_at = monotonic_ns();
    signal(child.id(), libc::SIGCONT);
    sleep_ms(700);
    child.kill().unwrap();
    let _ = child.wait();
    drop(hotplug);
    let samples = times(&lines.join().unwrap());
    let first_after = samples.iter().find(|&&t| t > continued_at).copied();
    let delay_ms = first_after.map(|t| (t - continued_at) / 1_000_000);
    assert!(
        delay_ms.is_some_and(|d| d <= 100),
        "cpu1 not sampled within 100 ms of SIGCONT (first after: {delay_ms:?} ms)\nstderr:\n{}",
        stderr.join().unwrap()
    );
}

/// The journal of process mappings (what names the frames of exited processes) has a perf event per CPU too: a
/// process that lives only on cpu1 after cpu1 came back, or came online after the tracer started, is named.
#[test]
fn the_journal_names_processes_on_a_cpu_that_came_back_or_came_online() {
    let test = "the_journal_names_processes_on_a_cpu_that_came_back_or_came_online";
    let Some(mut hotplug) = Hotplug::acquire(test, 1) else { return };
    // A name of its own, so that only this run is traced; exited long before the map is printed.
    let program = workload().with_file_name("journalcpu1");
    std::fs::copy(workload(), &program).expect("copy the workload");
    let script = r#"tracepoint:syscalls:sys_enter_getppid /comm == "journalcpu1"/ { @[ustack] = count(); }"#;
    for start_offline in [false, true] {
        if start_offline {
            hotplug.set_online(1, false);
        }
        let mut child =
            Reaped::spawn(tracer(&["-e", script]).stdout(Stdio::piped()).stderr(Stdio::piped())).unwrap();
        drop(wait_for_stderr_line(&mut child, "Attached"));
        if !start_offline {
            hotplug.set_online(1, false);
            sleep_ms(100);
        }
        hotplug.set_online(1, true);
        // The journal checks its events every 50 ms.
        sleep_ms(300);
        let ran = std::process::Command::new("taskset")
            .args(["-c", "1"])
            .arg(&program)
            .args(["getppid", "5", "1"])
            .status()
            .expect("run taskset");
        assert!(ran.success());
        sleep_ms(300);
        signal(child.id(), libc::SIGINT);
        let output = wait_output(child, Duration::from_secs(20));
        let text = stdout(&output);
        // libc's frame is named from the journal alone: the process is gone.
        assert!(
            text.contains("\n    getppid+"),
            "cpu1 {}: the exited process's frames are not named:\n{text}{}",
            if start_offline { "came online after the start" } else { "went offline and came back" },
            stderr(&output)
        );
    }
}
