//! USDT probes on a small C program built here with `cc` and `<sys/sdt.h>` (apt: systemtap-sdt-dev).

mod common;

use common::*;
use std::path::PathBuf;
use std::process::Command;

/// tests/usdt/app.c built into the target directory; `Err` says why it cannot be (no `cc`, no
/// `<sys/sdt.h>`). Any other compile failure fails the test.
fn app() -> Result<PathBuf, String> {
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/usdt/app.c");
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("usdt-app");
    let output = Command::new("cc")
        .arg("-O1")
        .arg("-o")
        .arg(&out)
        .arg(&source)
        .output()
        .map_err(|e| format!("cannot run cc: {e}"))?;
    let errors = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() && errors.contains("sys/sdt.h") {
        return Err("no <sys/sdt.h> (apt-get install systemtap-sdt-dev)".into());
    }
    assert!(output.status.success(), "cc failed: {errors}");
    Ok(out)
}

#[test]
fn usdt_probes_fire_as_often_as_the_program_reaches_them() {
    if !can_trace("usdt_probes_fire_as_often_as_the_program_reaches_them") {
        return;
    }
    let app = match app() {
        Ok(app) => app.to_string_lossy().into_owned(),
        Err(why) => return println!("SKIPPED: {why}"),
    };
    let script = format!(
        r#"usdt:{app}:app:tick {{ @ticks = count(); }} usdt:{app}:done {{ printf("%s\n", probe); }}"#
    );
    let output = tracer(&["-q", "-e", &script, "-c", &format!("{app} 5")]).output().unwrap();
    assert_eq!(stdout(&output), format!("usdt:{app}:app:done\n\n\n@ticks: 5\n"), "{}", stderr(&output));
}

#[test]
fn usdt_probes_are_listed() {
    let app = match app() {
        Ok(app) => app.to_string_lossy().into_owned(),
        Err(why) => return println!("SKIPPED: {why}"),
    };
    let output = tracer(&["-l", &format!("usdt:{app}:*")]).output().unwrap();
    assert_eq!(stdout(&output), format!("usdt:{app}:app:done\nusdt:{app}:app:tick\n"), "{}", stderr(&output));
}

#[test]
fn a_missing_usdt_probe_is_skipped() {
    if !can_trace("a_missing_usdt_probe_is_skipped") {
        return;
    }
    let app = match app() {
        Ok(app) => app.to_string_lossy().into_owned(),
        Err(why) => return println!("SKIPPED: {why}"),
    };
    let script = format!("usdt:{app}:app:nope {{ }} usdt:{app}:app:tick {{ @ = count(); }}");
    let output = tracer(&["-q", "-e", &script, "-c", &format!("{app} 2")]).output().unwrap();
    assert_eq!(stdout(&output), "\n\n@: 2\n", "{}", stderr(&output));
    assert!(stderr(&output).contains("has no USDT probe `app:nope`: skipped"), "{}", stderr(&output));
}
