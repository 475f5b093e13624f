//! Rootless containers through BPF tokens (issue 37): root of an unprivileged user namespace, with a BPF
//! filesystem delegated to it on /sys/fs/bpf, the way systemd 258 (PrivateBPF=yes), LXD and Incus run a
//! container. The namespace is made for real by examples/delegated_userns.rs (built by `cargo test` with the
//! other examples); root inside is uid 100000 outside, with no capability in the initial namespace.

mod common;

use common::delegated::*;
use common::*;
use std::fs;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

/// Lines of the host's mount table that hold a bpf filesystem, or carry delegate options.
fn host_bpf_mounts() -> Vec<String> {
    fs::read_to_string("/proc/self/mountinfo")
        .expect("the host's mountinfo")
        .lines()
        .filter(|line| line.contains(" - bpf ") || line.contains("delegate_"))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_harness_delegates_a_bpf_filesystem_and_leaves_nothing_on_the_host() {
    let test = "the_harness_delegates_a_bpf_filesystem_and_leaves_nothing_on_the_host";
    if !can_delegate(test) {
        return;
    }
    if tracefs().is_none() {
        skip(test, "needs tracefs");
        return;
    }
    let mounts_before = fs::read_to_string("/proc/self/mountinfo").expect("the host's mountinfo");
    let bpf_before = host_bpf_mounts();
    let script = "id -u; id -g; cat /proc/self/uid_map /proc/self/gid_map; \
                  grep ' /sys/fs/bpf ' /proc/self/mountinfo; grep CapEff /proc/self/status; \
                  if ls /sys/kernel/tracing >/dev/null 2>&1; then echo tracefs readable; \
                  else echo tracefs unreadable; fi";
    let output = output_of(&mut inside(&["sh", "-c", script]));
    let out = stdout(&output);
    assert!(output.status.success(), "{:?}\nstdout:\n{out}\nstderr:\n{}", output.status, stderr(&output));
    let lines: Vec<&str> = out.lines().collect();
    let context = format!("what the namespace showed:\n{out}");
    assert_eq!(lines.get(..2), Some(&["0", "0"][..]), "root inside: {context}");
    for map in &lines[2..4] {
        assert_eq!(
            map.split_whitespace().collect::<Vec<_>>(),
            ["0", UID_BASE, "1"],
            "the id maps: {context}"
        );
    }
    let mount =
        lines.iter().find(|l| l.contains(" /sys/fs/bpf ")).unwrap_or_else(|| panic!("no bpffs: {context}"));
    assert!(mount.contains(" - bpf "), "not a bpffs on /sys/fs/bpf: {context}");
    for option in ["delegate_cmds=any", "delegate_maps=any", "delegate_progs=any", "delegate_attachs=any"] {
        assert!(mount.split([' ', ',']).any(|o| o == option), "{option} missing: {context}");
    }
    let cap_eff = lines.iter().find_map(|l| l.strip_prefix("CapEff:")).unwrap_or_else(|| panic!("{context}"));
    let cap_eff = u64::from_str_radix(cap_eff.trim(), 16).expect("CapEff in hex");
    // CAP_SYS_ADMIN (21) and CAP_BPF (39) in the namespace: what a BPF token checks against its user namespace.
    assert!(cap_eff & (1 << 21) != 0 && cap_eff & (1 << 39) != 0, "capabilities inside: {context}");
    assert!(
        lines.contains(&"tracefs unreadable"),
        "kernel uid {UID_BASE} must not read root's tracefs: {context}"
    );

    assert_eq!(host_bpf_mounts(), bpf_before, "a bpffs was left mounted on the host");
    let mounts_after = fs::read_to_string("/proc/self/mountinfo").expect("the host's mountinfo");
    // Other tests may mount meanwhile; a line the harness added would name /sys/fs/bpf.
    for line in mounts_after.lines().filter(|line| !mounts_before.contains(line)) {
        assert!(!line.contains("/sys/fs/bpf"), "the harness left a mount on the host: {line}");
    }
}

/// bpf(2) from inside, by Python's ctypes: a token from /sys/fs/bpf (BPF_TOKEN_CREATE, 36), an ARRAY map without
/// a token, then with it (BPF_F_TOKEN_FD in map_flags, map_token_fd at offset 76 of union bpf_attr).
const BPF_PROBE: &str = r#"
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def bpf(cmd, attr):
    r = libc.syscall(321, cmd, ctypes.create_string_buffer(bytes(attr), len(attr)), len(attr))
    return ("ok", r) if r >= 0 else ("errno", ctypes.get_errno())
fs = os.open("/sys/fs/bpf", os.O_RDONLY | os.O_DIRECTORY)
token = bpf(36, struct.pack("II", 0, fs))
print("token", *token)
print("map", *bpf(0, struct.pack("IIII", 2, 4, 4, 1).ljust(80, b"\0")))
if token[0] == "ok":
    attr = bytearray(struct.pack("IIIII", 2, 4, 4, 1, 1 << 16).ljust(80, b"\0"))
    struct.pack_into("i", attr, 76, token[1])
    print("map_with_token", *bpf(0, attr))
"#;

#[test]
fn a_bpf_token_is_made_inside_only_from_the_delegated_filesystem() {
    let test = "a_bpf_token_is_made_inside_only_from_the_delegated_filesystem";
    if !can_delegate(test) {
        return;
    }
    // Not a python3 of PATH: root's (pyenv under /root, say) may be out of reach of uid 100000.
    let Some(python) =
        ["/usr/bin/python3", "/usr/local/bin/python3"].into_iter().find(|p| Path::new(p).exists())
    else {
        skip(test, "needs python3 in /usr/bin or /usr/local/bin to call bpf(2) inside");
        return;
    };
    let result = |output: &Output, what: &str| -> String {
        let out = stdout(output);
        assert!(output.status.success(), "{:?}\nstdout:\n{out}\nstderr:\n{}", output.status, stderr(output));
        let line = out.lines().find(|l| l.split(' ').next() == Some(what));
        let line = line.unwrap_or_else(|| panic!("no {what} line in:\n{out}"));
        line.split_once(' ').expect("a result").1.to_string()
    };
    let eperm = format!("errno {}", libc::EPERM);
    // With unprivileged BPF allowed (0), anyone may make an ARRAY map: nothing to show then.
    let unprivileged_bpf_disabled = fs::read_to_string("/proc/sys/kernel/unprivileged_bpf_disabled")
        .map(|s| s.trim() != "0")
        .unwrap_or(true);

    let delegated = output_of(&mut inside(&[python, "-c", BPF_PROBE]));
    assert!(result(&delegated, "token").starts_with("ok "), "{}", stdout(&delegated));
    if unprivileged_bpf_disabled {
        assert_eq!(result(&delegated, "map"), eperm, "a map without the token");
    }
    assert!(result(&delegated, "map_with_token").starts_with("ok "), "a map with the token");

    // Without delegation /sys/fs/bpf is the host's: sysfs's directory (EINVAL, not a bpffs root) or the host's
    // bpffs, owned by the initial user namespace (EPERM).
    let plain = output_of(&mut inside_without_delegation(&[python, "-c", BPF_PROBE]));
    let token = result(&plain, "token");
    assert!(
        [format!("errno {}", libc::EINVAL), eperm.clone()].contains(&token),
        "a token from an undelegated /sys/fs/bpf: {token}"
    );
    if unprivileged_bpf_disabled {
        assert_eq!(result(&plain, "map"), eperm, "a map without delegation");
    }
}

/// The tracer, run by the harness as root of the namespace with `args`: its output, within 30 s.
fn tracer_inside(args: &[&str]) -> Output {
    let mut all = vec![BIN];
    all.extend_from_slice(args);
    output_of(&mut inside(&all))
}

/// `-q -e SCRIPT -c COMMAND` inside, asserting the tracer ended normally; its stdout.
fn traced_inside(script: &str, command: &str) -> String {
    let output = tracer_inside(&["-q", "-e", script, "-c", command]);
    assert!(output.status.success(), "{:?}\n{}{}", output.status, stdout(&output), stderr(&output));
    stdout(&output)
}

fn w() -> String {
    workload().to_string_lossy().into_owned()
}

#[test]
fn begin_end_and_interval_run_through_the_token() {
    if !can_delegate("begin_end_and_interval_run_through_the_token") {
        return;
    }
    let script = r#"BEGIN { printf("begin\n"); } END { printf("end\n"); }
                    interval:ms:100 { @n = count(); if (@n == 5) { exit(); } }"#;
    let output = tracer_inside(&["-q", "-e", script]);
    assert_eq!(stdout(&output), "begin\nend\n\n\n@n: 5\n", "{}", stderr(&output));
    assert!(output.status.success());
}

#[test]
fn info_says_the_token_is_in_use_and_what_it_delegates() {
    if !can_delegate("info_says_the_token_is_in_use_and_what_it_delegates") {
        return;
    }
    let info = stdout(&tracer_inside(&["--info"]));
    assert!(info.contains("\ninitial_user_namespace: no\n"), "{info}");
    assert!(
        info.contains("\nbpf_token: in use, from /sys/fs/bpf (delegate_cmds=any,delegate_maps=any,"),
        "{info}"
    );
    assert!(info.contains("\nringbuf: yes\n") && info.contains("\nrun_on_request: yes\n"), "{info}");
}

/// tracefs is the host's and unreadable here: system calls come through raw_syscalls, their records made
/// up from the built-in signatures.
#[test]
fn a_syscall_tracepoint_counts_exact_calls_without_tracefs() {
    if !can_delegate("a_syscall_tracepoint_counts_exact_calls_without_tracefs") {
        return;
    }
    let script = "tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { @ = count(); }";
    assert_eq!(traced_inside(script, &format!("{} getppid 1000 1", w())), "\n\n@: 1000\n");
}

#[test]
fn a_raw_tracepoint_counts_every_call() {
    if !can_delegate("a_raw_tracepoint_counts_every_call") {
        return;
    }
    let script = "rawtracepoint:sys_enter /pid == cpid/ { @ = count(); }";
    let out = traced_inside(script, &format!("{} getppid 1000 1", w()));
    let count: u64 = out.trim().strip_prefix("@: ").and_then(|n| n.parse().ok()).unwrap_or(0);
    // The workload's getppid calls, and the other system calls of its start and end.
    assert!(count >= 1000, "{out}");
}

#[test]
fn a_uprobe_counts_exact_calls_through_uprobe_multi() {
    if !can_delegate("a_uprobe_counts_exact_calls_through_uprobe_multi") {
        return;
    }
    let script = format!("uprobe:{}:workload_multi_one {{ @ = count(); }}", w());
    assert_eq!(traced_inside(&script, &format!("{} multi 4", w())), "\n\n@: 4\n");
}

/// Perf events stay closed to a user namespace (perf_event_paranoid untouched): profile samples on a BPF
/// timer per CPU instead. Every kernel with tokens (6.9) pins timers (6.7); what the samples see, and the error
/// of a kernel without pinned timers, are tests/rootless_profile.rs's.
#[test]
fn profile_runs_on_bpf_timers() {
    if !can_delegate("profile_runs_on_bpf_timers") {
        return;
    }
    let output = tracer_inside(&["-q", "-e", "profile:hz:99 { @ = count(); } interval:ms:300 { exit(); }"]);
    let (out, err) = (stdout(&output), stderr(&output));
    assert!(output.status.success(), "{:?}\n{out}{err}", output.status);
    let info = stdout(&tracer_inside(&["--info"]));
    assert!(
        info.contains("\nprofile_engine: BPF timers, one per CPU (perf_event_open is refused: "),
        "{info}"
    );
    // 99 Hz on every CPU for the 0.3 s: about 30 a CPU.
    let count: u64 = out.trim().strip_prefix("@: ").and_then(|n| n.parse().ok()).unwrap_or(0);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    assert!((15..=50 * cpus).contains(&count), "{out}{err}");
}

/// Without tracefs a tracepoint runs on its raw tracepoint: the same event, `args` being the tracepoint's
/// arguments (for `raw_syscalls:sys_enter`, `regs` and `id`). A record field they lack is an error at the
/// field; a wildcard is one at the probe, since only tracefs knows the categories.
#[test]
fn a_tracepoint_runs_on_its_raw_tracepoint_without_tracefs() {
    if !can_delegate("a_tracepoint_runs_on_its_raw_tracepoint_without_tracefs") {
        return;
    }
    let getppid = if cfg!(target_arch = "aarch64") { 173 } else { 110 };
    let script = format!(
        "tracepoint:raw_syscalls:sys_enter /pid == cpid && args.id == {getppid}/ {{ @[probe] = count(); }}"
    );
    assert_eq!(
        traced_inside(&script, &format!("{} getppid 1000 1", w())),
        "\n\n@[tracepoint:raw_syscalls:sys_enter]: 1000\n"
    );
    let output = tracer_inside(&["-e", "tracepoint:sched:sched_switch { @[args.prev_pid] = count(); }"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output),
        "stdin:1:35: ERROR: tracepoint:sched:sched_switch has no field `prev_pid`\n\
         tracepoint:sched:sched_switch { @[args.prev_pid] = count(); }\n\
         \x20                                 ^^^^^^^^^^^^^\n\
         help: its fields are preempt, prev, next, prev_state; without tracefs (a rootless container) a \
         tracepoint's `args` are the arguments its raw tracepoint passes, not the fields of the record tracefs \
         describes\n"
    );
    let output = tracer_inside(&["-e", "tracepoint:sched:* { @ = count(); }"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).starts_with(
            "stdin:1:1: ERROR: the tracepoints a wildcard names cannot be known here: tracefs is the host's"
        ),
        "{}",
        stderr(&output)
    );
}

#[test]
fn without_a_delegated_filesystem_the_error_says_what_the_host_must_delegate() {
    let test = "without_a_delegated_filesystem_the_error_says_what_the_host_must_delegate";
    if !can_delegate(test) {
        return;
    }
    let output =
        output_of(&mut inside_without_delegation(&[BIN, "-e", "BEGIN { printf(\"hi\\n\"); exit(); }"]));
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert_eq!(stdout(&output), "", "{err}");
    for words in
        ["BPF token", "delegate_cmds", "PrivateBPF=yes", "security.delegate_bpf", "docs/CONTAINERS.md"]
    {
        assert!(err.contains(words), "{words}: {err}");
    }
}

/// A token path given (`--bpf-token`, `LIBBPF_BPF_TOKEN_PATH`) that yields no token is an error at start
/// saying why; `LIBBPF_BPF_TOKEN_PATH` set but empty asks for no token, as libbpf reads it.
#[test]
fn a_token_path_that_yields_no_token_says_why() {
    let test = "a_token_path_that_yields_no_token_says_why";
    let script = "BEGIN { exit(); }";
    let output = run_with(&["--bpf-token", "/nonexistent", "-e", script], Duration::from_secs(30));
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output),
        "steadytrace: --bpf-token /nonexistent: cannot make a BPF token: /nonexistent is not a directory\n"
    );
    if !can_delegate(test) {
        return;
    }
    let output = tracer_inside(&["--bpf-token", "/proc", "-e", script]);
    assert_eq!(
        stderr(&output),
        "steadytrace: --bpf-token /proc: cannot make a BPF token: /proc is not a BPF filesystem's root\n"
    );
    let mut command = inside(&[BIN, "-e", script]);
    command.env("LIBBPF_BPF_TOKEN_PATH", "");
    let output = output_of(&mut command);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("LIBBPF_BPF_TOKEN_PATH is set but empty, which asks for none"),
        "{}",
        stderr(&output)
    );
}

/// `-l` inside: tracefs is the host's, so tracepoints other than the system calls' are left out with a note
/// naming `rawtracepoint:`, which lists every tracepoint from the kernel's BTF, the same as on the host; kernel
/// functions come from BTF too.
#[test]
fn listing_works_from_btf_without_tracefs() {
    if !can_delegate("listing_works_from_btf_without_tracefs") {
        return;
    }
    let output = tracer_inside(&["-lv", "tracepoint:syscalls:sys_enter_getpp*"]);
    assert_eq!(stdout(&output), "tracepoint:syscalls:sys_enter_getppid\n    int __syscall_nr\n");
    assert_eq!(
        stderr(&output),
        "steadytrace: note: only tracepoint:syscalls:* is listed: tracefs is the host's, readable by no user of \
         this user namespace; `steadytrace -l 'rawtracepoint:*'` lists every tracepoint from the kernel's BTF\n"
    );
    let output = tracer_inside(&["-lv", "rawtracepoint:sched_switch"]);
    let text = stdout(&output);
    assert!(text.starts_with("rawtracepoint:vmlinux:sched_switch\n    bool preempt\n"), "{text}");
    assert!(text.contains("\n    struct task_struct * next\n"), "{text}");
    let raw = |output: Output| stdout(&output).lines().count();
    let on_host = Command::new(BIN).args(["-l", "rawtracepoint:*"]).output().expect("run the tracer");
    assert!(raw(on_host.clone()) > 100, "{}", stderr(&on_host));
    assert_eq!(raw(tracer_inside(&["-l", "rawtracepoint:*"])), raw(on_host), "the same list inside");
    let output = tracer_inside(&["-l", "fentry:vfs_read"]);
    assert_eq!(stdout(&output), "fentry:vmlinux:vfs_read\n");
    assert!(
        stderr(&output).contains("kernel functions are listed from the kernel's BTF"),
        "{}",
        stderr(&output)
    );
}

/// With a pid namespace of its own as well (`unshare --pid`), a rootless tracer acts only on its namespace's
/// tasks by default; `--scope host` shows the others too, as pid 0 (the token lets it see them all).
#[test]
fn a_rootless_tracer_sees_its_own_pid_namespace_unless_told_otherwise() {
    if !can_delegate("a_rootless_tracer_sees_its_own_pid_namespace_unless_told_otherwise") {
        return;
    }
    // This test's own thread polls the harness every 10 ms from outside the namespace: host tasks make
    // system calls while the tracer runs.
    let script = "rawtracepoint:sys_enter { @[pid == 0] = count(); } interval:ms:500 { exit(); }";
    let run = |scope: &[&str]| {
        let mut args = vec!["unshare", "--pid", "--fork", "--mount-proc", BIN, "-q"];
        args.extend_from_slice(scope);
        args.extend_from_slice(&["-e", script]);
        let output = output_of(&mut inside(&args));
        assert!(output.status.success(), "{:?}\n{}", output.status, stderr(&output));
        let mut keys: Vec<String> = stdout(&output)
            .lines()
            .filter_map(|line| line.split_once("]:").map(|(key, _)| key.trim_start_matches("@[").to_string()))
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(run(&[]), ["false"], "the tracer's own system calls only");
    assert_eq!(run(&["--scope", "namespace"]), ["false"]);
    assert_eq!(run(&["--scope", "host"]), ["false", "true"], "tasks outside read as pid 0");
}

/// /proc/kallsyms shows zeros inside: kernel frames print as addresses, with one note saying why and what
/// names them; `--kallsyms` with a copy of the host's file names them.
#[test]
fn kernel_stacks_say_why_they_are_addresses_and_a_copy_of_kallsyms_names_them() {
    if !can_delegate("kernel_stacks_say_why_they_are_addresses_and_a_copy_of_kallsyms_names_them") {
        return;
    }
    let script = "rawtracepoint:sys_enter /pid == cpid/ { @[kstack(2)] = count(); }";
    let output = tracer_inside(&["-q", "-e", script, "-c", "/bin/true"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        stderr(&output),
        "steadytrace: note: kernel stack frames print as addresses: /proc/kallsyms shows this process no \
         addresses (the kernel shows them only to CAP_SYSLOG in the host's user namespace, as \
         kernel.kptr_restrict allows): a copy of the host's /proc/kallsyms, given with --kallsyms FILE, names \
         them until the host reboots\n"
    );
    let frames: Vec<String> =
        stdout(&output).lines().filter(|l| l.starts_with("    ")).map(str::to_string).collect();
    assert!(!frames.is_empty() && frames.iter().all(|f| f.starts_with("    0xffff")), "{}", stdout(&output));
    let copy = std::env::temp_dir().join(format!("steadytrace-kallsyms-{}", std::process::id()));
    fs::copy("/proc/kallsyms", &copy).expect("copy /proc/kallsyms");
    let copy_path = copy.to_string_lossy().into_owned();
    let output = tracer_inside(&["-q", "--kallsyms", &copy_path, "-e", script, "-c", "/bin/true"]);
    let _ = fs::remove_file(&copy);
    assert_eq!(stderr(&output), "");
    let text = stdout(&output);
    assert!(
        text.contains("\n    __bpf_trace_sys_enter+") || text.contains("\n    bpf_trace_run2+"),
        "{text}"
    );
}

/// What docs/CONTAINERS.md says a narrower delegation must hold for the probes that run here (no kprobes,
/// fentry or iterators on this host): with exactly that, they run; with one item less, the error names it.
const NARROW_CMDS: &str = "delegate_cmds=map_create:prog_load:btf_load";
const NARROW_MAPS: &str =
    "delegate_maps=array:percpu_array:hash:percpu_hash:lru_hash:lru_percpu_hash:ringbuf:stack_trace:prog_array";
const NARROW_PROGS: &str = "delegate_progs=raw_tracepoint:kprobe:sched_cls";
const NARROW_ATTACHS: &str = "delegate_attachs=cgroup_inet_ingress:trace_uprobe_multi";

fn inside_narrowly(replace: Option<(&str, &str)>, args: &[&str]) -> Output {
    let mut command = Command::new(harness());
    for option in [NARROW_CMDS, NARROW_MAPS, NARROW_PROGS, NARROW_ATTACHS] {
        let option = match replace {
            Some((from, to)) if option == from => to,
            _ => option,
        };
        command.args(["--delegate", option]);
    }
    command.arg("--").arg(BIN).args(args);
    output_of(&mut command)
}

#[test]
fn a_narrower_delegation_runs_what_it_covers_and_names_what_it_lacks() {
    if !can_delegate("a_narrower_delegation_runs_what_it_covers_and_names_what_it_lacks") {
        return;
    }
    let w = w();
    let uprobe = format!("uprobe:{w}:workload_multi_one {{ @ = count(); }}");
    let multi = format!("{w} multi 4");
    let getppid = format!("{w} getppid 100 1");
    let runs: [(&str, Vec<&str>, &str); 4] = [
        (
            "interval",
            vec!["-q", "-e", "interval:ms:100 { @n = count(); if (@n == 3) { exit(); } }"],
            "\n\n@n: 3\n",
        ),
        (
            "syscall",
            vec![
                "-q",
                "-e",
                "tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { @ = count(); }",
                "-c",
                &getppid,
            ],
            "\n\n@: 100\n",
        ),
        ("uprobe", vec!["-q", "-e", &uprobe, "-c", &multi], "\n\n@: 4\n"),
        // A stack map; the frames themselves vary.
        ("stacks", vec!["-q", "-e", "BEGIN { @[ustack] = count(); exit(); }"], "]: 1"),
    ];
    for (what, args, expected) in runs {
        let output = inside_narrowly(None, &args);
        let out = stdout(&output);
        let last = if what == "stacks" { out.lines().last().unwrap_or_default().to_string() } else { out };
        assert_eq!(last, expected, "{what}: {}", stderr(&output));
    }
    let profile =
        inside_narrowly(None, &["-q", "-e", "profile:hz:99 { @ = count(); } interval:ms:300 { exit(); }"]);
    assert!(profile.status.success(), "profile: {}", stderr(&profile));

    let without_kprobe = inside_narrowly(
        Some((NARROW_PROGS, "delegate_progs=raw_tracepoint:sched_cls")),
        &["-q", "-e", &uprobe, "-c", &multi],
    );
    let err = stderr(&without_kprobe);
    assert!(
        err.contains("ERROR: the BPF token does not let this probe's program load: it needs `kprobe` in the host's delegate_progs"),
        "{err}"
    );
    let without_ringbuf = inside_narrowly(
        Some((NARROW_MAPS, "delegate_maps=array:percpu_array:hash:stack_trace:prog_array")),
        &["-q", "-e", "BEGIN { exit(); }"],
    );
    assert!(
        stderr(&without_ringbuf).starts_with(
            "steadytrace: cannot create the BPF map `events`: the BPF token does not delegate `ringbuf` maps"
        ),
        "{}",
        stderr(&without_ringbuf)
    );
}

/// USDT probes go through uprobe_multi links too: exact counts inside.
#[test]
fn usdt_probes_count_exactly_through_the_token() {
    if !can_delegate("usdt_probes_count_exactly_through_the_token") {
        return;
    }
    let app = match usdt_app(false, "usdt-app-rootless") {
        Ok(app) => app.to_string_lossy().into_owned(),
        Err(why) => return skip("usdt_probes_count_exactly_through_the_token", &why),
    };
    let script = format!("usdt:{app}:app:tick {{ @ticks = count(); }}");
    assert_eq!(traced_inside(&script, &format!("{app} 5")), "\n\n@ticks: 5\n");
}

/// The perf-event probes that have no other way: one error each, naming perf_event_paranoid.
#[test]
fn software_and_hardware_probes_are_one_error_naming_perf_event_paranoid() {
    if !can_delegate("software_and_hardware_probes_are_one_error_naming_perf_event_paranoid") {
        return;
    }
    for probe in ["software:cpu-clock:1000000", "hardware:cycles:1000000"] {
        let output = tracer_inside(&["-q", "-e", &format!("{probe} {{ @ = count(); }}")]);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{probe}: {err}");
        assert_eq!(err.lines().count(), 1, "{probe}: {err}");
        assert!(
            err.contains("perf_event_paranoid") && err.contains("user namespace other than the host's"),
            "{err}"
        );
    }
}
