//! The golden corpus: the BPF programs steadytrace emits for each `tests/golden/NAME.bt` (`--dry-run -d`),
//! against `tests/golden/NAME.insns`. Compiled against a given table of kernel features
//! (`STEADYTRACE_KERNEL_FEATURES`: `all`, or the list in `NAME.features`), never probed, and run as the
//! unprivileged user `nobody` when this test runs as root: it needs no root and no kernel feature, and
//! gives the same programs on any machine of this architecture. Left out: `elapsed`, `nsecs(sw_tai)` and
//! `tseries()`, whose programs carry the tracer's start time or the clocks' offset as a constant.
//!
//! A change to code generation shows here as a readable diff. To accept it:
//! `STEADYTRACE_GOLDEN_UPDATE=1 cargo test --test golden`, then review `git diff tests/golden`.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const UPDATE_VAR: &str = "STEADYTRACE_GOLDEN_UPDATE";
/// The user the compiler runs as when this test runs as root.
const NOBODY: u32 = 65534;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// The tracer where `nobody` may run it: the build directory may be closed to other users.
fn tracer_for_anyone() -> PathBuf {
    let copy = std::env::temp_dir().join(format!("steadytrace-golden-{}", std::process::id()));
    std::fs::copy(common::BIN, &copy).expect("copy the tracer");
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    copy
}

/// The instructions of `script` compiled against `features`, as an unprivileged user.
fn emitted(tracer: &Path, script: &str, features: &str) -> String {
    let mut command = Command::new(tracer);
    command.args(["--dry-run", "-d", "-e", script]).env("STEADYTRACE_KERNEL_FEATURES", features);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        command.uid(NOBODY).gid(NOBODY);
    }
    let output = command.output().expect("run the tracer");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the corpus script failed to compile unprivileged:\n{stderr}");
    String::from_utf8(output.stdout).expect("the listing is UTF-8")
}

#[test]
fn the_emitted_programs_are_those_of_the_corpus() {
    let tracer = tracer_for_anyone();
    let update = std::env::var(UPDATE_VAR).as_deref() == Ok("1");
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(corpus())
        .expect("tests/golden")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "bt"))
        .collect();
    scripts.sort();
    assert!(scripts.len() >= 10, "the corpus has {} scripts", scripts.len());
    let mut differ = vec![];
    for script in &scripts {
        let text = std::fs::read_to_string(script).expect("script");
        let features = std::fs::read_to_string(script.with_extension("features"))
            .map_or("all".to_string(), |f| f.trim().to_string());
        let listing = emitted(&tracer, &text, &features);
        assert_eq!(listing, emitted(&tracer, &text, &features), "{}: the same twice", script.display());
        let golden = script.with_extension("insns");
        if update {
            std::fs::write(&golden, &listing).expect("write the golden listing");
            continue;
        }
        let expected = std::fs::read_to_string(&golden)
            .unwrap_or_else(|_| panic!("{} is missing: run with {UPDATE_VAR}=1", golden.display()));
        if listing != expected {
            differ.push(format!("{}:\n{}", script.display(), first_difference(&expected, &listing)));
        }
    }
    let _ = std::fs::remove_file(&tracer);
    assert!(
        differ.is_empty(),
        "emitted programs changed (accept with {UPDATE_VAR}=1 and review `git diff tests/golden`):\n{}",
        differ.join("\n")
    );
}

/// The first line that differs, with its neighbours.
fn first_difference(expected: &str, actual: &str) -> String {
    let (expected, actual): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let at =
        expected.iter().zip(&actual).position(|(e, a)| e != a).unwrap_or(expected.len().min(actual.len()));
    let from = at.saturating_sub(2);
    let show = |lines: &[&str]| {
        lines.iter().skip(from).take(5).map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
    };
    format!("  line {}\n  expected:\n{}\n  emitted:\n{}", at + 1, show(&expected), show(&actual))
}

/// A feature table naming a feature that does not exist is refused, with the names that do.
#[test]
fn an_unknown_feature_in_the_given_table_is_refused_by_name() {
    let output = Command::new(common::BIN)
        .args(["--dry-run", "-e", "BEGIN { exit(); }"])
        .env("STEADYTRACE_KERNEL_FEATURES", "ringbuf,bogus")
        .output()
        .expect("run the tracer");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("STEADYTRACE_KERNEL_FEATURES: no kernel feature `bogus` (known: ringbuf,"),
        "{stderr}"
    );
}
