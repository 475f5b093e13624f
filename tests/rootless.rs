//! Rootless containers through BPF tokens (issue 37): root of an unprivileged user namespace, with a BPF
//! filesystem delegated to it on /sys/fs/bpf, the way systemd 258 (PrivateBPF=yes), LXD and Incus run a
//! container. The namespace is made for real by examples/delegated_userns.rs (built by `cargo test` with the
//! other examples); root inside is uid 100000 outside, with no capability in the initial namespace.

mod common;

use common::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// What the harness maps root of the namespace to (its default).
const UID_BASE: &str = "100000";
/// The harness's exit status when a setup step failed (its stderr names the step).
const SETUP_FAILED: i32 = 125;

/// Built by a plain `cargo test` (every example is); `cargo test --test rootless` alone builds no example.
fn harness() -> PathBuf {
    let path = Path::new(BIN).parent().expect("target dir").join("examples").join("delegated_userns");
    assert!(path.is_file(), "{} is missing: cargo build --example delegated_userns", path.display());
    path
}

/// `args` run by the harness as root of a new user namespace with the delegated bpffs on /sys/fs/bpf.
fn inside(args: &[&str]) -> Command {
    let mut command = Command::new(harness());
    command.arg("--").args(args);
    command
}

/// The same namespace without the delegated bpffs: what a container has without PrivateBPF.
fn inside_without_delegation(args: &[&str]) -> Command {
    let mut command = Command::new(harness());
    command.args(["--no-delegate", "--"]).args(args);
    command
}

fn output_of(command: &mut Command) -> Output {
    let child =
        Reaped::spawn(command.stdout(Stdio::piped()).stderr(Stdio::piped())).expect("spawn the harness");
    wait_output(child, Duration::from_secs(30))
}

/// The running kernel's (major, minor).
fn kernel_version() -> (u32, u32) {
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").expect("the kernel release");
    let mut numbers = release.trim().split(['.', '-']).map(|n| n.parse().unwrap_or(0));
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
}

/// Whether the delegated namespace can be made here; [`skip`]s the test when not: it needs root (for the
/// host side), user namespaces, and a kernel with BPF tokens (6.9), whose bpffs may be owned by a user namespace.
fn can_delegate(test: &str) -> bool {
    // Root also maps the namespace's ids and delegates its bpffs.
    if !can_trace(test) {
        return false;
    }
    let output = output_of(&mut inside(&["true"]));
    if output.status.success() {
        return true;
    }
    let said = stderr(&output);
    if output.status.code() == Some(SETUP_FAILED) && said.contains(": unshare(") {
        skip(test, &format!("user namespaces are not available here: {}", said.trim()));
        return false;
    }
    // Before 6.9 bpffs ignores unknown options, delegate_* among them, and only creating a superblock owned by
    // a user namespace is refused (EPERM): the step that fails is an fsconfig.
    let (major, minor) = kernel_version();
    if output.status.code() == Some(SETUP_FAILED) && said.contains(": fsconfig") && (major, minor) < (6, 9) {
        skip(
            test,
            &format!(
                "kernel {major}.{minor} lacks BPF tokens (6.9+): it refused the delegated bpffs: {}",
                said.trim()
            ),
        );
        return false;
    }
    panic!(
        "the harness cannot make the delegated namespace on kernel {major}.{minor}: {:?}\n{said}",
        output.status
    );
}

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

/// Perf events stay closed to a user namespace (perf_event_paranoid untouched): one error, saying why
/// and what the host can do.
#[test]
fn profile_is_one_error_naming_perf_event_paranoid() {
    if !can_delegate("profile_is_one_error_naming_perf_event_paranoid") {
        return;
    }
    let output = tracer_inside(&["-q", "-e", "profile:hz:99 { @ = count(); } interval:ms:300 { exit(); }"]);
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
}

#[test]
fn a_tracepoint_that_needs_tracefs_is_an_error_naming_the_ways_that_work() {
    let test = "a_tracepoint_that_needs_tracefs_is_an_error_naming_the_ways_that_work";
    if !can_delegate(test) {
        return;
    }
    let output = tracer_inside(&["-e", "tracepoint:sched:sched_switch { @ = count(); }"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.starts_with("stdin:1:1: ERROR: tracefs at /sys/kernel/tracing is the host's"), "{err}");
    assert!(err.contains("rawtracepoint:NAME") && err.contains("\n^^^^"), "{err}");
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
