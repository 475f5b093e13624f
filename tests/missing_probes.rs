//! Attach points naming what does not exist (a function a binary lacks, a library or tracepoint that is
//! not there): skipped with a warning by default, silently with `BPFTRACE_MISSING_PROBES=ignore`, an
//! error with `error`; a script of nothing but missing attach points is an error.

mod common;

use common::*;
use std::process::Output;

/// Two uprobes on the workload's `workload_add`, one beside a function it lacks, and a tracepoint that
/// does not exist, run with `missing_probes` set to `setting` (the default when `None`).
fn run_with(setting: Option<&str>) -> Output {
    let w = workload().to_string_lossy().into_owned();
    let script = format!(
        "uprobe:{w}:workload_add, uprobe:{w}:no_such_function {{ @calls = count(); }} tracepoint:nosuchcategory:nosuchevent {{ @tp = count(); }}"
    );
    let mut command = tracer(&["-q", "-e", &script, "-c", &format!("{w} calls 3")]);
    match setting {
        Some(setting) => command.env("BPFTRACE_MISSING_PROBES", setting),
        None => command.env_remove("BPFTRACE_MISSING_PROBES"),
    };
    command.output().expect("run the tracer")
}

#[test]
fn missing_attach_points_are_skipped_with_a_warning() {
    if !can_trace("missing_attach_points_are_skipped_with_a_warning") {
        return;
    }
    for setting in [None, Some("warn")] {
        let output = run_with(setting);
        assert_eq!(stdout(&output), "\n\n@calls: 3\n", "{}", stderr(&output));
        let warnings = stderr(&output);
        assert!(
            warnings.contains("warning: ")
                && warnings.contains("has no function `no_such_function`: skipped"),
            "{warnings}"
        );
        assert!(
            warnings.contains("there is no tracepoint `nosuchcategory:nosuchevent`: skipped"),
            "{warnings}"
        );
    }
}

#[test]
fn ignore_skips_them_silently() {
    if !can_trace("ignore_skips_them_silently") {
        return;
    }
    let output = run_with(Some("ignore"));
    assert_eq!(stdout(&output), "\n\n@calls: 3\n", "{}", stderr(&output));
    assert!(!stderr(&output).contains("warning"), "{}", stderr(&output));
}

#[test]
fn error_stops_before_tracing() {
    if !can_trace("error_stops_before_tracing") {
        return;
    }
    let output = run_with(Some("error"));
    assert!(!output.status.success());
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).contains("ERROR: ") && stderr(&output).contains("no_such_function"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn nothing_left_to_trace_is_an_error() {
    if !can_trace("nothing_left_to_trace_is_an_error") {
        return;
    }
    let output =
        tracer(&["-q", "-e", "tracepoint:nosuchcategory:nosuch* { @ = count(); }"]).output().unwrap();
    assert!(!output.status.success());
    let text = stderr(&output);
    assert!(text.contains("warning: no tracepoint matches `nosuchcategory:nosuch*`: skipped"), "{text}");
    assert!(text.contains("none of the script's attach points exists here"), "{text}");
}

#[test]
fn misspelt_attach_points_name_the_nearest_that_exists() {
    if !can_trace("misspelt_attach_points_name_the_nearest_that_exists") {
        return;
    }
    let w = workload().to_string_lossy().into_owned();
    let script = format!("tracepoint:syscalls:sys_enter_opnat, uprobe:{w}:workload_ad {{ @ = count(); }}");
    let output = tracer(&["-q", "--dry-run", "-e", &script]).output().unwrap();
    let text = stderr(&output);
    assert!(
        text.contains(
            "no tracepoint `syscalls:sys_enter_opnat` (did you mean `tracepoint:syscalls:sys_enter_openat`?)"
        ),
        "{text}"
    );
    assert!(text.contains("has no function `workload_ad` (did you mean `workload_add`?)"), "{text}");
}

/// A map only a skipped probe gives values to is still a map, reading 0, as in bpftrace (biolatency on a
/// kernel without `blk_account_io_start`): the probes that do run compile and run.
#[test]
fn maps_set_only_by_a_skipped_probe_read_zero() {
    if !can_trace("maps_set_only_by_a_skipped_probe_read_zero") {
        return;
    }
    let w = workload().to_string_lossy().into_owned();
    let script = format!(
        "uprobe:{w}:no_such_function {{ @start[tid] = nsecs; }} uprobe:{w}:workload_add /@start[tid] == 0/ {{ @unset = count(); }}"
    );
    let output =
        tracer(&["-q", "-e", &script, "-c", &format!("{w} calls 3")]).output().expect("run the tracer");
    // The empty `@start` prints nothing at exit, as current bpftrace (0.17 printed an empty line).
    assert_eq!(stdout(&output), "\n\n@unset: 3\n", "{}", stderr(&output));
}

/// A skipped probe's body is checked for what is wrong whatever its probe (an unknown function), not for what
/// comes of the stand-in it is checked with: xfsdist.bt on a kernel without XFS sets `@name[tid] = func` in
/// skipped kprobes, a symbol there, and `ksym(0)` in BEGIN.
#[test]
fn a_skipped_probes_body_is_checked_only_for_what_does_not_depend_on_its_probe() {
    let w = workload().to_string_lossy().into_owned();
    let fine = format!(
        "BEGIN {{ @name[0] = ksym(0); exit(); }} uprobe:{w}:no_such_function {{ @name[tid] = func; }}"
    );
    let output = tracer(&["--dry-run", "-e", &fine]).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let wrong = format!("BEGIN {{ exit(); }} uprobe:{w}:no_such_function {{ @x = undefined_fn(); }}");
    let output = tracer(&["--dry-run", "-e", &wrong]).output().unwrap();
    assert!(
        !output.status.success() && stderr(&output).contains("unknown function `undefined_fn`"),
        "{}",
        stderr(&output)
    );
}
