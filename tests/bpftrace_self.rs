//! bpftrace's self tests (tests/self/*.bt of bpftrace's source, found by scripts/bpftrace-source): each file run
//! through `--test`, one test here per file, must run every one of its `test:` probes and pass them all.

mod common;

use common::*;
use std::path::PathBuf;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// bpftrace's tests/self; `Err` says why it cannot be had.
fn self_tests() -> Result<PathBuf, String> {
    let dir = fetched("bpftrace-source")?.join("tests/self");
    match dir.is_dir() {
        true => Ok(dir),
        false => Err(format!("{} is missing", dir.display())),
    }
}

/// Runs `NAME.bt` of bpftrace's tests/self with `--test`.
fn run(name: &str) {
    if !can_trace(name) {
        return;
    }
    let file = match self_tests() {
        Ok(dir) => dir.join(format!("{name}.bt")),
        Err(why) => return skip(name, &format!("no bpftrace source: {why}")),
    };
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let probes = text.lines().filter(|line| line.starts_with("test:")).count();
    let output = run_with(&["--test", file.to_str().expect("a UTF-8 path")], LIMIT);
    let (out, err) = (stdout(&output), stderr(&output));
    let ran = out.lines().filter(|line| line.starts_with("[ RUN      ]")).count();
    let passed = out.lines().filter(|line| line.starts_with("[       OK ]")).count();
    assert!(output.status.success() && !out.contains("FAILED"), "{}:\n{out}{err}", file.display());
    // No probe of the file left out: each ran and passed.
    assert!(
        probes > 0 && ran == probes && passed == probes,
        "{probes} test probes in {}:\n{out}{err}",
        file.display()
    );
}

macro_rules! self_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                run(stringify!($name));
            }
        )*
        /// The files run above, by name.
        const FILES: &[&str] = &[$(stringify!($name)),*];
    };
}

self_tests!(basic, bit_ops, bool, find, intcast, map_functions, record, signed_ints, strings, tuple);

/// A source with another self test (a newer commit) fails here until the test is added above.
#[test]
fn every_self_test_file_has_its_test() {
    let dir = match self_tests() {
        Ok(dir) => dir,
        Err(why) => return skip("every_self_test_file_has_its_test", &format!("no bpftrace source: {why}")),
    };
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("read tests/self")
        .filter_map(|entry| entry.expect("an entry").file_name().into_string().ok())
        .filter_map(|name| name.strip_suffix(".bt").map(str::to_string))
        .collect();
    names.sort();
    assert_eq!(names, FILES, "the .bt files of {}", dir.display());
}
