//! What steadytrace does on kernels without a feature of its table (`--info`), run on this machine's kernel
//! with the feature taken as absent (`STEADYTRACE_KERNEL_WITHOUT`): a fallback prints exactly what the fast
//! path prints, and a construct without one is an error at its line naming the feature and the Linux
//! release that has it. The same scripts run on real 5.10, 6.1 and 6.12 kernels in tests/kernels.rs.

mod common;

use common::{stderr, stdout};
use std::process::Output;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(20);

fn run(without: &str, args: &[&str]) -> Output {
    let child = common::Reaped::spawn(
        common::tracer(args)
            .env("STEADYTRACE_KERNEL_WITHOUT", without)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    )
    .expect("cannot start the tracer");
    common::wait_output(child, LIMIT)
}

/// Runs `script` with and without the features; both must succeed with the same output, which is returned.
fn same_both_ways(without: &str, script: &str) -> String {
    let fast = run("", &["-q", "-e", script]);
    let fallback = run(without, &["-q", "-e", script]);
    assert!(fast.status.success(), "fast path: {}", stderr(&fast));
    assert!(fallback.status.success(), "without {without}: {}", stderr(&fallback));
    assert_eq!(stdout(&fast), stdout(&fallback), "without {without}: {}", stderr(&fallback));
    stdout(&fast)
}

/// The single error a script gives without the features (checked with `--dry-run`: nothing loads).
fn error_without(without: &str, script: &str) -> String {
    let output = run(without, &["--dry-run", "-e", script]);
    assert!(!output.status.success(), "without {without}, `{script}` compiled");
    stderr(&output)
}

const RANGES: &str = r#"BEGIN {
  $s = 0; for ($i : 1..6) { $s += $i; } printf("%d\n", $s);
  $t = 0; for ($j : 0..10) { if ($j % 3 == 0) { continue; } if ($j == 8) { break; } $t++; } printf("%d\n", $t);
  $cells = 0; for ($r : 0..4) { for ($c : $r..4) { $cells++; } } printf("%d\n", $cells);
  $n = 0; $lim = 7; for ($k : -2..$lim) { $n++; } printf("%d\n", $n);
  for ($k : 5..2) { printf("never\n"); }
  for ($k : 0..3) { if ($k == 2) { printf("out at %d\n", $k); exit(); } }
  printf("never\n");
}"#;

#[test]
fn range_loops_without_bpf_loop_are_bounded_loops_with_the_same_output() {
    if !common::can_trace("range_loops_without_bpf_loop_are_bounded_loops_with_the_same_output") {
        return;
    }
    assert_eq!(same_both_ways("bpf_loop", RANGES), "15\n5\n10\n9\nout at 2\n\n\n");
    // The same inside a probe's callback loop over a map (kernels 5.13 to 5.16 have the one, not the other).
    let nested = r#"BEGIN { @m[1] = 2; @m[2] = 3; $s = 0;
        for ($kv : @m) { for ($i : 0..$kv.1) { $s += $kv.0; } } printf("%d\n", $s); exit(); }"#;
    assert_eq!(same_both_ways("bpf_loop", nested), "8\n\n\n@m[1]: 2\n@m[2]: 3\n");
}

#[test]
fn a_run_time_bound_past_what_the_verifier_can_walk_stops_with_a_warning() {
    if !common::can_trace("a_run_time_bound_past_what_the_verifier_can_walk_stops_with_a_warning") {
        return;
    }
    let script = r#"BEGIN { $n = 1000000; $s = 0; for ($i : 0..$n) { $s++; } printf("%d\n", $s); exit(); }"#;
    let output = run("bpf_loop", &["-q", "-e", script]);
    assert!(output.status.success(), "{}", stderr(&output));
    let ran: u64 = stdout(&output).trim().parse().unwrap();
    assert!((1000..1_000_000).contains(&ran), "{ran}");
    assert!(
        stderr(&output).contains(&format!("WARNING: this loop stopped after {ran} iterations")),
        "{}",
        stderr(&output)
    );
    // A constant bound that long is refused before anything loads.
    let error =
        error_without("bpf_loop", r#"BEGIN { $s = 0; for ($i : 0..1000000) { $s++; } printf("%d\n", $s); }"#);
    assert!(error.contains("stdin:1:17: ERROR: a range loop of 1000000 iterations"), "{error}");
    assert!(error.contains("needs the bpf_loop helper (Linux 5.17); this kernel is"), "{error}");
}

const AGGREGATIONS: &str = r#"
interval:ms:10 { @c = count(); @s = sum(3); @a[1] = avg(10); @a[1] = avg(21); @neg = sum(-4);
  if (@c >= 5) { printf("%d %d %d %d %d\n", @c, @s, @a[1], @neg, @a[2]); exit(); } }
"#;

#[test]
fn aggregations_read_without_per_cpu_lookups_are_shared_maps_with_the_same_output() {
    let test = "aggregations_read_without_per_cpu_lookups_are_shared_maps_with_the_same_output";
    if !common::can_trace(test) {
        return;
    }
    let fast = run("", &["-q", "-e", AGGREGATIONS]);
    let fallback = run("percpu_lookup", &["-q", "-e", AGGREGATIONS]);
    for (name, output) in [("fast", &fast), ("fallback", &fallback)] {
        assert!(output.status.success(), "{name}: {}", stderr(output));
        assert!(stdout(output).starts_with("5 15 15 -20 0\n"), "{name}: {}", stdout(output));
    }
    // The map printed at exit is read from the shared map alone in the fallback.
    for line in ["@c: 5\n", "@s: 15\n", "@a[1]: 15\n", "@neg: -20\n"] {
        assert!(stdout(&fallback).contains(line), "{line}: {}", stdout(&fallback));
    }
}

#[test]
fn shared_counts_lose_no_concurrent_event() {
    let test = "shared_counts_lose_no_concurrent_event";
    if !common::can_trace(test) || common::tracefs().is_none() || !common::has_online_cpus(test, 2) {
        return;
    }
    let workload = common::workload();
    let workload = workload.to_str().unwrap();
    // Two threads on two CPUs call getppid as fast as they can; every call is counted once. The count each
    // event reads after its own add only grows, so its max is the total: exact only if no exchange is lost.
    let script = r#"tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { @n = count(); @s = sum(2);
        @hi = max(@n); @lo = min(-@n); } END { printf("%d %d %d %d\n", @n, @s, @hi, @lo); }"#;
    let output = run("percpu_lookup", &["-q", "-c", &format!("{workload} getppid 20000 2"), "-e", script]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).starts_with("20000 40000 20000 -20000\n"), "{}", stdout(&output));
}

const LONG_SEARCH: &str = r#"BEGIN { printf("%d\n", strcontains("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")); }"#;

#[test]
fn string_searches_without_bpf_loop_call_their_callback_per_start() {
    if !common::can_trace("string_searches_without_bpf_loop_call_their_callback_per_start") {
        return;
    }
    let script = r#"BEGIN { printf("%d %d %d %d %d\n", strcontains("hello world", "o w"), strcontains("abc", "x"),
        strcontains("abc", ""), strstr("hello", "llo"), strstr("hello", "lx")); $c = comm;
        printf("%d\n", strcontains($c, "steady")); exit(); }"#;
    assert_eq!(same_both_ways("bpf_loop", script), "1 0 1 2 -1\n1\n\n\n");
}

#[test]
fn constructs_without_a_fallback_are_errors_at_their_line() {
    let cases = [
        ("for_each_map_elem", "BEGIN { @m[1] = 1;\n for ($kv : @m) { print($kv); } }", "stdin:2:2: ERROR: `for` over @m needs the bpf_for_each_map_elem helper (Linux 5.13)"),
        ("for_each_map_elem", "BEGIN { @m[1] = 1; printf(\"%d\\n\", len(@m)); }", "ERROR: len(@m) needs the bpf_for_each_map_elem helper (Linux 5.13)"),
        ("bpf_loop", LONG_SEARCH, "ERROR: strcontains() of a 104-byte string and a 56-byte one (at most 4096 byte pairs without it) needs the bpf_loop helper (Linux 5.17)"),
        ("percpu_lookup,cmpxchg", "BEGIN { @m = max(3); if (@m > 1) { exit(); } }", "stdin:1:26: ERROR: reading @m's max() value needs the bpf_map_lookup_percpu_elem helper (Linux 5.19)"),
        ("ktime_get_tai_ns", "BEGIN { printf(\"%d\\n\", nsecs(tai)); }", "stdin:1:9: ERROR: this needs the bpf_ktime_get_tai_ns helper (Linux 6.1)"),
    ];
    for (without, script, expected) in cases {
        let error = error_without(without, script);
        assert!(error.contains(expected), "without {without}, `{script}`:\n{error}");
        assert!(
            error.contains("taken as without it (--no-feature or STEADYTRACE_KERNEL_WITHOUT)"),
            "{error}"
        );
        assert!(error.contains("\nhelp: run it on Linux "), "{error}");
        assert!(!error.contains("verifier"), "{error}");
    }
}

#[test]
fn info_lists_every_feature_with_what_happens_without_it() {
    if !common::can_trace("info_lists_every_feature_with_what_happens_without_it") {
        return;
    }
    let output = run("bpf_loop,percpu_lookup", &["--info"]);
    let text = stdout(&output);
    assert!(
        text.contains("\nbpf_loop: no (Linux 5.17; without it: range loops run as bounded loops"),
        "{text}"
    );
    assert!(
        text.contains("\npercpu_lookup: no (Linux 5.19; without it: count/sum/avg/min/max maps read"),
        "{text}"
    );
    assert!(text.contains("\nringbuf: yes\n"), "{text}");
    // bpf_d_path is only for fentry programs: where those cannot run, that is the reason given.
    if text.contains("\nfentry: no") {
        assert!(text.contains("\nd_path: no (fentry programs cannot run here; "), "{text}");
    }
    let bad = run("bpf_loops", &["--info"]);
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("no kernel feature `bpf_loops` (known: ringbuf, "), "{}", stderr(&bad));
}

/// A kernel built without per-syscall tracepoints (Android's often are), shown by hiding them in a mount
/// namespace of its own: `tracepoint:syscalls:*` is listed, described and traced as before, on `raw_syscalls`.
#[test]
fn syscall_tracepoints_without_their_format_files_run_on_raw_syscalls() {
    if !common::can_trace("syscall_tracepoints_without_their_format_files_run_on_raw_syscalls") {
        return;
    }
    let Some(tracefs) = common::tracefs() else {
        return common::skip(
            "syscall_tracepoints_without_their_format_files_run_on_raw_syscalls",
            "tracefs cannot be mounted",
        );
    };
    let hidden = |args: &[&str]| {
        let command = format!("mount -t tmpfs none {}/events/syscalls && exec \"$@\"", tracefs.display());
        let child = common::Reaped::spawn(
            std::process::Command::new("unshare")
                .args(["-m", "sh", "-c", &command, "sh", common::BIN])
                .args(args)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped()),
        )
        .expect("cannot run unshare");
        common::wait_output(child, LIMIT)
    };
    let info = hidden(&["--info"]);
    assert!(
        stdout(&info).contains(
            "syscall_tracepoints: raw_syscalls raw tracepoints (this kernel has no per-syscall tracepoints"
        ),
        "{}{}",
        stdout(&info),
        stderr(&info)
    );
    let listed = hidden(&["-lv", "tracepoint:syscalls:sys_enter_openat"]);
    assert_eq!(
        stdout(&listed),
        "tracepoint:syscalls:sys_enter_openat\n    int __syscall_nr\n    int dfd\n    const char * filename\n    int flags\n    umode_t mode\n",
        "{}",
        stderr(&listed)
    );
    let workload = common::workload();
    let script = "tracepoint:syscalls:sys_enter_clock_nanosleep /pid == cpid/ { @[args.which_clock, args.flags] = count(); }
                  tracepoint:syscalls:sys_exit_clock_nanosleep /pid == cpid/ { @ret[args.ret] = count(); }";
    let command = format!("{} sleep 5", workload.display());
    let traced = hidden(&["-q", "-e", script, "-c", &command]);
    assert!(traced.status.success(), "{}", stderr(&traced));
    assert_eq!(stdout(&traced), "\n\n@[1, 0]: 5\n@ret[0]: 5\n", "{}", stderr(&traced));
    let missing = hidden(&["-e", "tracepoint:syscalls:sys_enter_no_such_call { }"]);
    assert!(
        stderr(&missing).contains("there is no tracepoint `syscalls:sys_enter_no_such_call`"),
        "{}",
        stderr(&missing)
    );
}
