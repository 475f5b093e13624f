//! `-k` / `--warnings`: each probe read that fails is warned of on stderr, every time, as bpftrace 0.27.1
//! words it (the place, the error, the helper and its return code, the line with `~` under the expression),
//! and the script's own output is what it is without `-k`. Without `-k`, nothing is said. Needs root.

mod common;

use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

/// Reads of kernel memory through bad pointers, in a tracepoint the workload fires three times.
const KERNEL_READS: &str = r#"tracepoint:syscalls:sys_enter_getppid /pid == cpid/ {
  $p = (int64 *)8; $t = (struct task_struct *)32;
  printf("%d %d\n", *$p, $t->pid);
  printf("[%s] ", str((int8 *)16)); print(buf(24, 4));
}"#;

/// What 0.27.1 prints for each firing of `KERNEL_READS` (`bpftrace -k`, the same four reads), but for
/// `str()`: steadytrace reads an address's string with `probe_read_str`, which takes 16 for the process's
/// memory (0.27.1 calls `probe_read_kernel_str`: `Numerical result out of range`, -34).
const KERNEL_WARNINGS: &str = r#"stdin:3:21-24: WARNING: Numerical result out of range
Additional Info - helper: probe_read_kernel, retcode: -34
  printf("%d %d\n", *$p, $t->pid);
                    ~~~
stdin:3:26-33: WARNING: Numerical result out of range
Additional Info - helper: probe_read_kernel, retcode: -34
  printf("%d %d\n", *$p, $t->pid);
                         ~~~~~~~
stdin:4:19-34: WARNING: Bad address
Additional Info - helper: probe_read_str, retcode: -14
  printf("[%s] ", str((int8 *)16)); print(buf(24, 4));
                  ~~~~~~~~~~~~~~~
stdin:4:43-53: WARNING: Bad address
Additional Info - helper: probe_read, retcode: -14
  printf("[%s] ", str((int8 *)16)); print(buf(24, 4));
                                          ~~~~~~~~~~
"#;

/// The tracer on `script` with `extra` flags, the workload run with `workload_args` as its command.
fn traced(extra: &[&str], script: &str, workload_args: &str) -> std::process::Output {
    let command = format!("{} {workload_args}", workload().display());
    let mut args = vec!["-q"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-e", script, "-c", &command]);
    run_with(&args, LIMIT)
}

#[test]
fn failed_kernel_reads_are_warned_of_each_time_with_k() {
    if !can_trace("failed_kernel_reads_are_warned_of_each_time_with_k") {
        return;
    }
    let warned = traced(&["-k"], KERNEL_READS, "getppid 3 1");
    assert_eq!(warned.status.code(), Some(0), "{}", stderr(&warned));
    assert_eq!(stderr(&warned), KERNEL_WARNINGS.repeat(3));
    // What the script prints is unchanged: a failed read gives zeros.
    assert!(stdout(&warned).starts_with(&"0 0\n[] \\x00\\x00\\x00\\x00\n".repeat(3)), "{}", stdout(&warned));
    let quiet = traced(&[], KERNEL_READS, "getppid 3 1");
    assert_eq!(stderr(&quiet), "");
    assert_eq!(stdout(&quiet), stdout(&warned));
    // --warnings is -k.
    let long = traced(&["--warnings"], KERNEL_READS, "getppid 1 1");
    assert_eq!(stderr(&long), KERNEL_WARNINGS);
}

#[test]
fn failed_user_reads_are_warned_of_in_uprobes() {
    if !can_trace("failed_user_reads_are_warned_of_in_uprobes") {
        return;
    }
    let script = format!(
        r#"uprobe:{}:workload_add {{
  $p = (uint64 *)8; $t = (struct task_struct *)32;
  printf("%d %d %d\n", arg0, *$p, $t->pid);
}}"#,
        workload().display()
    );
    // As 0.27.1 prints them: a uprobe's pointers are the process's.
    let expected = r#"stdin:3:30-33: WARNING: Bad address
Additional Info - helper: probe_read_user, retcode: -14
  printf("%d %d %d\n", arg0, *$p, $t->pid);
                             ~~~
stdin:3:35-42: WARNING: Bad address
Additional Info - helper: probe_read_user, retcode: -14
  printf("%d %d %d\n", arg0, *$p, $t->pid);
                                  ~~~~~~~
"#;
    let warned = traced(&["-k"], &script, "calls 2");
    assert_eq!(stderr(&warned), expected.repeat(2));
    assert!(stdout(&warned).starts_with("0 0 0\n1 0 0\n"), "{}", stdout(&warned));
    let quiet = traced(&[], &script, "calls 2");
    assert_eq!((stderr(&quiet).as_str(), stdout(&quiet)), ("", stdout(&warned)));
}

#[test]
fn reads_that_succeed_say_nothing_and_json_gets_helper_errors() {
    if !can_trace("reads_that_succeed_say_nothing_and_json_gets_helper_errors") {
        return;
    }
    let script = r#"tracepoint:syscalls:sys_enter_getppid /pid == cpid/ {
  printf("%d %s\n", (uint64)curtask->tgid == pid, curtask->comm); @x = *(int64 *)8; }"#;
    let good = traced(&["-k"], script, "getppid 1 1");
    assert!(stdout(&good).starts_with("1 workload\n"), "{}", stdout(&good));
    assert!(
        stderr(&good).contains("stdin:2:72-83: WARNING: Numerical result out of range\n"),
        "{}",
        stderr(&good)
    );
    assert_eq!(stderr(&good).matches("WARNING").count(), 1, "{}", stderr(&good));
    // In JSON, as 0.27.1 writes it, among the output's records.
    let json = traced(&["-k", "-f", "json"], script, "getppid 1 1");
    assert!(
        stdout(&json).contains(
            "{\"type\": \"helper_error\", \"msg\": \"Numerical result out of range\", \"helper\": \
             \"probe_read_kernel\", \"retcode\": -34, \"filename\": \"stdin\", \"line\": 2, \"col\": 72}\n"
        ),
        "{}",
        stdout(&json)
    );
    assert_eq!(stderr(&json), "");
}

#[test]
fn k_checks_reads_alone() {
    let instructions = |script: &str, extra: &[&str]| {
        let mut args = vec!["--dry-run", "-d", "dis"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-e", script]);
        let mut command = tracer(&args);
        command
            .env("STEADYTRACE_KERNEL_FEATURES", "all")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let output = wait_output(Reaped::spawn(&mut command).expect("spawn"), LIMIT);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        stdout(&output).lines().count()
    };
    let reads = r#"interval:ms:100 { @x = *(int64 *)8; printf("%s\n", str((int8 *)16)); }"#;
    let (plain, checked) = (instructions(reads, &[]), instructions(reads, &["-k"]));
    // After each of the two reads: a test of r0, the record written and sent, r0 kept.
    assert!(checked > plain + 2 * 8, "{plain} instructions, {checked} with -k");
    let no_reads = r#"interval:ms:100 { @x = 8; printf("%s\n", comm); }"#;
    assert_eq!(instructions(no_reads, &[]), instructions(no_reads, &["-k"]));
}
