//! Positional parameters given on the command line: after `-e PROGRAM` or the script file, before or
//! after `--`, in expressions and in attach points.

mod common;

use common::*;
use std::process::{Output, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(20);

fn run_with(args: &[&str]) -> Output {
    let child = Reaped::spawn(tracer(args).stdout(Stdio::piped()).stderr(Stdio::piped())).expect("spawn");
    wait_output(child, LIMIT)
}

#[test]
fn parameters_after_a_program_are_numbers_or_strings() {
    if !can_trace("parameters_after_a_program_are_numbers_or_strings") {
        return;
    }
    let script = r#"BEGIN { print(($1, $2, $#)); printf("%s|%s|%d\n", str($1 + 1), str($2), $3); exit(); }"#;
    let output = run_with(&["-q", "-e", script, "p1", "--", "20"]);
    assert_eq!(stdout(&output).trim_end(), "(p1, 20, 2)\n1|20|0", "{}", stderr(&output));
}

#[test]
fn a_parameter_completes_an_attach_point() {
    if !can_trace("a_parameter_completes_an_attach_point") {
        return;
    }
    let output = run_with(&["-q", "-e", r#"i:ms:$1 { printf("%s\n", probe); exit(); }"#, "7"]);
    assert_eq!(stdout(&output).trim_end(), "interval:ms:7", "{}", stderr(&output));
    let output = run_with(&["-q", "-e", r#"$1 { printf("%s\n", probe); exit(); }"#, "BEGIN"]);
    assert_eq!(stdout(&output).trim_end(), "BEGIN", "{}", stderr(&output));
}

#[test]
fn an_offset_past_the_end_of_a_parameter_is_an_error() {
    let output = run_with(&["--dry-run", "-e", r#"BEGIN { printf("%s\n", str($1 + 6)); }"#, "hello"]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("`$1 + 6` is past the end of the parameter `hello`"),
        "{}",
        stderr(&output)
    );
}
