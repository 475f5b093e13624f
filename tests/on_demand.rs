//! Probes steadytrace runs on request: `--test` and `--bench` run test and benchmark probes one after another
//! through BPF_PROG_TEST_RUN (bpftrace's own self tests: tests/bpftrace_self.rs); SIGUSR1 runs
//! `self:signal:SIGUSR1` probes.

mod common;

use common::*;
use std::process::Stdio;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn a_failing_test_shows_its_output_and_the_run_fails() {
    if !can_trace("a_failing_test_shows_its_output_and_the_run_fails") {
        return;
    }
    let script = r#"
        BEGIN { printf("begin\n"); }
        test:passes { $t = (1, "a"); if ($t != (1, "a")) { return 1; } printf("hidden\n"); }
        test:returns { printf("shown %d\n", 5); return 2; }
        test:in_a_loop { @m[1] = 1; for $kv : @m { if ($kv.1 == 1) { return 3; } } }
        test:reports { errorf("bad %d", 7); }
        test:exits_with_a_code { exit(4); }
        test:exits { exit(); }
        tracepoint:syscalls:sys_enter_nanosleep { @never = 1; }
        END { printf("end\n"); }
    "#;
    let output = run_with(&["--test", "-e", script], LIMIT);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}{}", stderr(&output));
    let lines: Vec<&str> = out.lines().collect();
    // Durations vary: compare each line up to them.
    let expected = [
        "begin",
        "[==========] Running 6 tests.",
        "[ RUN      ] test:passes",
        "[       OK ] test:passes (",
        "[ RUN      ] test:returns",
        "shown 5",
        "[  FAILED  ] test:returns (",
        "[ RUN      ] test:in_a_loop",
        "[  FAILED  ] test:in_a_loop (",
        "[ RUN      ] test:reports",
        "stdin:6:24-43: ERROR: bad 7",
        "[  FAILED  ] test:reports (",
        "[ RUN      ] test:exits_with_a_code",
        "[  FAILED  ] test:exits_with_a_code (",
        "[ RUN      ] test:exits",
        "[       OK ] test:exits (",
        "[==========] 6 tests ran.",
        "[  PASSED  ] 2 tests.",
        "[  FAILED  ] 4 tests, listed below:",
        "[  FAILED  ] test:returns",
        "[  FAILED  ] test:in_a_loop",
        "[  FAILED  ] test:reports",
        "[  FAILED  ] test:exits_with_a_code",
        "end",
    ];
    assert_eq!(lines.len(), expected.len(), "{out}");
    for (line, expected) in lines.iter().zip(expected) {
        assert!(line.starts_with(expected), "`{line}` is not `{expected}...`:\n{out}");
    }
}

#[test]
fn benchmarks_are_timed_and_one_returning_non_zero_is_skipped() {
    if !can_trace("benchmarks_are_timed_and_one_returning_non_zero_is_skipped") {
        return;
    }
    let script = r#"
        bench:empty { }
        bench:skipped { return 1; }
        bench:map_update { @m[cpu] = count(); }
    "#;
    let output = run_with(&["--bench", "-e", script], LIMIT);
    let out = stdout(&output);
    assert!(output.status.success(), "{out}{}", stderr(&output));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[0].starts_with("Benchmark ") && lines[0].ends_with("Time(ns)       Iterations"), "{out}");
    for (row, name) in lines[2..].iter().zip(["bench:empty", "bench:map_update"]) {
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(fields[0], name, "{out}");
        let runs: u64 = fields[2].parse().expect("a number of runs");
        // Each benchmark ran until its runs took a millisecond.
        assert!(runs >= 10, "{out}");
        fields[1].parse::<u64>().expect("nanoseconds per run");
    }
    // Benchmarks print no map at the end.
    assert!(!out.contains("@m"), "{out}");
}

#[test]
fn test_probes_are_not_run_while_tracing() {
    if !can_trace("test_probes_are_not_run_while_tracing") {
        return;
    }
    let output = run_with(&["-e", "test:t { printf(\"ran\\n\"); }"], LIMIT);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).is_empty());
    assert!(stderr(&output).contains("test probes run only with --test"), "{}", stderr(&output));
    let output =
        run_with(&["-e", "test:t { printf(\"ran\\n\"); } BEGIN { printf(\"begin\\n\"); exit(); }"], LIMIT);
    assert!(
        stdout(&output).starts_with("begin\n") && !stdout(&output).contains("ran"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn sigusr1_runs_the_self_signal_probes_in_order_each_time() {
    if !can_trace("sigusr1_runs_the_self_signal_probes_in_order_each_time") {
        return;
    }
    let script = r#"self:signal:SIGUSR1 { printf("first"); }
        self:signal:SIGUSR1 { printf(" second\n"); @n = count(); if (@n == 2) { exit(); } }"#;
    let mut child =
        Reaped::spawn(tracer(&["-e", script]).stdout(Stdio::piped()).stderr(Stdio::piped())).expect("spawn");
    let stderr = wait_for_stderr_line(&mut child, "Attached 2 probes");
    for _ in 0..2 {
        // SAFETY: kill has no memory-safety preconditions.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGUSR1) }, 0);
        std::thread::sleep(Duration::from_millis(300));
    }
    let output = wait_output(child, LIMIT);
    assert!(output.status.success(), "{}", stderr.join().unwrap_or_default());
    assert_eq!(stdout(&output), "first second\nfirst second\n\n\n@n: 2\n");
}
