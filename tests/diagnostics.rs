//! Error messages for bad scripts, checked verbatim: every `tests/errors/NAME.bt` is compiled with
//! `--dry-run` (no kernel, no root needed) and must fail with exactly `NAME.err` on stderr — the
//! `file:line:col`, the line, the offending text underlined and what to do instead — and no panic.

mod common;

use std::fs;
use std::path::Path;

#[test]
fn bad_scripts_get_clear_errors() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/errors");
    let mut scripts: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "bt"))
        .collect();
    scripts.sort();
    assert!(scripts.len() >= 20, "only {} bad scripts", scripts.len());
    let mut failures = vec![];
    for script in &scripts {
        let name = script.file_name().unwrap().to_str().unwrap();
        let expected =
            fs::read_to_string(script.with_extension("err")).unwrap_or_else(|_| panic!("{name} has no .err"));
        // Run from the directory so that messages name the file as `NAME.bt`.
        let output = common::tracer(&["--dry-run", name]).current_dir(&dir).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        if output.status.code() != Some(1) || !output.stdout.is_empty() || stderr != expected {
            failures.push(format!(
                "==== {name}: exit {:?}\n--- expected stderr:\n{expected}--- actual stderr:\n{stderr}",
                output.status.code()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} bad scripts:\n{}",
        failures.len(),
        scripts.len(),
        failures.join("\n")
    );
}
