//! The command line's header options, as bpftrace has them: `-I DIR` is searched for `#include`d headers before
//! the system's directories, and `--include FILE` reads a header as if the script began by including it.

mod common;

use common::*;
use std::time::Duration;

#[test]
fn dash_i_and_include_find_the_scripts_own_headers() {
    if !can_trace("dash_i_and_include_find_the_scripts_own_headers") {
        return;
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("headers");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(
        dir.join("mine.h"),
        "#include <sub/more.h>\n#define MY_CONST 42\n#define THIRD MY_CONST\n",
    )
    .unwrap();
    std::fs::write(dir.join("sub/more.h"), "#define MORE 7\n").unwrap();
    let dir_arg = dir.to_string_lossy().into_owned();
    let script = "#include \"mine.h\"\nBEGIN { printf(\"%d %d %d\\n\", MY_CONST, THIRD, MORE); exit(); }";

    // Without -I the header is nowhere to be found: its names are unknown.
    let without = run_with(&["-e", script], Duration::from_secs(30));
    assert!(stderr(&without).contains("unknown identifier `MY_CONST`"), "{}", stderr(&without));

    let with = run_with(&["-I", &dir_arg, "-e", script], Duration::from_secs(30));
    assert_eq!(stdout(&with), "42 42 7\n\n\n", "{}", stderr(&with));

    // `--include` by path, and by name in an -I directory, beside a system header's constants.
    let file = dir.join("mine.h").to_string_lossy().into_owned();
    let script = "BEGIN { printf(\"%d %d %d\\n\", MY_CONST, MORE, EPERM); exit(); }";
    let by_path = run_with(
        &["-I", &dir_arg, "--include", &file, "--include", "errno.h", "-e", script],
        Duration::from_secs(30),
    );
    assert_eq!(stdout(&by_path), "42 7 1\n\n\n", "{}", stderr(&by_path));
    let by_name = run_with(
        &["-I", &dir_arg, "--include", "mine.h", "--include", "errno.h", "-e", script],
        Duration::from_secs(30),
    );
    assert_eq!(stdout(&by_name), "42 7 1\n\n\n", "{}", stderr(&by_name));

    // A file `--include` cannot find is an error, before anything is compiled.
    let missing = run_with(&["--include", "/nonexistent/mine.h", "-e", script], Duration::from_secs(30));
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("--include /nonexistent/mine.h: no such file"), "{}", stderr(&missing));
}

/// A header found nowhere (neither installed nor one of steadytrace's tables) is passed over, and the script
/// runs; bpftrace 0.27.1 stops at it (its clang finds no file). Only an unknown name like a macro names it
/// (tests/errors/include_header_found_nowhere.bt).
#[test]
fn a_header_found_nowhere_costs_nothing_until_a_name_is_unknown() {
    if !can_trace("a_header_found_nowhere_costs_nothing_until_a_name_is_unknown") {
        return;
    }
    let script = "#include <net/steadytrace_no_such_header.h>\nBEGIN { printf(\"%d\\n\", 7); exit(); }";
    let output = run_with(&["-e", script], Duration::from_secs(30));
    assert_eq!(stdout(&output), "7\n\n\n", "{}", stderr(&output));
    assert!(!stderr(&output).contains("steadytrace_no_such_header"), "{}", stderr(&output));
}

/// src/lang/header_tables.rs is what `scripts/header-constants` writes from the linux-libc-dev version it
/// names: regenerated into a temporary file (the packages are cached, a few seconds) and compared byte for byte.
#[test]
fn the_generated_header_tables_are_current() {
    let test = "the_generated_header_tables_are_current";
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let committed = std::fs::read_to_string(root.join("src/lang/header_tables.rs")).unwrap();
    let version = committed
        .lines()
        .find_map(|line| line.strip_prefix("pub const VERSION: &str = \"")?.strip_suffix("\";"))
        .expect("header_tables.rs names its linux-libc-dev version");
    let out = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("header_tables.rs");
    let script = root.join("scripts/header-constants");
    let output = std::process::Command::new(&script)
        .args(["--version", version, "-o"])
        .arg(&out)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    if !output.status.success() {
        let said = String::from_utf8_lossy(&output.stderr);
        return skip(test, said.trim());
    }
    let regenerated = std::fs::read_to_string(&out).unwrap();
    assert!(
        regenerated == committed,
        "src/lang/header_tables.rs differs from what scripts/header-constants writes now (see {}): run the script",
        out.display()
    );
}
