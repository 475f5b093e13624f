//! `--fmt` (`--mode format`): scripts printed as bpftrace 0.27.1's formatter prints them. (1) steadytrace's
//! own scripts `tests/golden/fmt/NAME.bt`, each against `NAME.expected`, which bpftrace 0.27.1 printed
//! (`chroot /var/cache/steadytrace/sid-bpftrace bpftrace --fmt NAME.bt`); (2) side by side with 0.27.1 run
//! now, on every tool of bpftrace's source (`../shared/upstream/bpftrace/tools`, read at test time). No root,
//! no kernel.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Debian sid's root with bpftrace 0.27.1 in it.
const BPFTRACE_ROOT: &str = "/var/cache/steadytrace/sid-bpftrace";

fn steadytrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_steadytrace")).args(args).output().expect("run steadytrace")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn own_scripts_format_as_bpftrace_formats_them() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/fmt");
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/golden/fmt")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "bt"))
        .collect();
    scripts.sort();
    assert!(scripts.len() >= 4, "{scripts:?}");
    for script in scripts {
        let want = std::fs::read_to_string(script.with_extension("expected")).expect("NAME.expected");
        for flags in [&["--fmt"][..], &["--mode", "format"][..]] {
            let output = steadytrace(&[flags, &[script.to_str().expect("utf-8")]].concat());
            assert_eq!(output.status.code(), Some(0), "{}: {}", script.display(), text(&output.stderr));
            assert_eq!(text(&output.stdout), want, "{} {flags:?}", script.display());
        }
    }
}

#[test]
fn a_script_that_does_not_parse_is_an_error() {
    let output = steadytrace(&["--fmt", "-e", "BEGIN { $x = ; }"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(text(&output.stdout), "");
    assert!(text(&output.stderr).starts_with("stdin:1:14: ERROR: "), "{}", text(&output.stderr));
}

/// Every `.bt` file under `dir`, subdirectories included.
fn tools(dir: &Path, out: &mut Vec<PathBuf>) {
    for path in std::fs::read_dir(dir).expect("read tools").flatten().map(|e| e.path()) {
        if path.is_dir() {
            tools(&path, out);
        } else if path.extension().is_some_and(|e| e == "bt") {
            out.push(path);
        }
    }
}

#[test]
fn bpftraces_tools_format_as_bpftrace_0_27_1_formats_them() {
    const TEST: &str = "bpftraces_tools_format_as_bpftrace_0_27_1_formats_them";
    let upstream = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/upstream/bpftrace/tools");
    if !upstream.is_dir() {
        return common::skip(TEST, &format!("no bpftrace source at {}", upstream.display()));
    }
    let root = Path::new(BPFTRACE_ROOT);
    if !root.join("usr/bin/bpftrace").exists() {
        return common::skip(TEST, &format!("no bpftrace 0.27.1 in {BPFTRACE_ROOT}"));
    }
    let mut scripts = vec![];
    tools(&upstream, &mut scripts);
    scripts.sort();
    let inside = format!("tmp/steadytrace-fmt-{}.bt", std::process::id());
    let mut different = vec![];
    for script in &scripts {
        std::fs::copy(script, root.join(&inside)).expect("copy into the bpftrace root");
        let theirs = Command::new("chroot")
            .args([BPFTRACE_ROOT, "bpftrace", "--fmt", &format!("/{inside}")])
            .output()
            .expect("run bpftrace");
        if !theirs.status.success() && theirs.stderr.windows(8).any(|w| w == b"chroot: ") {
            let _ = std::fs::remove_file(root.join(&inside));
            return common::skip(
                TEST,
                &format!("cannot chroot into {BPFTRACE_ROOT}: {}", text(&theirs.stderr)),
            );
        }
        let ours = steadytrace(&["--fmt", script.to_str().expect("utf-8")]);
        if (ours.status.code(), &ours.stdout) != (theirs.status.code(), &theirs.stdout) {
            different.push(format!(
                "{}: bpftrace {:?}, steadytrace {:?}\n{}",
                script.display(),
                theirs.status.code(),
                ours.status.code(),
                text(&ours.stderr)
            ));
        }
    }
    let _ = std::fs::remove_file(root.join(&inside));
    println!("{} of {} tools formatted identically", scripts.len() - different.len(), scripts.len());
    assert!(different.is_empty(), "formatted differently:\n{}", different.join("\n"));
}
