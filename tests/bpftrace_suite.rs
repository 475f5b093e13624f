//! bpftrace's own runtime suite (tests/runtime of bpftrace's source, found by scripts/bpftrace-source, run by
//! tests/bpftrace_suite.py): its self-contained cases must pass, except the ones listed in
//! tests/bpftrace-suite.expected-failures (those listed in tests/bpftrace-suite.differences, where steadytrace
//! differs by design, are left out). A case that newly fails is a regression and fails this test; a listed case
//! that now passes is named, so the list shrinks.

mod common;

use std::path::Path;
use std::process::Command;

#[test]
fn bpftrace_runtime_suite_passes() {
    if !common::can_trace("bpftrace_runtime_suite_passes") {
        return;
    }
    let source = match common::fetched("bpftrace-source") {
        Ok(source) => source,
        Err(why) => {
            common::skip("bpftrace_runtime_suite_passes", &format!("no bpftrace source: {why}"));
            return;
        }
    };
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let out = match Command::new("python3")
        .arg(here.join("bpftrace_suite.py"))
        .arg("--source")
        .arg(&source)
        .args(["--steadytrace", common::BIN])
        .arg("--expected-failures")
        .arg(here.join("bpftrace-suite.expected-failures"))
        .arg("--differences")
        .arg(here.join("bpftrace-suite.differences"))
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            common::skip("bpftrace_runtime_suite_passes", &format!("cannot run python3: {e}"));
            return;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout.lines().find(|l| l.starts_with("passed ")).unwrap_or("no summary");
    // Straight to the process's stderr: libtest captures the output of passing tests.
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("bpftrace's runtime suite ({}): {summary}\n", source.display()).as_bytes(),
    );
    assert!(
        out.status.success(),
        "{}\n{}",
        stdout
            .lines()
            .filter(|l| l.starts_with("REGRESSION") || l.starts_with("FAIL"))
            .collect::<Vec<_>>()
            .join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
}
