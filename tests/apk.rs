//! Uprobes into a library stored inside an Android APK (`uprobe:APK!/lib/ABI/libfoo.so:FN`): an APK made
//! here (a zip whose library is stored uncompressed at a page-aligned offset), run by a process that maps the
//! library straight from the APK with PROT_EXEC, as Android's loader does, and calls into it.

mod common;

use common::apk::{file_offset, zip, LIBRARY, RUNNER};
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

/// Where the library is inside the APK, as Android names its ABI directories.
fn entry() -> String {
    let abi = if cfg!(target_arch = "aarch64") { "arm64-v8a" } else { "x86_64" };
    format!("lib/{abi}/libfoo.so")
}

/// The library and the runner, built with the system's C compiler into `dir`.
fn build(test: &str, dir: &Path) -> Option<(Vec<u8>, PathBuf)> {
    std::fs::create_dir_all(dir).unwrap();
    let (source, library) = (dir.join("foo.c"), dir.join("libfoo.so"));
    let (runner_source, runner) = (dir.join("runner.c"), dir.join("runner"));
    std::fs::write(&source, LIBRARY).unwrap();
    std::fs::write(&runner_source, RUNNER).unwrap();
    let builds = [
        Command::new("cc").args(["-shared", "-fPIC", "-O1", "-o"]).arg(&library).arg(&source).output(),
        Command::new("cc").args(["-O1", "-o"]).arg(&runner).arg(&runner_source).output(),
    ];
    for built in builds {
        match built {
            Ok(built) if built.status.success() => {}
            Ok(built) => panic!("cc failed: {}", stderr(&built)),
            Err(error) => {
                skip(test, &format!("needs a C compiler (cc): {error}"));
                return None;
            }
        }
    }
    Some((std::fs::read(&library).unwrap(), runner))
}

/// Functions, a wildcard, a uretprobe, `reg("pc")` and `ustack` on the library of an APK that a process
/// runs from inside the APK: each hit counted exactly, its frames named as the library's functions.
#[test]
fn uprobes_fire_in_a_library_mapped_from_inside_an_apk() {
    let test = "uprobes_fire_in_a_library_mapped_from_inside_an_apk";
    if !can_trace(test) {
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(test);
    let Some((library, runner)) = build(test, &dir) else { return };
    let manifest = b"<manifest package=\"dev.steadytrace.apk\"/>".repeat(20);
    let apk_bytes = zip(&[("AndroidManifest.xml", &manifest, true), (&entry(), &library, false)], 4096);
    let apk = dir.join("base.apk");
    std::fs::write(&apk, &apk_bytes).unwrap();
    let start = apk_bytes.windows(library.len()).position(|w| w == library).unwrap();
    assert_eq!(start % 4096, 0);
    let lib = format!("{}!/{}", apk.display(), entry());
    let script = format!(
        r#"uprobe:{lib}:apk_* {{ @[func] = count(); }}
           uprobe:{lib}:apk_leaf {{ @pc[usym(reg("pc"))] = count(); @stack[ustack(1)] = count(); }}
           uretprobe:{lib}:apk_answer {{ @returned = sum(retval); }}"#
    );
    let command = format!(
        "{} {} {start} {} {} 5",
        runner.display(),
        apk.display(),
        library.len(),
        file_offset(&library, "apk_answer")
    );
    let output = run_with(&["-e", &script, "-c", &command], LIMIT);
    // apk_answer(i) = 3i + 5 for i in 0..5: 55 in all, as the runner prints it too.
    assert_eq!(
        stdout(&output),
        "55\n\n\n@[apk_answer]: 5\n@[apk_leaf]: 10\n@pc[apk_leaf]: 10\n@returned: 55\n@stack[\n    apk_leaf+0\n]: 10\n",
        "{}",
        stderr(&output)
    );
}

/// `-l` lists the library's functions under the `APK!/ENTRY` path.
#[test]
fn lists_the_functions_of_a_library_in_an_apk() {
    let test = "lists_the_functions_of_a_library_in_an_apk";
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(test);
    let Some((library, _)) = build(test, &dir) else { return };
    let apk = dir.join("base.apk");
    std::fs::write(&apk, zip(&[(&entry(), &library, false)], 4096)).unwrap();
    let lib = format!("{}!/{}", apk.display(), entry());
    let listed = tracer(&["-l", &format!("uprobe:{lib}:apk_*")]).output().unwrap();
    assert_eq!(
        stdout(&listed),
        format!("uprobe:{lib}:apk_answer\nuprobe:{lib}:apk_leaf\nuprobe:{lib}:apk_other\n"),
        "{}",
        stderr(&listed)
    );
}

/// A library the loader could not map from the APK (compressed, or not page-aligned), or no such entry: an
/// error at the attach point saying what to do.
#[test]
fn refuses_libraries_no_process_runs_from_the_apk() {
    let test = "refuses_libraries_no_process_runs_from_the_apk";
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(test);
    let Some((library, _)) = build(test, &dir) else { return };
    let cases = [
        ("compressed", zip(&[(&entry(), &library, true)], 4096), entry(), "is compressed in"),
        ("unaligned", zip(&[(&entry(), &library, false)], 1), entry(), "not on a 4096-byte page"),
        ("missing", zip(&[(&entry(), &library, false)], 4096), "lib/x86/libbar.so".into(), "has no entry"),
    ];
    for (name, bytes, entry, why) in cases {
        let apk = dir.join(format!("{name}.apk"));
        std::fs::write(&apk, bytes).unwrap();
        let point = format!("uprobe:{}!/{entry}:apk_answer", apk.display());
        let output = run_with(&["--dry-run", "-e", &format!("{point} {{ }}")], LIMIT);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{err}");
        assert!(err.starts_with("stdin:1:1: ERROR: ") && err.contains(why), "{name}: {err}");
        let underline = format!("\n{}\n", "^".repeat(point.len()));
        assert!(err.contains(&format!("\n{point} {{ }}\n")) && err.contains(&underline), "{name}: {err}");
    }
}
