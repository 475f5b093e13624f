//! Inputs that once crashed or hung the tracer (found by fuzzing and by hand), and environments hostile to
//! it: each must end in a clean `file:line:col` error or run, never a panic, abort or hang.

mod common;

use std::fs;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Compiles `script` from a file with `--dry-run` within 5 s; its exit code and stderr.
fn dry_run(name: &str, script: &str) -> (Option<i32>, String) {
    let dir = std::env::temp_dir().join(format!("steadytrace-robustness-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    fs::write(&path, script).unwrap();
    let child = common::Reaped::spawn(
        common::tracer(&["--dry-run", path.to_str().unwrap()]).stdout(Stdio::piped()).stderr(Stdio::piped()),
    )
    .unwrap();
    let output = common::wait_output(child, Duration::from_secs(5));
    let _ = fs::remove_file(&path);
    (output.status.code(), common::stderr(&output))
}

fn assert_clean_error(name: &str, script: &str, message: &str) {
    let (code, stderr) = dry_run(name, script);
    assert_eq!(code, Some(1), "{name}: {stderr}");
    assert!(stderr.starts_with(&format!("{}", std::env::temp_dir().display())), "{name}: {stderr}");
    assert!(stderr.contains(message), "{name}: expected `{message}` in:\n{stderr}");
    assert!(!stderr.contains("panicked") && !stderr.contains("internal error"), "{name}: {stderr}");
}

#[test]
fn a_chain_of_7000_else_ifs_is_refused_not_a_stack_overflow() {
    let mut script = String::from("BEGIN {\n  if (pid == 0) { @a = 0; }\n");
    for i in 1..7000 {
        script.push_str(&format!("  else if (pid == {i}) {{ @a = {i}; }}\n"));
    }
    script.push_str("}\n");
    assert_clean_error("else_ifs.bt", &script, "more than 1000 `else if` branches");
}

#[test]
fn the_longest_accepted_else_if_chain_compiles() {
    let mut script = String::from("BEGIN {\n  if (pid == 0) { @a = 0; }\n");
    for i in 1..=1000 {
        script.push_str(&format!("  else if (pid == {i}) {{ @a = {i}; }}\n"));
    }
    script.push_str("}\n");
    let (code, stderr) = dry_run("else_ifs_1000.bt", &script);
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn a_ternary_chain_8000_deep_is_refused_not_a_stack_overflow() {
    let script = format!("BEGIN {{ @x = {}1; }}\n", "1 ? 1 :\n".repeat(8000));
    assert_clean_error("ternaries.bt", &script, "nested more than 100 levels deep");
    let script = format!("BEGIN {{ @x = {}1{}; }}\n", "1 ?\n".repeat(8000), " : 1".repeat(8000));
    assert_clean_error("ternaries_then.bt", &script, "nested more than 100 levels deep");
}

#[test]
fn an_unwritable_stderr_never_ends_a_trace() {
    if !common::can_trace("an_unwritable_stderr_never_ends_a_trace") {
        return;
    }
    let full = fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
    // `-v` writes to stderr at every stage: attach, the timer thread, hotplug, exit.
    let output = Command::new(common::BIN)
        .args([
            "-v",
            "-e",
            r#"BEGIN { printf("hi\n"); } interval:ms:20 { exit(); } END { printf("end\n"); }"#,
        ])
        .stdout(Stdio::piped())
        .stderr(full)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = common::stdout(&output);
    assert!(stdout.starts_with("hi\nend\n"), "{stdout:?}");
}

/// Started with its standard output closed (`>&-`), the tracer puts /dev/null there before it opens anything:
/// else the first file or BPF object it opened would take descriptor 1 and be written to ("Bad file
/// descriptor", exit 1). With standard input closed too, the output reaches a reopened standard output as usual.
#[test]
fn closed_standard_descriptors_are_filled_before_anything_is_opened() {
    if !common::can_trace("closed_standard_descriptors_are_filled_before_anything_is_opened") {
        return;
    }
    let script = r#"BEGIN { printf("x\n"); exit(); }"#;
    let closed_stdout = Command::new("sh")
        .args(["-c", r#"exec "$0" -q -e "$1" >&-"#, common::BIN, script])
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = common::stderr(&closed_stdout);
    assert_eq!(closed_stdout.status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    let closed_stdin =
        Command::new("sh").args(["-c", r#"exec "$0" -q -e "$1" <&-"#, common::BIN, script]).output().unwrap();
    assert_eq!(closed_stdin.status.code(), Some(0), "{}", common::stderr(&closed_stdin));
    assert!(common::stdout(&closed_stdin).starts_with("x\n"), "{}", common::stdout(&closed_stdin));
}

#[test]
fn a_stalled_json_consumer_is_told_every_record_lost() {
    let Some(_kernel) = common::KernelState::acquire("a_stalled_json_consumer_is_told_every_record_lost")
    else {
        return;
    };
    if common::tracefs().is_none() {
        common::skip("a_stalled_json_consumer_is_told_every_record_lost", "no tracefs");
        return;
    }
    // More records than the 8 MiB ring buffer and the pipe hold together.
    const CALLS: u64 = 2_000_000;
    let workload = common::workload();
    let command = format!("{} getppid {CALLS} 1", workload.display());
    let child = common::Reaped::spawn(
        Command::new(common::BIN)
            .args(["-q", "-f", "json", "-c", &command, "-e"])
            .arg(r#"tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { printf("x\n"); }"#)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .unwrap();
    // Nobody reads for a while: the pipe fills, the tracer blocks writing, the ring buffer fills.
    std::thread::sleep(Duration::from_millis(2500));
    // Then everything is read, as it comes.
    let pid = child.id();
    let (done, output) = std::sync::mpsc::channel();
    // The output is read while waiting: the guard is given up, and its process group killed past the limit.
    std::thread::spawn(move || done.send(child.into_inner().wait_with_output()));
    let Ok(output) = output.recv_timeout(Duration::from_secs(60)) else {
        let _ = Command::new("kill").args(["-9", "--", &format!("-{pid}")]).status();
        panic!("the tracer did not finish within 60 s");
    };
    let output = output.unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", common::stderr(&output));
    let stdout = common::stdout(&output);
    let printed = stdout.lines().filter(|l| l.contains(r#""type": "printf""#)).count() as u64;
    let lost: u64 = stdout
        .lines()
        .filter(|l| l.starts_with(r#"{"type": "lost_events", "count": "#))
        .map(|l| {
            l[r#"{"type": "lost_events", "count": "#.len()..]
                .split(',')
                .next()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert!(lost > 0, "nothing was lost: the test did not stall the tracer ({printed} printed)");
    assert_eq!(printed + lost, CALLS, "{printed} records printed and {lost} reported lost");
}

/// A fuzz find: a NUL byte in an fentry function's name panicked inside libbpf-rs's BTF lookup.
#[test]
fn a_nul_byte_in_a_function_name_is_no_panic() {
    let (code, stderr) = dry_run("nul_in_fentry", "fentry:x\0 {} BEGIN { exit(); }");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("describes no function") || stderr.contains("cannot be read"), "{stderr}");
    assert!(!stderr.contains("panicked") && !stderr.contains("internal error"), "{stderr}");
}

/// A fuzz find: a struct inside a struct named as a statement (`$mnt.mnt;` in a mutant of opensnoop.bt) was an
/// internal error; like any value read as a statement, it does nothing.
#[test]
fn a_struct_member_as_a_statement_does_nothing() {
    let (code, stderr) =
        dry_run("struct_member_statement", "BEGIN { $t = curtask; $t.se; curtask->se; exit(); }");
    assert_eq!(code, Some(0), "{stderr}");
}

/// A fuzz find (seed 6): each `.member` of a chain checked its base twice over, so `curtask.parent` 100 deep took
/// 2^100 steps (hung); 18 deep took 10 s. Checked once per level, a chain compiles at once, or (deeper than the
/// stack holds its steps) is refused at once.
#[test]
fn a_chain_of_members_compiles_at_once() {
    let script = |depth| {
        let chain = ".parent".repeat(depth);
        format!("BEGIN {{ printf(\"%d\\n\", curtask{chain}.pid); $p = curtask{chain}; exit(); }}")
    };
    let (code, stderr) = dry_run("member_chain_40.bt", &script(40));
    assert_eq!(code, Some(0), "{stderr}");
    assert_clean_error("member_chain_100.bt", &script(100), "more than the 512 bytes of stack");
}
