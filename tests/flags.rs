//! bpftrace 0.27.1's command-line flags, each as steadytrace takes it (docs/LANGUAGE.md, "Flags"). The
//! checks that compile without loading run anywhere, against a given feature table; those that trace need
//! root.

mod common;

use common::*;
use std::io::Read;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(20);

/// The tracer with `args`, compiling against every feature (no kernel asked), to its end.
fn compiled(args: &[&str]) -> Output {
    let mut command = tracer(args);
    command.env("STEADYTRACE_KERNEL_FEATURES", "all").stdout(Stdio::piped()).stderr(Stdio::piped());
    wait_output(Reaped::spawn(&mut command).expect("spawn"), LIMIT)
}

#[test]
fn no_warnings_silences_the_compilers_warnings_and_warnf() {
    let script = r#"BEGIN { exit(); printf("never\n"); }"#;
    let warned = compiled(&["--dry-run", "-I", "/nonexistent-dir", "-e", script]);
    assert!(stderr(&warned).contains("WARNING: Unreachable statement"), "{}", stderr(&warned));
    assert!(stderr(&warned).contains("-I /nonexistent-dir"), "{}", stderr(&warned));
    let silent = compiled(&["--dry-run", "--no-warnings", "-I", "/nonexistent-dir", "-e", script]);
    assert_eq!((silent.status.code(), stderr(&silent).as_str()), (Some(0), ""));

    if !can_trace("no_warnings_silences_the_compilers_warnings_and_warnf") {
        return;
    }
    let script = r#"BEGIN { warnf("careful %d", 1); printf("done\n"); exit(); }"#;
    let warned = run_with(&["-q", "-e", script], LIMIT);
    assert!(stderr(&warned).contains("WARNING: careful 1"), "{}", stderr(&warned));
    let silent = run_with(&["-q", "--no-warnings", "-e", script], LIMIT);
    assert_eq!(stderr(&silent), "");
    assert!(stdout(&silent).starts_with("done\n"), "{}", stdout(&silent));
}

#[test]
fn warnings_flag_is_accepted_but_not_with_no_warnings() {
    for flag in ["-k", "--warnings"] {
        let output = compiled(&["--dry-run", flag, "-e", "BEGIN { }"]);
        assert_eq!(output.status.code(), Some(0), "{flag}: {}", stderr(&output));
    }
    let both = compiled(&["--dry-run", "-k", "--no-warnings", "-e", "BEGIN { }"]);
    assert_eq!(both.status.code(), Some(2));
    assert!(stderr(&both).contains("'--warnings' cannot be used with '--no-warnings'"), "{}", stderr(&both));
}

#[test]
fn no_feature_takes_features_away() {
    let script = r#"BEGIN { @m[1] = 1; printf("%d\n", len(@m)); }"#;
    assert_eq!(compiled(&["--dry-run", "-e", script]).status.code(), Some(0));
    let without = compiled(&["--dry-run", "--no-feature", "kprobe_session,for_each_map_elem", "-e", script]);
    assert_eq!(without.status.code(), Some(1));
    assert!(
        stderr(&without).contains("needs the bpf_for_each_map_elem helper (Linux 5.13)")
            && stderr(&without).contains("taken as without it (--no-feature"),
        "{}",
        stderr(&without)
    );
    // bpftrace's three names are all known.
    let bpftraces = compiled(&[
        "--dry-run",
        "--no-feature",
        "kprobe_multi,kprobe_session,uprobe_multi",
        "-e",
        "BEGIN {}",
    ]);
    assert_eq!(bpftraces.status.code(), Some(0), "{}", stderr(&bpftraces));
    let unknown = compiled(&["--dry-run", "--no-feature", "warp_drive", "-e", "BEGIN {}"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("no kernel feature `warp_drive` (known: ringbuf, raw_tp, "),
        "{}",
        stderr(&unknown)
    );
}

#[test]
fn probe_filter_keeps_the_matching_attach_points_begin_and_end() {
    let none = compiled(&["--dry-run", "--probe-filter", "zzz", "-e", "interval:ms:100 { }"]);
    assert_eq!(none.status.code(), Some(1));
    assert!(
        stderr(&none).contains("--probe-filter matches none of the script's attach points"),
        "{}",
        stderr(&none)
    );
    let bad = compiled(&["--dry-run", "--probe-filter", "[x", "-e", "interval:ms:100 { }"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("invalid --probe-filter regex"), "{}", stderr(&bad));

    if !can_trace("probe_filter_keeps_the_matching_attach_points_begin_and_end") {
        return;
    }
    let script = r#"BEGIN { printf("begin %d\n", @x); } interval:ms:100 { printf("bad\n"); exit(); }
        interval:ms:200 { @x = 1; printf("hit\n"); exit(); } END { printf("end\n"); }"#;
    let output = run_with(&["-q", "--probe-filter", ":200", "-e", script], LIMIT);
    assert_eq!(stdout(&output), "begin 0\nhit\nend\n\n\n@x: 1\n", "{}", stderr(&output));
    // A probe filtered away still gives its maps their types.
    let output = run_with(
        &["-q", "--probe-filter", "BEGIN", "-e", "BEGIN { print(@x); exit(); } interval:s:1 { @x = 1; }"],
        LIMIT,
    );
    assert!(stdout(&output).starts_with("@x: 0\n"), "{}{}", stdout(&output), stderr(&output));
}

#[test]
fn debug_stages_print_instructions_or_say_why_not() {
    for stage in ["codegen", "dis", "all"] {
        let output = compiled(&["--dry-run", "-d", stage, "-e", "BEGIN { }"]);
        assert!(
            stdout(&output).starts_with("BEGIN:\n   0: "),
            "-d {stage}: {}{}",
            stdout(&output),
            stderr(&output)
        );
    }
    // `-d` alone, as before: the instructions.
    let output = compiled(&["--dry-run", "-d", "-e", "BEGIN { }"]);
    assert!(stdout(&output).starts_with("BEGIN:\n"), "{}", stderr(&output));
    let llvm = compiled(&["--dry-run", "-d", "codegen-opt", "-e", "BEGIN { }"]);
    assert_eq!(llvm.status.code(), Some(1));
    assert!(stderr(&llvm).contains("-d codegen-opt: it is LLVM's optimised IR"), "{}", stderr(&llvm));
    for stage in ["ast", "parse", "types", "libbpf", "verifier"] {
        let output = compiled(&["--dry-run", "-d", stage, "-e", "BEGIN { }"]);
        assert_eq!(output.status.code(), Some(1), "-d {stage}");
        assert!(stderr(&output).starts_with(&format!("steadytrace: -d {stage}: ")), "{}", stderr(&output));
    }
}

#[test]
fn modes_are_bpftraces_or_refused() {
    let codegen = compiled(&["--mode", "codegen", "-e", r#"BEGIN { printf("hi\n"); }"#]);
    assert_eq!((codegen.status.code(), stdout(&codegen).as_str()), (Some(0), ""), "{}", stderr(&codegen));
    for flags in [&["--mode", "format"][..], &["--fmt"][..]] {
        let output = compiled(&[flags, &["-e", "BEGIN{print(1)}"]].concat());
        assert_eq!(stdout(&output), "BEGIN\n{\n  print(1);\n}\n", "{flags:?}: {}", stderr(&output));
    }
    let output = compiled(&["--mode", "compiler-bench", "-e", "BEGIN { }"]);
    assert_eq!(output.status.code(), Some(1));
    let said = "--mode compiler-bench: timing each compiler pass is not in steadytrace yet";
    assert!(stderr(&output).contains(said), "{}", stderr(&output));
    let unknown = compiled(&["--mode", "turbo", "-e", "BEGIN { }"]);
    assert!(stderr(&unknown).contains("[possible values: codegen, compiler-bench, bench, test, format]"));

    if !can_trace("modes_are_bpftraces_or_refused") {
        return;
    }
    let output = run_with(&["--mode", "test", "-e", "test:fine { return 0; }"], LIMIT);
    assert!(stdout(&output).contains("[       OK ] test:fine"), "{}{}", stdout(&output), stderr(&output));
}

#[test]
fn accepted_for_bpftraces_sake() {
    let output = compiled(&["--dry-run", "--usdt-file-activation", "-e", "BEGIN { }"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}

#[test]
fn traceable_functions_come_from_the_file() {
    let file = std::env::temp_dir().join(format!("steadytrace-traceable-{}", std::process::id()));
    std::fs::write(&file, "vfs_read\nsteadytrace_not_a_kernel_fn [fake]\n").expect("write");
    let pattern = "kprobe:steadytrace_not_a_kernel*";
    let listed = compiled(&["-l", pattern, "--traceable-functions", file.to_str().expect("utf-8")]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(stdout(&listed), "kprobe:steadytrace_not_a_kernel_fn\n", "{}", stderr(&listed));
    assert_eq!(stdout(&compiled(&["-l", pattern])), "");
    let missing = compiled(&["-l", pattern, "--traceable-functions", "/nonexistent-list"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).starts_with("steadytrace: --traceable-functions /nonexistent-list: "));
}

#[test]
fn a_separator_after_positional_parameters_leaves_named_ones() {
    if !can_trace("a_separator_after_positional_parameters_leaves_named_ones") {
        return;
    }
    let script = r#"BEGIN { printf("%d %s %s %d\n", getopt("n", 1), $1, $2, $#); exit(); }"#;
    let output = run_with(&["-q", "-e", script, "a", "b", "--", "--n=5"], LIMIT);
    assert!(stdout(&output).starts_with("5 a b 2\n"), "{}{}", stdout(&output), stderr(&output));
}

/// When the first byte of stdout arrives, after start, for a script printing `x` every 100 ms and a newline
/// and exiting after 1.2 s, under `buffering`.
fn first_byte(buffering: &[&str]) -> Duration {
    let script = r#"interval:ms:100 { printf("x"); } interval:ms:1200 { printf("\n"); exit(); }"#;
    let mut command = tracer(&[buffering, &["-q", "-e", script]].concat());
    let mut child = Reaped::spawn(command.stdout(Stdio::piped()).stderr(Stdio::null())).expect("spawn");
    let start = Instant::now();
    let mut byte = [0u8];
    let read = child.stdout.take().expect("piped").read(&mut byte);
    let elapsed = start.elapsed();
    assert_eq!(read.ok(), Some(1));
    let _ = wait_output(child, LIMIT);
    elapsed
}

#[test]
fn buffering_modes_write_when_bpftraces_do() {
    if !can_trace("buffering_modes_write_when_bpftraces_do") {
        return;
    }
    let late = Duration::from_millis(1000);
    // Unbuffered, and by default (each batch of events written once read): the first `x` at once.
    assert!(first_byte(&["-B", "none"]) < late);
    assert!(first_byte(&[]) < late);
    // Line and full buffering: only with the newline at exit.
    assert!(first_byte(&["-B", "line"]) >= late);
    assert!(first_byte(&["-B", "full"]) >= late);
    let output = run_with(
        &["-q", "-B", "full", "-e", r#"BEGIN { printf("a\n"); } interval:ms:300 { printf("b\n"); exit(); }"#],
        LIMIT,
    );
    assert_eq!(stdout(&output), "a\nb\n\n\n");
}
