//! The language corpus: every `tests/scripts/NAME.bt` runs through steadytrace with `-q`, and its stdout must
//! equal `NAME.out` byte for byte and its exit status the number in `NAME.code` (0 when there is none);
//! `NAME.args` holds positional parameters for the script, one a line. When
//! `NAME.json.out` exists the script runs a second time with `-q -f json` against it (the case `NAME.json`).
//! The expected files are what bpftrace 0.17 prints (see tests/scripts/README.md), except where
//! `NAME.steadytrace.out` (`NAME.steadytrace.json.out` for JSON) exists: a deliberate difference from bpftrace
//! 0.17, explained in docs/LANGUAGE.md.
//!
//! `STEADYTRACE_CASES=fragment` runs only the cases whose name contains the fragment, e.g.
//! `STEADYTRACE_CASES=hist cargo test --test language -- --nocapture`.

mod common;

use std::fmt::Write as _;
use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Cases running at the same time.
const PARALLEL: usize = 2;
/// How long one case may run before it is killed and fails.
const LIMIT: Duration = Duration::from_secs(20);

struct Case {
    name: String,
    script: PathBuf,
    json: bool,
    expected: Vec<u8>,
    code: i32,
    /// The positional parameters given after the script (`NAME.args`, one a line).
    params: Vec<String>,
}

/// The cases in `dir` whose name contains `filter`, in name order.
fn cases(dir: &Path, filter: &str) -> Vec<Case> {
    let mut scripts: Vec<PathBuf> = fs::read_dir(dir)
        .expect("tests/scripts")
        .map(|entry| entry.expect("tests/scripts entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "bt"))
        .collect();
    scripts.sort();
    let mut cases = Vec::new();
    for script in scripts {
        let stem = script.file_stem().unwrap().to_str().unwrap().to_string();
        let code = match fs::read_to_string(dir.join(format!("{stem}.code"))) {
            Ok(text) => text.trim().parse().unwrap_or_else(|_| panic!("{stem}.code does not hold a number")),
            Err(_) => 0,
        };
        let params: Vec<String> = fs::read_to_string(dir.join(format!("{stem}.args")))
            .map(|text| text.lines().map(str::to_string).collect())
            .unwrap_or_default();
        let text = fs::read(dir.join(format!("{stem}.steadytrace.out")))
            .or_else(|_| fs::read(dir.join(format!("{stem}.out"))));
        assert!(text.is_ok(), "{stem}.bt has no {stem}.out");
        for (name, json, text) in [
            (stem.clone(), false, text),
            (
                format!("{stem}.json"),
                true,
                fs::read(dir.join(format!("{stem}.steadytrace.json.out")))
                    .or_else(|_| fs::read(dir.join(format!("{stem}.json.out")))),
            ),
        ] {
            let Ok(mut expected) = text else { continue };
            if json && expected.starts_with(br#"{"type": "attached_probes""#) {
                // bpftrace prints this line unless -q, and the cases run with -q.
                let end = expected.iter().position(|&b| b == b'\n').map_or(expected.len(), |i| i + 1);
                expected.drain(..end);
            }
            if json {
                // bpftrace 0.17 printed an empty line pair before the maps at exit in JSON too; current bpftrace,
                // and steadytrace, print none (a JSON record is never an empty line).
                expected = expected
                    .split_inclusive(|&b| b == b'\n')
                    .filter(|l| *l != b"\n")
                    .flatten()
                    .copied()
                    .collect();
            }
            if name.contains(filter) {
                cases.push(Case {
                    name,
                    script: script.clone(),
                    json,
                    expected,
                    code,
                    params: params.clone(),
                });
            }
        }
    }
    cases
}

/// Runs one case: `Err` holds what went wrong, for the report.
fn run(case: &Case) -> Result<(), String> {
    let mut args = vec!["-q"];
    if case.json {
        args.extend(["-f", "json"]);
    }
    args.push(case.script.to_str().unwrap());
    args.extend(case.params.iter().map(String::as_str));
    let child = common::Reaped::spawn(common::tracer(&args).stdout(Stdio::piped()).stderr(Stdio::piped()))
        .map_err(|e| format!("cannot start the tracer: {e}"))?;
    // wait_output kills the tracer and panics past LIMIT: that fails this case only.
    let output =
        panic::catch_unwind(AssertUnwindSafe(|| common::wait_output(child, LIMIT))).map_err(|p| {
            p.downcast_ref::<String>().cloned().unwrap_or_else(|| "the tracer could not be waited for".into())
        })?;
    let code = output.status.code();
    if output.stdout == case.expected && code == Some(case.code) {
        return Ok(());
    }
    let mut report = String::new();
    if code != Some(case.code) {
        let status = code.map_or("killed by a signal".to_string(), |c| format!("exit code {c}"));
        writeln!(report, "{status}, expected exit code {}", case.code).unwrap();
    }
    if output.stdout != case.expected {
        let expected = String::from_utf8_lossy(&case.expected);
        let actual = String::from_utf8_lossy(&output.stdout);
        writeln!(report, "stdout (- expected, + actual):\n{}", diff(&expected, &actual)).unwrap();
    }
    write!(report, "stderr:\n{}", String::from_utf8_lossy(&output.stderr)).unwrap();
    Err(report)
}

/// A line diff of two texts (longest common subsequence): `  ` common, `- ` only expected, `+ ` only actual;
/// a last line without its newline is marked.
fn diff(expected: &str, actual: &str) -> String {
    let a: Vec<&str> = expected.split_inclusive('\n').take(1000).collect();
    let b: Vec<&str> = actual.split_inclusive('\n').take(1000).collect();
    // common[i][j]: length of the longest common subsequence of a[i..] and b[j..].
    let mut common = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            common[i][j] =
                if a[i] == b[j] { common[i + 1][j + 1] + 1 } else { common[i + 1][j].max(common[i][j + 1]) };
        }
    }
    let show = |line: &str| match line.strip_suffix('\n') {
        Some(line) => line.to_string(),
        None => format!("{line}(no newline at end)"),
    };
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            writeln!(out, "  {}", show(a[i])).unwrap();
            (i, j) = (i + 1, j + 1);
        } else if j < b.len() && (i == a.len() || common[i][j + 1] >= common[i + 1][j]) {
            writeln!(out, "+ {}", show(b[j])).unwrap();
            j += 1;
        } else {
            writeln!(out, "- {}", show(a[i])).unwrap();
            i += 1;
        }
    }
    out
}

#[test]
fn scripts_print_what_bpftrace_prints() {
    if !common::can_trace("scripts_print_what_bpftrace_prints") {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scripts");
    let filter = std::env::var("STEADYTRACE_CASES").unwrap_or_default();
    let cases = cases(&dir, &filter);
    assert!(!cases.is_empty(), "no case name contains STEADYTRACE_CASES={filter:?}");

    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..PARALLEL {
            scope.spawn(|| {
                while let Some(case) = cases.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let mut result = run(case);
                    // The tracer says when its timer thread woke up too late to fire a period (a loaded
                    // machine: the suite runs PARALLEL cases at once): an interval count is then short by
                    // design, so the case runs once more.
                    if result
                        .as_ref()
                        .is_err_and(|report| report.contains("skipped (the timer thread woke up"))
                    {
                        result = run(case);
                    }
                    results.lock().unwrap().push((case.name.as_str(), result));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(name, _)| *name);

    let failed: Vec<_> = results.iter().filter_map(|(name, r)| Some((name, r.as_ref().err()?))).collect();
    for (name, result) in &results {
        println!("{} {name}", if result.is_ok() { "pass" } else { "FAIL" });
    }
    println!("{} passed, {} failed, of {} cases", results.len() - failed.len(), failed.len(), results.len());
    for (name, report) in &failed {
        println!("\n==== {name}\n{report}");
    }
    assert!(failed.is_empty(), "{} of {} cases failed (reports above)", failed.len(), results.len());
}
