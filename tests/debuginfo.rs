//! `--debuginfo DIR[:DIR]`: a C program built here with -g, its DWARF split into a separate debug file
//! (`objcopy --only-keep-debug`, `strip -g`, `--add-gnu-debuglink`) that is moved away from the binary. A
//! source-line uprobe, which needs the DWARF line table, is refused without `--debuginfo` and counts the
//! line's runs exactly with it: the debug file found by build id (`DIR/.build-id/xx/rest.debug`) and by the
//! debuglink's name (`DIR/<the binary's directory>/NAME`, `DIR/NAME`); and a binary stripped of all symbols has
//! its functions (uprobes) and frames (`ustack`) named from the debug file there.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

/// `split N` calls `work` N times.
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
\tfor (int i = 0; i < atoi(argv[1]); i++)
\t\twork(i);
\treturn 0;
}
";

/// The line (from 1) holding `marker`.
fn line_of(marker: &str) -> usize {
    SOURCE.lines().position(|line| line.contains(marker)).unwrap() + 1
}

fn tool(test: &str, program: &str, args: &[&str], dir: &Path) -> Option<String> {
    match Command::new(program).current_dir(dir).args(args).output() {
        Ok(done) if done.status.success() => Some(stdout(&done)),
        Ok(done) => panic!("{program} {args:?} failed: {}", stderr(&done)),
        Err(error) => {
            skip(test, &format!("needs {program}: {error}"));
            None
        }
    }
}

/// `dir/bin/split`, built with -g, its debug information split into `dir/split.debug` (not beside the
/// binary, where it would be found without `--debuginfo`), and the binary's build id in hex.
fn build(test: &str, dir: &Path) -> Option<(PathBuf, String)> {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("split.c"), SOURCE).unwrap();
    tool(test, "cc", &["-g", "-O0", "-Wl,--build-id", "-o", "split", "split.c"], &bin)?;
    tool(test, "objcopy", &["--only-keep-debug", "split", "split.debug"], &bin)?;
    tool(test, "strip", &["-g", "split"], &bin)?;
    tool(test, "objcopy", &["--add-gnu-debuglink=split.debug", "split"], &bin)?;
    std::fs::rename(bin.join("split.debug"), dir.join("split.debug")).unwrap();
    let notes = tool(test, "readelf", &["-n", "split"], &bin)?;
    let build_id = notes.lines().find_map(|line| line.trim().strip_prefix("Build ID: ")).unwrap().to_string();
    Some((bin.join("split"), build_id))
}

/// Runs the script counting the calls to `work` through its first line, with `extra` arguments.
fn count_calls(binary: &Path, extra: &[&str]) -> std::process::Output {
    let b = binary.display();
    let script = format!(r#"uprobe:{b}@split.c:{} {{ @calls = count(); }}"#, line_of("once per call"));
    let command = format!("{b} 5");
    let mut args = extra.to_vec();
    args.extend(["-q", "-e", &script, "-c", &command]);
    run_with(&args, LIMIT)
}

#[test]
fn a_split_debug_file_is_found_in_the_debuginfo_directories() {
    let test = "a_split_debug_file_is_found_in_the_debuginfo_directories";
    if !can_trace(test) {
        return;
    }
    let dir = PathBuf::from(format!("/tmp/steadytrace-debuginfo-{}", std::process::id()));
    let Some((binary, build_id)) = build(test, &dir) else { return };
    let debug = dir.join("split.debug");

    // Nowhere to be found: a clear refusal.
    let refused = count_calls(&binary, &[]);
    assert!(!refused.status.success(), "{}", stdout(&refused));
    let error = stderr(&refused);
    assert!(error.contains("has no DWARF line table") && error.contains("--debuginfo"), "{error}");

    // The debug file where each kind of lookup finds it, one directory among others (`:`-separated).
    let by_build_id = dir.join("by-build-id");
    let by_id_path =
        by_build_id.join(".build-id").join(&build_id[..2]).join(format!("{}.debug", &build_id[2..]));
    let by_path = dir.join("by-path");
    let real_dir = binary.parent().unwrap().canonicalize().unwrap();
    let by_path_file = by_path.join(real_dir.strip_prefix("/").unwrap()).join("split.debug");
    let by_name = dir.join("by-name");
    for (root, place) in
        [(&by_build_id, &by_id_path), (&by_path, &by_path_file), (&by_name, &by_name.join("split.debug"))]
    {
        std::fs::create_dir_all(place.parent().unwrap()).unwrap();
        std::fs::copy(&debug, place).unwrap();
        let dirs = format!("/nonexistent:{}", root.display());
        let output = count_calls(&binary, &["--debuginfo", &dirs]);
        assert!(output.status.success(), "{}: {}", place.display(), stderr(&output));
        assert_eq!(stdout(&output).trim(), "@calls: 5", "{}", place.display());
        std::fs::remove_file(place).unwrap();
    }

    // A debug file of another build is not taken by its debuglink name.
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("split.c"), SOURCE.replace("* 2", "* 3")).unwrap();
    tool(test, "cc", &["-g", "-O0", "-Wl,--build-id", "-o", "split", "split.c"], &other).unwrap();
    tool(test, "objcopy", &["--only-keep-debug", "split", "split.debug"], &other).unwrap();
    let output = count_calls(&binary, &["--debuginfo", &other.display().to_string()]);
    assert!(stderr(&output).contains("has no DWARF line table"), "{}", stderr(&output));

    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_fully_stripped_binary_has_its_functions_and_frames_from_the_debug_file() {
    let test = "a_fully_stripped_binary_has_its_functions_and_frames_from_the_debug_file";
    if !can_trace(test) {
        return;
    }
    let dir = PathBuf::from(format!("/tmp/steadytrace-debuginfo-stripped-{}", std::process::id()));
    let Some((binary, _)) = build(test, &dir) else { return };
    // No symbol table left at all: `work` is known only from the debug file.
    tool(test, "strip", &["--strip-all", "split"], binary.parent().unwrap()).unwrap();
    let b = binary.display();
    let script = format!("uprobe:{b}:work {{ @[ustack(2)] = count(); }}");
    let command = format!("{b} 4");
    let missing = run_with(&["-q", "-e", &script, "-c", &command], LIMIT);
    assert!(stderr(&missing).contains("has no function `work`"), "{}", stderr(&missing));
    let dirs = dir.display().to_string();
    let found = run_with(&["--debuginfo", &dirs, "-q", "-e", &script, "-c", &command], LIMIT);
    assert!(found.status.success(), "{}", stderr(&found));
    let out = stdout(&found);
    let frames: Vec<&str> = out.lines().map(str::trim).filter(|line| !line.is_empty()).collect();
    assert_eq!(frames.len(), 4, "{out}");
    assert!(frames[1] == "work+0" && frames[2].starts_with("main+") && frames[3] == "]: 4", "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}
