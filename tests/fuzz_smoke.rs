//! A short run of the front end's mutation fuzzer (examples/fuzz.rs) in the suite: no input it makes
//! may crash or hang the compiler. Its seeds are the project's scripts, and bpftrace's tools and source where
//! they can be had; which it took is printed. The documented long run is in docs/TESTING.md.

use std::path::Path;
use std::process::Command;

#[test]
fn ten_seconds_of_fuzzing_find_no_crash_or_hang() {
    let bin = Path::new(env!("CARGO_BIN_EXE_steadytrace")).parent().unwrap().join("examples/fuzz");
    let out = std::env::temp_dir().join(format!("steadytrace-fuzz-smoke-{}", std::process::id()));
    let output = Command::new(&bin)
        .args(["--seconds", "10", "--seed", "20261201", "--out", out.to_str().unwrap()])
        .output()
        .expect("the fuzzer runs (built by cargo test)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the fuzzer found a crash or hang (inputs in {}):\n{stdout}{stderr}",
        out.display()
    );
    assert!(stdout.contains(" 0 crashes"), "{stdout}");
    // Straight to the process's stderr (libtest captures the output of passing tests): the seeds it fuzzed.
    let said: Vec<&str> =
        stderr.lines().filter(|l| l.starts_with("fuzz: seeds") || l.starts_with("fuzz: without")).collect();
    let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{}\n", said.join("\n")).as_bytes());
    let _ = std::fs::remove_dir_all(&out);
}
