//! Source-line uprobes, `uprobe:BINARY@FILE:LINE[:COLUMN]`: a C program built here with -g, a line run a
//! known number of times counted exactly, `probe` and `func` as bpftrace 0.27.1 gives them (compared with
//! 0.27.1 itself when its chroot is on the machine), and the refusals: a line without code, a file the
//! binary was not built from, a binary without -g, a uretprobe.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

/// Where bpftrace 0.27.1 runs (docs: /work/shared/FACTS.md); compared with only when it is there.
const BPFTRACE_CHROOT: &str = "/var/cache/steadytrace/sid-bpftrace";

/// `srcline N` calls `work` N times; the `for` line's code starts once, its condition runs N + 1 times.
const SOURCE: &str = "#include <stdlib.h>

static volatile int total;

__attribute__((noinline)) int work(int i)
{
\tint x = i * 2; /* once per call */
\ttotal += x;

\treturn x;
}

int main(int argc, char **argv)
{
\tint n = atoi(argv[1]);

\tfor (int i = 0; i < n; i++) /* the loop */
\t\twork(i);
\treturn 0;
}
";

/// The line (from 1) holding `marker`.
fn line_of(marker: &str) -> usize {
    SOURCE.lines().position(|line| line.contains(marker)).unwrap() + 1
}

/// The program built with `-g` (`srcline`) and without (`srcline-nodebug`) in `dir`; `None` (and a skip)
/// without a C compiler.
fn build(test: &str, dir: &Path) -> Option<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("srcline.c"), SOURCE).unwrap();
    for (binary, flags) in [("srcline", &["-g", "-O0"][..]), ("srcline-nodebug", &["-O0"][..])] {
        // Compiled inside `dir` as `srcline.c`: the unit's name is relative, its directory absolute.
        match Command::new("cc").current_dir(dir).args(flags).args(["-o", binary, "srcline.c"]).output() {
            Ok(built) if built.status.success() => {}
            Ok(built) => panic!("cc failed: {}", stderr(&built)),
            Err(error) => {
                skip(test, &format!("needs a C compiler (cc): {error}"));
                return None;
            }
        }
    }
    Some(dir.join("srcline"))
}

/// A directory of this test under /tmp: the same path inside bpftrace's chroot gives the same `probe` text.
fn scratch(test: &str) -> PathBuf {
    PathBuf::from(format!("/tmp/steadytrace-{test}-{}", std::process::id()))
}

#[test]
fn a_source_line_fires_each_time_its_code_runs() {
    let test = "a_source_line_fires_each_time_its_code_runs";
    if !can_trace(test) {
        return;
    }
    let dir = scratch(test);
    let Some(binary) = build(test, &dir) else { return };
    let b = binary.display();
    let once = line_of("once per call");
    let the_loop = line_of("the loop");
    // Column of the condition `i < n` (a tab is one column, as gcc counts).
    let condition = SOURCE.lines().nth(the_loop - 1).unwrap().find('<').unwrap() + 1;
    let script = format!(
        r#"uprobe:{b}@srcline.c:{once} {{ printf("%s %s\n", probe, func); }}
           uprobe:{b}@{dir}/srcline.c:{the_loop} {{ printf("loop %s\n", func); }}
           uprobe:{b}@srcline.c:{the_loop}:{condition} {{ printf("condition %s\n", func); }}"#,
        dir = dir.display()
    );
    let command = format!("{b} 7");
    let output = run_with(&["-q", "-e", &script, "-c", &command], LIMIT);
    let out = stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines: Vec<&str> = out.lines().collect();
    // The loop's start once before the calls, its condition before each call and once more at the end.
    assert_eq!(lines.first(), Some(&"loop main"), "{out}");
    assert_eq!(lines.iter().filter(|line| **line == "condition main").count(), 8, "{out}");
    let hits: Vec<&&str> = lines.iter().filter(|line| line.starts_with("uprobe:")).collect();
    assert_eq!(hits.len(), 7, "{out}");
    // `probe` names the line's address in decimal, `func` the function holding it.
    let (probe, func) = hits[0].split_once(' ').unwrap();
    let address = probe.strip_prefix(&format!("uprobe:{b}:")).unwrap();
    assert!(address.parse::<u64>().is_ok() && func == "work", "{out}");
    assert!(hits.iter().all(|hit| hit == &hits[0]), "{out}");

    // bpftrace 0.27.1 on the same binary: the same hits and the same `probe` text.
    if Path::new(BPFTRACE_CHROOT).join("usr/bin/bpftrace").is_file() {
        let inside = Path::new(BPFTRACE_CHROOT).join(dir.strip_prefix("/").unwrap());
        std::fs::create_dir_all(&inside).unwrap();
        std::fs::copy(&binary, inside.join("srcline")).unwrap();
        let script = format!(r#"uprobe:{b}@srcline.c:{once} {{ printf("%s\n", probe); }}"#);
        let theirs = Command::new("chroot")
            .arg(BPFTRACE_CHROOT)
            .args(["bpftrace", "-q", "-e", &script, "-c", &command])
            .output()
            .unwrap();
        std::fs::remove_dir_all(&inside).unwrap();
        let ours = run_with(&["-q", "-e", &script, "-c", &command], LIMIT);
        assert_eq!(stdout(&ours), stdout(&theirs), "{}", stderr(&theirs));
        assert_eq!(stdout(&ours).lines().filter(|line| line == &probe).count(), 7);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn lines_without_code_other_files_and_binaries_without_debug_info_are_refused() {
    let test = "lines_without_code_other_files_and_binaries_without_debug_info_are_refused";
    let dir = scratch(test);
    let Some(binary) = build(test, &dir) else { return };
    let b = binary.display();
    let refusal = |probe: &str| {
        let output = run_with(&["--dry-run", "-e", &format!("{probe} {{ }}")], LIMIT);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        stderr(&output)
    };
    let once = line_of("once per call");
    let blank = line_of("return x") - 1;
    let err = refusal(&format!("uprobe:{b}@srcline.c:{blank}"));
    assert!(
        err.starts_with(&format!(
            "stdin:1:1: ERROR: line {blank} of srcline.c in {b} has no code; the nearest lines with code: {}, {}",
            blank - 1,
            blank + 1
        )),
        "{err}"
    );
    // A file is named by its whole path or its last components, not by the end of a name.
    for file in ["other.c", "line.c", "./srcline.c"] {
        let err = refusal(&format!("uprobe:{b}@{file}:{once}"));
        assert!(err.contains(&format!("{b} was not compiled from a source file `{file}`")), "{err}");
    }
    let err = refusal(&format!("uprobe:{b}-nodebug@srcline.c:{once}"));
    assert!(
        err.contains("has no DWARF line table, so its source lines cannot be found: build it with -g"),
        "{err}"
    );
    let err = refusal(&format!("uretprobe:{b}@srcline.c:{once}"));
    assert!(err.contains("a uretprobe cannot be on a source line"), "{err}");
    let err = refusal(&format!("uprobe:{b}@srcline.c:x"));
    assert!(err.contains("`x` is not a line number"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
