//! Least privilege: what works under a seccomp filter that fails perf_event_open with EPERM (as a
//! container's profile can), with only CAP_BPF and CAP_PERFMON, and what the messages say when
//! something cannot work; `--info`. The situations are made for real: the seccomp filter by
//! examples/deny_perf_event_open.rs, the capabilities by util-linux's setpriv.

mod common;

use common::*;
use std::path::PathBuf;
use std::process::{Command, Output};

fn example(name: &str) -> PathBuf {
    std::path::Path::new(BIN).parent().expect("target dir").join("examples").join(name)
}

/// How the tracer is started: the privilege situation of one row of docs/CONTAINERS.md.
#[derive(Clone, Copy, Debug)]
enum Situation {
    Root,
    /// perf_event_open fails with EPERM.
    Seccomp,
    /// CAP_BPF and CAP_PERFMON, nothing else (no CAP_SYS_ADMIN, no CAP_SYS_RESOURCE).
    BpfAndPerfmon,
    /// Only CAP_PERFMON.
    PerfmonOnly,
}

const BPF_AND_PERFMON: &str = "-all,+bpf,+perfmon";

fn setpriv(caps: &str) -> Command {
    let mut command = Command::new("setpriv");
    command.args([
        &format!("--inh-caps={caps}"),
        &format!("--ambient-caps={caps}"),
        &format!("--bounding-set={caps}"),
        "--",
    ]);
    command
}

/// The tracer with `args`, started in `situation`; `None` (after [`skip`]) when it cannot be made.
fn tracer_in(situation: Situation, test: &str, args: &[&str]) -> Option<Command> {
    if !can_trace(test) {
        return None;
    }
    if tracefs().is_none() {
        skip(test, "needs tracefs");
        return None;
    }
    let mut command = match situation {
        Situation::Root => Command::new(BIN),
        Situation::Seccomp => {
            let mut c = Command::new(example("deny_perf_event_open"));
            c.arg(BIN);
            c
        }
        Situation::BpfAndPerfmon | Situation::PerfmonOnly => {
            if Command::new("setpriv").arg("--version").output().is_err() {
                skip(test, "needs setpriv (util-linux)");
                return None;
            }
            let caps =
                if matches!(situation, Situation::PerfmonOnly) { "-all,+perfmon" } else { BPF_AND_PERFMON };
            let mut c = setpriv(caps);
            c.arg(BIN);
            c
        }
    };
    command.args(args);
    Some(command)
}

fn w() -> String {
    workload().to_string_lossy().into_owned()
}

/// BEGIN, END, a syscall tracepoint (entry and exit), a raw tracepoint and a uprobe, on a workload
/// calling getppid 7 times on 2 threads: exact counts.
fn the_set(situation: Situation, test: &str) {
    let script = format!(
        r#"BEGIN {{ printf("begin\n"); }}
           tracepoint:syscalls:sys_enter_getppid /pid == cpid/ {{ @enter = count(); }}
           tracepoint:syscalls:sys_exit_getppid /pid == cpid/ {{ @positive[args.ret > 0] = count(); }}
           rawtracepoint:sched_process_exit /pid == cpid && tid == pid/ {{ @exits = count(); }}
           uprobe:{w}:main {{ @main = count(); }}
           END {{ printf("end\n"); }}"#,
        w = w()
    );
    let command = format!("{} getppid 7 2", w());
    let Some(mut tracer) = tracer_in(situation, test, &["-v", "-e", &script, "-c", &command]) else { return };
    let output = tracer.output().unwrap();
    let err = stderr(&output);
    assert_eq!(
        stdout(&output),
        "begin\nend\n\n\n@enter: 7\n@exits: 1\n@main: 1\n@positive[true]: 7\n",
        "{situation:?}: {err}"
    );
    assert!(output.status.success(), "{situation:?}: {err}");
    if matches!(situation, Situation::Seccomp) {
        assert!(err.contains("raw_syscalls:sys_enter, for system call"), "{err}");
    }
}

/// `interval:ms:10`, five firings, then exit.
fn interval(situation: Situation, test: &str) {
    let script =
        r#"BEGIN { @n = 0; } interval:ms:10 { @n = @n + 1; if (@n == 5) { printf("five\n"); exit(); } }"#;
    let Some(mut tracer) = tracer_in(situation, test, &["-q", "-e", script]) else { return };
    let output = tracer.output().unwrap();
    assert_eq!(stdout(&output), "five\n\n\n@n: 5\n", "{situation:?}: {}", stderr(&output));
}

#[test]
fn under_a_seccomp_filter_denying_perf_event_open_the_set_works() {
    the_set(Situation::Seccomp, "under_a_seccomp_filter_denying_perf_event_open_the_set_works");
    interval(Situation::Seccomp, "under_a_seccomp_filter_denying_perf_event_open_the_set_works");
}

#[test]
fn with_only_cap_bpf_and_cap_perfmon_the_set_works() {
    the_set(Situation::BpfAndPerfmon, "with_only_cap_bpf_and_cap_perfmon_the_set_works");
    interval(Situation::BpfAndPerfmon, "with_only_cap_bpf_and_cap_perfmon_the_set_works");
}

#[test]
fn as_root_the_set_works() {
    the_set(Situation::Root, "as_root_the_set_works");
    interval(Situation::Root, "as_root_the_set_works");
}

#[test]
fn with_only_cap_bpf_and_cap_perfmon_profile_probes_run() {
    let test = "with_only_cap_bpf_and_cap_perfmon_profile_probes_run";
    let script = "profile:hz:99 { @ = 1; } interval:ms:200 { exit(); }";
    let Some(mut tracer) = tracer_in(Situation::BpfAndPerfmon, test, &["-q", "-e", script]) else { return };
    let output = tracer.output().unwrap();
    assert_eq!(stdout(&output), "\n\n@: 1\n", "{}", stderr(&output));
}

/// Perf events refused, profile samples on BPF timers (Linux 6.7; tests/rootless_profile.rs checks the
/// samples).
#[test]
fn profile_under_the_filter_runs_on_bpf_timers() {
    let test = "profile_under_the_filter_runs_on_bpf_timers";
    let script = "profile:hz:99 { @ = 1; } interval:ms:200 { exit(); }";
    let Some(mut tracer) = tracer_in(Situation::Seccomp, test, &["-v", "-q", "-e", script]) else { return };
    let info = stdout(&tracer_in(Situation::Root, test, &["--info"]).unwrap().output().unwrap());
    if !info.lines().any(|line| line == "timer_cpu_pin: yes") {
        skip(
            test,
            "this kernel does not pin BPF timers to a CPU (Linux 6.7): profile needs perf events here",
        );
        return;
    }
    let output = tracer.output().unwrap();
    let err = stderr(&output);
    assert_eq!(stdout(&output), "\n\n@: 1\n", "{err}");
    assert!(err.contains("profile:hz:99 runs on a BPF timer on every online CPU"), "{err}");
}

/// Where the kernel does not pin BPF timers (STEADYTRACE_KERNEL_WITHOUT makes this one such), the refused
/// perf event is the error, with the ways out and the release that would run it.
#[test]
fn profile_under_the_filter_without_pinned_timers_fails_naming_perf_event_open_and_the_ways_out() {
    let test = "profile_under_the_filter_without_pinned_timers_fails_naming_perf_event_open_and_the_ways_out";
    let Some(mut tracer) = tracer_in(Situation::Seccomp, test, &["-e", "profile:hz:99 { @ = count(); }"])
    else {
        return;
    };
    let output = tracer.env("STEADYTRACE_KERNEL_WITHOUT", "timer_cpu_pin").output().unwrap();
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    for needle in [
        "`profile:hz:99`",
        "perf_event_open",
        "EPERM",
        "CAP_PERFMON",
        "kernel.perf_event_paranoid",
        "seccomp profile",
        "Linux 6.7 and later would sample profile probes without perf events",
    ] {
        assert!(err.contains(needle), "`{needle}` missing: {err}");
    }
    assert!(!err.contains("root"), "{err}");
}

#[test]
fn a_classic_tracepoint_under_the_filter_suggests_the_raw_tracepoint() {
    let test = "a_classic_tracepoint_under_the_filter_suggests_the_raw_tracepoint";
    let script = "tracepoint:sched:sched_switch { @ = count(); }";
    let Some(mut tracer) = tracer_in(Situation::Seccomp, test, &["-e", script]) else { return };
    let output = tracer.output().unwrap();
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("perf_event_open"), "{err}");
    assert!(err.contains("try `rawtracepoint:sched_switch`"), "{err}");
    assert!(err.contains("not the record's fields (prev_comm, prev_pid"), "{err}");
}

#[test]
fn without_cap_bpf_the_message_says_so() {
    let test = "without_cap_bpf_the_message_says_so";
    let Some(mut tracer) = tracer_in(Situation::PerfmonOnly, test, &["-e", "BEGIN { exit(); }"]) else {
        return;
    };
    let output = tracer.output().unwrap();
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("lacks CAP_BPF (it holds CAP_PERFMON)"), "{err}");
    assert!(err.contains("--cap-add BPF"), "{err}");
}

#[test]
fn in_a_user_namespace_the_message_says_so() {
    let test = "in_a_user_namespace_the_message_says_so";
    if !can_trace(test) {
        return;
    }
    let output: Output = match Command::new("unshare")
        .args(["--user", "--map-root-user", BIN, "-e", "BEGIN { exit(); }"])
        .output()
    {
        Ok(output) if !stderr(&output).contains("unshare: ") => output,
        _ => {
            skip(test, "cannot make a user namespace");
            return;
        }
    };
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("user namespace other than the host's"), "{err}");
}

/// In a pid namespace of its own (a container's), `pid`, `tid` and `-p` are that namespace's numbers, as
/// `cpid` is: `/pid == cpid/` matches the command's calls (made in a thread of its own).
#[test]
fn in_a_pid_namespace_pids_are_that_namespaces() {
    let test = "in_a_pid_namespace_pids_are_that_namespaces";
    if !can_trace(test) {
        return;
    }
    if tracefs().is_none() {
        return skip(test, "tracefs cannot be mounted");
    }
    let script =
        "tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { @calls[pid == cpid, tid > pid] = count(); }";
    let command = format!("{} getppid 3 1", w());
    let output = match Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", BIN, "-e", script, "-c", &command])
        .output()
    {
        Ok(output) if !stderr(&output).contains("unshare: ") => output,
        _ => {
            skip(test, "cannot make a pid namespace");
            return;
        }
    };
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "\n\n@calls[true, true]: 3\n", "{}", stderr(&output));
}

/// Syscall tracepoints print the same through either path: the arguments read from the registers, the
/// return value and the call's number.
#[test]
fn syscall_tracepoints_print_the_same_through_the_raw_path() {
    let test = "syscall_tracepoints_print_the_same_through_the_raw_path";
    let script = r#"tracepoint:syscalls:sys_enter_openat /pid == cpid/ { @open[args.__syscall_nr, args.dfd, args.flags, args.mode] = count(); }
                    tracepoint:syscalls:sys_exit_openat /pid == cpid/ { @ret[args.__syscall_nr, args.ret >= 0] = count(); }"#;
    let command = format!("{} open /etc/hostname 5", w());
    let mut outputs = vec![];
    for attach in ["perf", "raw"] {
        let Some(mut tracer) = tracer_in(Situation::Root, test, &["-q", "-e", script, "-c", &command]) else {
            return;
        };
        let output = tracer.env("STEADYTRACE_SYSCALL_ATTACH", attach).output().unwrap();
        assert!(output.status.success(), "{attach}: {}", stderr(&output));
        outputs.push(stdout(&output));
    }
    assert_eq!(outputs[0], outputs[1]);
    // A comparison is a bool, printed `true` as current bpftrace prints it.
    assert!(outputs[0].contains(&format!("@ret[{}, true]: ", libc::SYS_openat)), "{}", outputs[0]);
}

const INFO_KEYS: [&str; 38] = [
    "kernel_release",
    "arch",
    "btf",
    "lockdown",
    "perf_event_open",
    "perf_event_paranoid",
    "seccomp_filter",
    "initial_user_namespace",
    "capabilities",
    "unprivileged_bpf_disabled",
    "ringbuf",
    "bpf_loop",
    "bpf_timer",
    "timer_cpu_pin",
    "raw_tp",
    "run_on_request",
    "tp_btf",
    "fentry",
    "kprobes",
    "kprobe_multi",
    "uprobes",
    "uprobe_multi",
    "tracefs",
    "debugfs",
    "cpus_online",
    "cpus_hotpluggable",
    "interval_engine",
    "profile_engine",
    "syscall_tracepoints",
    "for_each_map_elem",
    "percpu_lookup",
    "get_func_ip",
    "attach_cookie",
    "ns_pid",
    "d_path",
    "per_cpu_ptr",
    "ktime_get_boot_ns",
    "ktime_get_tai_ns",
];

#[test]
fn info_reports_every_field_and_what_this_machine_has() {
    if !can_trace("info_reports_every_field_and_what_this_machine_has") {
        return;
    }
    let output = tracer(&["--info"]).output().unwrap();
    let text = stdout(&output);
    for key in INFO_KEYS {
        assert!(text.lines().any(|l| l.starts_with(&format!("{key}: "))), "{key} missing:\n{text}");
    }
    let json = stdout(&tracer(&["--info", "-f", "json"]).output().unwrap());
    assert_eq!(json.lines().count(), 1, "{json}");
    for key in INFO_KEYS {
        assert!(json.contains(&format!("\"{key}\": ")), "{key} missing: {json}");
    }
    // What this kind of machine is known to have (docs: /work/shared/FACTS.md).
    let machine_known =
        std::fs::read_to_string("/proc/sys/kernel/osrelease").is_ok_and(|r| r.starts_with("6.18"));
    if !machine_known {
        skip(
            "info_reports_every_field_and_what_this_machine_has",
            "the checks of this machine's features (another kernel)",
        );
        return;
    }
    for line in ["btf: yes", "kprobes: no", "uprobe_multi: yes", "perf_event_open: yes", "ringbuf: yes"] {
        assert!(text.lines().any(|l| l == line), "`{line}` missing:\n{text}");
    }
    let hotpluggable = text.lines().find(|l| l.starts_with("cpus_hotpluggable: ")).unwrap();
    assert!(hotpluggable.contains("cpu1"), "{hotpluggable}");
    assert!(json.contains("\"btf\": true") && json.contains("\"kprobes\": false"), "{json}");
}

#[test]
fn info_under_the_filter_says_perf_event_open_is_denied_and_why() {
    let test = "info_under_the_filter_says_perf_event_open_is_denied_and_why";
    let Some(mut tracer) = tracer_in(Situation::Seccomp, test, &["--info"]) else { return };
    let text = stdout(&tracer.output().unwrap());
    let line = text.lines().find(|l| l.starts_with("perf_event_open: ")).unwrap();
    assert!(line.starts_with("perf_event_open: no (Operation not permitted"), "{line}");
    assert!(line.contains("a seccomp filter is installed"), "{line}");
    assert!(text.contains("syscall_tracepoints: raw_syscalls raw tracepoints"), "{text}");
}
