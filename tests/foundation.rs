//! The foundation: BEGIN, END and interval probes on the real kernel, and that CPU hotplug cannot
//! stop them.

mod common;

use common::*;
use std::fs;
use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn begin_prints_and_exits_zero() {
    if !can_trace("begin_prints_and_exits_zero") {
        return;
    }
    let output = run(r#"BEGIN { printf("hello %d\n", 42); exit(); }"#, Duration::from_secs(20));
    // The two blank lines close the output as in bpftrace (maps would be printed after them).
    assert_eq!(stdout(&output), "hello 42\n\n\n", "stderr: {}", stderr(&output));
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn exit_code_reaches_the_shell() {
    if !can_trace("exit_code_reaches_the_shell") {
        return;
    }
    let output = run("BEGIN { exit(3); }", Duration::from_secs(20));
    assert_eq!(output.status.code(), Some(3), "stderr: {}", stderr(&output));
}

#[test]
fn statements_after_exit_do_not_run() {
    if !can_trace("statements_after_exit_do_not_run") {
        return;
    }
    let output = run(
        r#"BEGIN { printf("a\n"); exit(); printf("b\n"); } END { printf("end\n"); }"#,
        Duration::from_secs(20),
    );
    assert_eq!(stdout(&output), "a\nend\n\n\n", "stderr: {}", stderr(&output));
}

#[test]
fn builtins_describe_the_tracer_in_begin() {
    if !can_trace("builtins_describe_the_tracer_in_begin") {
        return;
    }
    let child = Reaped::spawn(
        tracer(&[
            "-q",
            "-e",
            r#"BEGIN { printf("%d %d %s %s %d\n", pid, tid, comm, probe, cpu < 4096); exit(); }"#,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped()),
    )
    .unwrap();
    let pid = child.id();
    let output = wait_output(child, Duration::from_secs(20));
    assert_eq!(
        stdout(&output),
        format!("{pid} {pid} steadytrace BEGIN 1\n\n\n"),
        "stderr: {}",
        stderr(&output)
    );
}

/// The ring buffer is fitted to the script (`-v` says its size), and holds all that BEGIN prints before the
/// reader first looks: a page where the output is bounded, 1 MiB where a loop prints.
#[test]
fn the_ring_buffer_holds_all_that_begin_prints() {
    if !can_trace("the_ring_buffer_holds_all_that_begin_prints") {
        return;
    }
    let cases = [
        (r#"BEGIN { printf("x\n"); exit(); }"#, 1, "4 KiB"),
        // 400 records of 16 + 8 bytes, 9600 bytes: 16 KiB.
        (
            r#"BEGIN { unroll(100) { printf("%d\n", pid); printf("%d\n", tid); printf("%d\n", pid); printf("%d\n", tid); } exit(); }"#,
            400,
            "16 KiB",
        ),
        // A loop: no bound. (No more output than the test's pipe holds while the tracer runs.)
        (r#"BEGIN { for ($i : 0..5000) { printf("%d\n", $i); } exit(); }"#, 5000, "1024 KiB"),
        // Ten seconds of both intervals' records: 1001 of 24 bytes, 101 exit records.
        (r#"interval:ms:10 { printf("x\n"); } interval:ms:100 { exit(); }"#, 5, "32 KiB"),
        (r#"config = { perf_rb_pages = 3 } BEGIN { printf("x\n"); exit(); }"#, 1, "16 KiB"),
    ];
    for (script, lines, size) in cases {
        let output = run_with(&["-v", "-e", script], Duration::from_secs(20));
        let (out, err) = (stdout(&output), stderr(&output));
        assert!(output.status.success(), "{script}: {err}");
        assert!(err.contains(&format!("the ring buffer holds {size}\n")), "{script}: {err}");
        assert!(!err.contains("lost"), "{script}: {err}");
        let printed = out.lines().filter(|l| !l.is_empty()).count();
        assert!(printed >= lines, "{script}: {printed} lines of {lines}\n{err}");
    }
}

#[test]
fn interval_fires_once_per_period_and_reports_what_it_skipped() {
    if !can_trace("interval_fires_once_per_period_and_reports_what_it_skipped") {
        return;
    }
    let output =
        run(r#"interval:ms:20 { printf("tick\n"); } interval:s:1 { exit(); }"#, Duration::from_secs(20));
    let fired = stdout(&output).lines().filter(|l| *l == "tick").count() as i64;
    let errors = stderr(&output);
    let skipped: i64 = errors
        .lines()
        .find(|l| l.contains("interval:ms:20:") && l.contains("skipped"))
        .and_then(|l| l.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or(0);
    assert!(
        (fired + skipped - 50).abs() <= 1,
        "fired {fired} + skipped {skipped} should be 50 ± 1; stderr: {errors}"
    );
}

#[test]
fn interval_keeps_firing_while_cpu1_flaps() {
    let Some(hotplug) = Hotplug::acquire("interval_keeps_firing_while_cpu1_flaps", 1) else { return };
    intervals_through_flapping(hotplug, None);
}

#[test]
fn interval_keeps_firing_through_the_trigger_uprobe_while_cpu1_flaps() {
    let test = "interval_keeps_firing_through_the_trigger_uprobe_while_cpu1_flaps";
    let Some(hotplug) = Hotplug::acquire(test, 1) else { return };
    intervals_through_flapping(hotplug, Some(("STEADYTRACE_TRIGGER", "uprobe")));
}

/// cpu1 goes offline and online every 100 ms for 3 s: a 10 ms interval must fire in every 100 ms
/// window, and a 1 s interval started before the flapping must end the tracer on time.
fn intervals_through_flapping(mut hotplug: Hotplug, env: Option<(&str, &str)>) {
    let mut ticker = Reaped::spawn(
        tracer(&["-e", r#"interval:ms:10 { printf("%lu\n", nsecs); }"#])
            .envs(env)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .unwrap();
    let _stderr = wait_for_stderr_line(&mut ticker, "Attached");
    // Started before the flapping: must exit on time all the same.
    let exiter_started = Instant::now();
    let mut exiter = Reaped::spawn(
        tracer(&["-e", "interval:s:1 { exit(); }"]).stdout(Stdio::piped()).stderr(Stdio::piped()),
    )
    .unwrap();
    let _exiter_stderr = wait_for_stderr_line(&mut exiter, "Attached");

    let flap_start = monotonic_ns();
    let mut exiter_took = None;
    while monotonic_ns() - flap_start < 3_000_000_000 {
        hotplug.set_online(1, false);
        std::thread::sleep(Duration::from_millis(50));
        hotplug.set_online(1, true);
        std::thread::sleep(Duration::from_millis(50));
        if exiter_took.is_none() && exiter.try_wait().unwrap().is_some() {
            exiter_took = Some(exiter_started.elapsed());
        }
    }
    let flap_end = monotonic_ns();
    drop(hotplug);
    let output = ticker.kill_with_output();

    let firings: Vec<u64> = stdout(&output).lines().filter_map(|l| l.trim().parse().ok()).collect();
    let gaps: Vec<u64> = firings.windows(2).map(|w| (w[1] - w[0]) / 1_000_000).filter(|&g| g > 15).collect();
    eprintln!("gaps over 15 ms between firings: {gaps:?}");
    let mut window = flap_start;
    while window + 100_000_000 <= flap_end {
        assert!(
            firings.iter().any(|&t| t >= window && t < window + 100_000_000),
            "no firing in the 100 ms window starting {} ms into the flapping",
            (window - flap_start) / 1_000_000
        );
        window += 100_000_000;
    }
    let took = exiter_took.expect("interval:s:1 { exit(); } had not exited after 3 s of flapping");
    assert!(took >= Duration::from_millis(900), "exited too early: {took:?}");
    assert!(took <= Duration::from_millis(2900), "exited late: {took:?}");
}

#[test]
fn two_tracers_see_only_their_own_firings() {
    if !can_trace("two_tracers_see_only_their_own_firings") {
        return;
    }
    two_tracers_at_once(None);
}

#[test]
fn two_tracers_see_only_their_own_firings_through_the_trigger_uprobe() {
    if !can_trace("two_tracers_see_only_their_own_firings_through_the_trigger_uprobe") {
        return;
    }
    // Both tracers put a uprobe on the same function of the same binary: the pid filter keeps them apart.
    two_tracers_at_once(Some(("STEADYTRACE_TRIGGER", "uprobe")));
}

fn two_tracers_at_once(env: Option<(&str, &str)>) {
    let script = r#"BEGIN { printf("begin %d\n", pid); } interval:ms:50 { printf("tick %d\n", pid); } interval:ms:500 { exit(); }"#;
    let children: Vec<_> = (0..2)
        .map(|_| {
            let mut command = tracer(&["-q", "-e", script]);
            command.envs(env);
            Reaped::spawn(command.stdout(Stdio::piped()).stderr(Stdio::piped())).unwrap()
        })
        .collect();
    for child in children {
        let pid = child.id();
        let output = wait_output(child, Duration::from_secs(20));
        let text = stdout(&output);
        let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.first().copied(), Some(format!("begin {pid}").as_str()), "{text}");
        assert_eq!(lines.iter().filter(|l| l.starts_with("begin")).count(), 1, "{text}");
        assert!(
            lines.iter().all(|l| l.ends_with(&format!(" {pid}"))),
            "another tracer's firing leaked in:\n{text}"
        );
        let ticks = lines.iter().filter(|l| l.starts_with("tick")).count();
        assert!((8..=10).contains(&ticks), "expected about 9 ticks of its own, got {ticks}:\n{text}");
    }
}

#[test]
fn sigint_runs_end_and_exits_zero() {
    if !can_trace("sigint_runs_end_and_exits_zero") {
        return;
    }
    let mut child = Reaped::spawn(
        tracer(&["-e", r#"interval:s:10 { } END { printf("end\n"); }"#])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .unwrap();
    let stderr_rest = wait_for_stderr_line(&mut child, "Attached");
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let output = wait_output(child, Duration::from_secs(10));
    assert_eq!(stdout(&output), "end\n\n\n", "stderr: {}", stderr_rest.join().unwrap());
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn a_syntax_error_points_at_the_token() {
    let path = std::env::temp_dir().join(format!("steadytrace-syntax-{}.bt", std::process::id()));
    let mut file = fs::File::create(&path).unwrap();
    write!(file, "BEGIN {{\n  printf(\"x\\n\")\n  exit(;\n}}\n").unwrap();
    let output = tracer(&[path.to_str().unwrap()]).output().unwrap();
    fs::remove_file(&path).unwrap();
    let errors = stderr(&output);
    assert!(!output.status.success());
    assert_eq!(
        errors,
        format!(
            "{}:3:3: ERROR: expected `;` or `}}` after the statement, found `exit`\n  exit(;\n  ^^^^\n",
            path.display()
        )
    );
}

/// The fds of `pid` that hold an attachment (a BPF link or a perf event).
fn attachment_fds(pid: u32) -> usize {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|entry| fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| {
            let target = target.to_string_lossy();
            target.contains("bpf_link") || target.contains("perf_event")
        })
        .count()
}

/// A kernel BPF object: a program, a link or a map, by its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum BpfObject {
    Program(u32),
    Link(u32),
    Map(u32),
}

impl BpfObject {
    /// Whether the kernel still has it.
    fn exists(self) -> bool {
        // SAFETY: plain bpf(2) commands taking an id; a returned descriptor is closed at once.
        let fd = unsafe {
            match self {
                BpfObject::Program(id) => libbpf_sys::bpf_prog_get_fd_by_id(id),
                BpfObject::Link(id) => libbpf_sys::bpf_link_get_fd_by_id(id),
                BpfObject::Map(id) => libbpf_sys::bpf_map_get_fd_by_id(id),
            }
        };
        if fd >= 0 {
            // SAFETY: a descriptor we own.
            unsafe { libc::close(fd) };
            return true;
        }
        assert_eq!(-fd, libc::ENOENT, "looking up {self:?}: {}", std::io::Error::from_raw_os_error(-fd));
        false
    }
}

/// The BPF objects `pid` holds descriptors of, as its fdinfo files name them (a link's also names the
/// program it runs).
fn held_bpf_objects(pid: u32) -> std::collections::BTreeSet<BpfObject> {
    let mut held = std::collections::BTreeSet::new();
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/fdinfo")) else { return held };
    for entry in dir.flatten() {
        let Ok(info) = fs::read_to_string(entry.path()) else { continue };
        for line in info.lines() {
            let Some((key, value)) = line.split_once(':') else { continue };
            let Ok(id) = value.trim().parse() else { continue };
            match key {
                "prog_id" => held.insert(BpfObject::Program(id)),
                "link_id" => held.insert(BpfObject::Link(id)),
                "map_id" => held.insert(BpfObject::Map(id)),
                _ => false,
            };
        }
    }
    held
}

/// Runs `script` and checks that every BPF program, link and map the tracer held while it ran is gone
/// once it has exited. The objects are those named in the tracer's own fdinfo files, so programs that
/// other tracers (other tests, other users) load meanwhile cannot be mistaken for ours, and what the
/// kernel frees asynchronously after a close (links, uprobe_multi links after an RCU grace period) is
/// given a few seconds. Whatever keeps an object alive past the tracer's exit is found: a pin in bpffs,
/// a descriptor inherited by a process that outlives it, an attachment the kernel keeps without a
/// descriptor. (uprobe_events and bpftool's pid column could not: uprobe_multi links and perf-PMU
/// uprobes are never listed in uprobe_events, and the pid of a process that has exited owns nothing.)
fn leaves_nothing_behind(
    test: &str,
    script: &str,
    env: &[(&str, &str)],
    attachments_during_run: Option<usize>,
) {
    if !can_trace(test) {
        return;
    }
    let mut child = Reaped::spawn(
        tracer(&["-e", script]).envs(env.iter().copied()).stdout(Stdio::piped()).stderr(Stdio::piped()),
    )
    .unwrap();
    let stderr_rest = wait_for_stderr_line(&mut child, "Attached");
    let pid = child.id();
    if let Some(expected) = attachments_during_run {
        assert_eq!(attachment_fds(pid), expected, "attachment fds during the run");
    }
    let held = held_bpf_objects(pid);
    let output = wait_output(child, Duration::from_secs(20));
    let errors = stderr_rest.join().unwrap();
    assert!(output.status.success(), "{errors}");
    let programs = held.iter().filter(|o| matches!(o, BpfObject::Program(_))).count();
    let probes = script.matches('{').count();
    assert!(programs >= probes, "the tracer held {programs} programs for {probes} probes: {held:?}");

    // The kernel drops some references in deferred work (a program array is cleared from a workqueue after its
    // last descriptor closes), which a machine busy with other work can hold back for seconds: what is gone
    // within 30 s was not kept by anything.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut left: Vec<BpfObject> = held.into_iter().collect();
    while !left.is_empty() && Instant::now() < deadline {
        left.retain(|o| o.exists());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(left.is_empty(), "BPF objects of the tracer outlived it by 30 s: {left:?}\nstderr: {errors}");
}

/// BEGIN, END and intervals only.
const RUN_ON_REQUEST: &str = "BEGIN { } interval:ms:100 { } interval:s:1 { exit(); } END { }";

#[test]
fn probes_run_on_request_attach_nothing() {
    leaves_nothing_behind("probes_run_on_request_attach_nothing", RUN_ON_REQUEST, &[], Some(0));
}

#[test]
fn the_trigger_uprobe_is_one_link_and_gone_after_exit() {
    // One uprobe on the trigger function serves all four probes.
    let env = [("STEADYTRACE_TRIGGER", "uprobe")];
    leaves_nothing_behind(
        "the_trigger_uprobe_is_one_link_and_gone_after_exit",
        RUN_ON_REQUEST,
        &env,
        Some(1),
    );
}

/// Every kind of probe this machine has: uprobe and uretprobe, tracepoint, raw tracepoint, profile,
/// software, interval, BEGIN and END.
fn every_probe_type() -> String {
    let w = workload();
    format!(
        "BEGIN {{ }} uprobe:{w}:workload_add {{ @u = count(); }} uretprobe:{w}:workload_add {{ @r = count(); }}
         tracepoint:syscalls:sys_enter_getppid {{ @t = count(); }} rawtracepoint:sys_enter {{ @s = count(); }}
         profile:hz:99 {{ @p = count(); }} software:cpu-clock:1000000 {{ @c = count(); }}
         interval:ms:100 {{ @i = count(); }} interval:s:1 {{ exit(); }} END {{ clear(@s); }}",
        w = w.display()
    )
}

#[test]
fn every_probe_type_leaves_nothing_behind() {
    leaves_nothing_behind("every_probe_type_leaves_nothing_behind", &every_probe_type(), &[], None);
}

#[test]
fn every_probe_type_leaves_nothing_behind_through_perf_uprobes() {
    // The paths of kernels before 5.10 and 6.6: the trigger's uprobe, and perf uprobe events.
    let env = [("STEADYTRACE_TRIGGER", "uprobe"), ("STEADYTRACE_UPROBE_ATTACH", "perf")];
    leaves_nothing_behind(
        "every_probe_type_leaves_nothing_behind_through_perf_uprobes",
        &every_probe_type(),
        &env,
        None,
    );
}

#[test]
fn the_perf_uprobe_fallback_runs_begin_interval_end() {
    let env = Some(("STEADYTRACE_TRIGGER", "uprobe"));
    let mut command = tracer(&[
        "-q",
        "-e",
        r#"BEGIN { printf("b\n"); } interval:ms:50 { printf("t\n"); exit(); } END { printf("e\n"); }"#,
    ]);
    command.envs(env).env("STEADYTRACE_UPROBE_ATTACH", "perf");
    if !can_trace("the_perf_uprobe_fallback_runs_begin_interval_end") {
        return;
    }
    let output = wait_output(
        Reaped::spawn(command.stdout(Stdio::piped()).stderr(Stdio::piped())).unwrap(),
        Duration::from_secs(10),
    );
    assert_eq!(stdout(&output), "b\nt\ne\n\n\n", "stderr: {}", stderr(&output));
}

#[test]
fn a_verifier_rejection_points_at_the_script_line() {
    if !can_trace("a_verifier_rejection_points_at_the_script_line") {
        return;
    }
    // Passes every check of the compiler, but never ends: only the kernel's verifier can refuse it.
    let path = std::env::temp_dir().join(format!("steadytrace-verifier-{}.bt", std::process::id()));
    fs::write(&path, "BEGIN {\n  $i = 0;\n  while ($i < 10) {\n    printf(\"spin\\n\");\n  }\n}\n").unwrap();
    let output = tracer(&[path.to_str().unwrap()]).output().unwrap();
    fs::remove_file(&path).unwrap();
    let errors = stderr(&output);
    assert_eq!(output.status.code(), Some(1));
    let location = format!(
        "{}:4:5: ERROR: the kernel's BPF verifier rejected this: infinite loop detected",
        path.display()
    );
    assert!(errors.starts_with(&location), "{errors}");
    assert!(errors.contains("\n    printf(\"spin\\n\");\n    ^^^^^^^^^^^^^^^^\n"), "{errors}");
    assert!(errors.contains("run with -v to see the verifier's whole log"), "{errors}");
}
