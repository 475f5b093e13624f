//! `getopt()` with options on the command line (`-- --name=value`), which the corpus cannot give.

mod common;

use common::*;
use std::process::Stdio;
use std::time::Duration;

fn run_with(script: &str, words: &[&str]) -> std::process::Output {
    let mut args = vec!["-q", "-e", script, "--"];
    args.extend(words);
    let child = Reaped::spawn(tracer(&args).stdout(Stdio::piped()).stderr(Stdio::piped())).expect("spawn");
    wait_output(child, Duration::from_secs(20))
}

#[test]
fn options_after_the_script_set_getopt_values() {
    if !can_trace("options_after_the_script_set_getopt_values") {
        return;
    }
    let script = r#"BEGIN { print((getopt("aa", 20), getopt("bb", -1), getopt("cc", true), getopt("dd"),
        getopt("ee", "hello"))); exit(); }"#;
    let output = run_with(script, &["--dd", "--aa=0xffffffffffffffff", "--bb=-10", "--cc=False"]);
    assert_eq!(
        stdout(&output),
        "(18446744073709551615, -10, false, true, hello)\n\n\n",
        "{}",
        stderr(&output)
    );
    let output = run_with(script, &[]);
    assert_eq!(stdout(&output), "(20, -1, true, false, hello)\n\n\n", "{}", stderr(&output));
}

#[test]
fn unknown_options_and_bad_values_are_errors() {
    let script = r#"BEGIN { print(getopt("aa", 10)); exit(); }"#;
    let output = run_with(script, &["--bb"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output),
        "steadytrace: unexpected program command line options: --bb (the script's options: --aa)\n"
    );
    let output = run_with(script, &["--aa=False"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).starts_with("stdin:1:15: ERROR: program command line option --aa=False: "));
}
