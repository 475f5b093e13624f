//! USDT probes on a small C program built here with `cc` and `<sys/sdt.h>` (apt: systemtap-sdt-dev).

mod common;

use common::*;
use std::path::PathBuf;
use std::sync::OnceLock;

/// tests/usdt/app.c (with guarded.c) built into the target directory; `Err` says why it cannot be (no `cc`, no
/// `<sys/sdt.h>`). Any other compile failure fails the test. Built once: the tests run in parallel.
fn app() -> Result<PathBuf, String> {
    static APP: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    APP.get_or_init(build_app).clone()
}

/// A compile error other than a missing `<sys/sdt.h>` fails the test (no `cc`, or no header: skipped).
fn build_app() -> Result<PathBuf, String> {
    match common::usdt_app(false, "usdt-app") {
        Err(why) if !why.contains("sys/sdt.h") && !why.contains("cannot run the C compiler") => {
            panic!("cc failed: {why}")
        }
        built => built,
    }
}

#[test]
fn usdt_probes_fire_as_often_as_the_program_reaches_them() {
    if !can_trace("usdt_probes_fire_as_often_as_the_program_reaches_them") {
        return;
    }
    let app = match app() {
        Ok(app) => app.to_string_lossy().into_owned(),
        Err(why) => return skip("usdt_probes_fire_as_often_as_the_program_reaches_them", &why),
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
        Err(why) => return skip("usdt_probes_are_listed", &why),
    };
    let output = tracer(&["-l", &format!("usdt:{app}:*")]).output().unwrap();
    assert_eq!(
        stdout(&output),
        format!(
            "usdt:{app}:app:constant\nusdt:{app}:app:done\nusdt:{app}:app:guarded\nusdt:{app}:app:tick\n"
        ),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_missing_usdt_probe_is_skipped() {
    if !can_trace("a_missing_usdt_probe_is_skipped") {
        return;
    }
    let app = match app() {
        Ok(app) => app.to_string_lossy().into_owned(),
        Err(why) => return skip("a_missing_usdt_probe_is_skipped", &why),
    };
    let script = format!("usdt:{app}:app:nope {{ }} usdt:{app}:app:tick {{ @ = count(); }}");
    let output = tracer(&["-q", "-e", &script, "-c", &format!("{app} 2")]).output().unwrap();
    assert_eq!(stdout(&output), "\n\n@: 2\n", "{}", stderr(&output));
    assert!(stderr(&output).contains("has no USDT probe `app:nope`: skipped"), "{}", stderr(&output));
}

#[test]
fn usdt_arguments_have_their_values_sizes_and_signs() {
    if !can_trace("usdt_arguments_have_their_values_sizes_and_signs") {
        return;
    }
    let app = match app() {
        Ok(app) => app.to_string_lossy().into_owned(),
        Err(why) => return skip("usdt_arguments_have_their_values_sizes_and_signs", &why),
    };
    // tick: i in a register, the running total on the stack, -3 * i, (signed char)(-i - 1) and
    // (unsigned short)(60000 + i); constant: 5 and -7 as the compiler's constants.
    let script = format!(
        r#"usdt:{app}:app:tick {{ printf("%d %d %d %d %d\n", arg0, arg1, arg2, arg3, arg4); }}
           usdt:{app}:app:constant {{ @[arg0, arg1] = count(); }}"#
    );
    let output = tracer(&["-q", "-e", &script, "-c", &format!("{app} 3")]).output().unwrap();
    assert_eq!(
        stdout(&output),
        "0 0 0 -1 60000\n1 1 -3 -2 60001\n2 3 -6 -3 60002\n\n\n@[5, -7]: 3\n",
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_usdt_probe_behind_a_semaphore_fires_while_traced() {
    if !can_trace("a_usdt_probe_behind_a_semaphore_fires_while_traced") {
        return;
    }
    let app = match app() {
        Ok(app) => app.to_string_lossy().into_owned(),
        Err(why) => return skip("a_usdt_probe_behind_a_semaphore_fires_while_traced", &why),
    };
    // The program counts how often it found the semaphore up and passes that to app:done.
    let script = format!(
        r#"usdt:{app}:app:guarded {{ @sum = sum(arg0); }} usdt:{app}:app:done {{ printf("enabled %d\n", arg0); }}"#
    );
    let output = tracer(&["-q", "-e", &script, "-c", &format!("{app} 3")]).output().unwrap();
    assert_eq!(stdout(&output), "enabled 3\n\n\n@sum: 30\n", "{}", stderr(&output));
}
