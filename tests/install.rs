//! Getting steadytrace onto a machine: `steadytrace completions SHELL` (parsed by the shells, and bash's
//! and fish's actually completing), `steadytrace manpage` (rendered by man), `scripts/install PREFIX`, and
//! the tracer's own command line unchanged by those first-argument commands.

mod common;

use common::*;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// A fresh directory of its own for `test`, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("steadytrace-install-{test}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).expect("create a temporary directory");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn has(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run_with(args: &[&str]) -> Output {
    let child = Reaped::spawn(tracer(args).stdout(Stdio::piped()).stderr(Stdio::piped())).expect("spawn");
    wait_output(child, LIMIT)
}

fn completion_script(shell: &str) -> String {
    let output = run_with(&["completions", shell]);
    assert!(output.status.success(), "completions {shell}: {}", stderr(&output));
    stdout(&output)
}

/// A directory holding a script, another file and a subdirectory, for completing file names in.
fn scripts_dir(test: &str) -> TempDir {
    let dir = TempDir::new(test);
    fs::write(dir.0.join("trace.bt"), "BEGIN { exit(); }\n").unwrap();
    fs::write(dir.0.join("notes.txt"), "").unwrap();
    fs::create_dir(dir.0.join("sub")).unwrap();
    dir
}

#[test]
fn completion_scripts_parse_in_their_shells() {
    for (shell, program) in [("bash", "bash"), ("zsh", "zsh"), ("fish", "fish")] {
        if !has(program) {
            skip(
                "completion_scripts_parse_in_their_shells",
                &format!("{shell}: {program} is not installed (scripts/setup installs it)"),
            );
            continue;
        }
        let dir = TempDir::new(&format!("syntax-{shell}"));
        let file = dir.0.join("script");
        fs::write(&file, completion_script(shell)).unwrap();
        let output = Command::new(program).arg("-n").arg(&file).output().expect("run the shell");
        assert!(output.status.success(), "{program} -n rejects the script: {}", stderr(&output));
    }
}

/// The words bash's completion function offers for `words` (the last one being completed), run in `dir`.
fn bash_completes(script: &Path, dir: &Path, words: &[&str]) -> Vec<String> {
    let driver = r#"source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
function=$(complete -p steadytrace | sed -E 's/.*-F ([^ ]+).*/\1/')
"$function" steadytrace "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" 2>/dev/null
printf '%s\n' "${COMPREPLY[@]}""#;
    let output = Command::new("bash")
        .args(["-c", driver, "driver"])
        .arg(script)
        .args(words)
        .current_dir(dir)
        .output()
        .expect("run bash");
    assert!(output.status.success(), "bash: {}", stderr(&output));
    let mut offered: Vec<String> =
        stdout(&output).lines().filter(|l| !l.is_empty()).map(String::from).collect();
    offered.sort();
    offered
}

#[test]
fn bash_completes_options_their_values_scripts_and_commands() {
    if !has("bash") {
        skip("bash_completes_options_their_values_scripts_and_commands", "bash is not installed");
        return;
    }
    let dir = scripts_dir("bash");
    let script = dir.0.join("steadytrace.bash");
    fs::write(&script, completion_script("bash")).unwrap();
    let completes = |words: &[&str]| bash_completes(&script, &dir.0, words);
    assert_eq!(completes(&["steadytrace", "--for"]), ["--format"]);
    assert_eq!(completes(&["steadytrace", "-f", "j"]), ["json"]);
    assert_eq!(completes(&["steadytrace", "--interval-engine", ""]), ["perf", "timer"]);
    // The script FILE: *.bt files and directories, not other files; first, the commands too.
    assert_eq!(completes(&["steadytrace", ""]), ["bench", "completions", "manpage", "sub", "trace.bt"]);
    assert_eq!(completes(&["steadytrace", "-q", "tr"]), ["trace.bt"]);
    assert_eq!(completes(&["steadytrace", "comp"]), ["completions"]);
    assert_eq!(completes(&["steadytrace", "completions", ""]), ["bash", "fish", "zsh"]);
    // -o writes any file; -e's program is not completed.
    assert_eq!(completes(&["steadytrace", "-o", ""]), ["notes.txt", "steadytrace.bash", "sub", "trace.bt"]);
    assert_eq!(completes(&["steadytrace", "-e", ""]), Vec::<String>::new());
}

#[test]
fn fish_completes_scripts_and_shells() {
    if !has("fish") {
        skip("fish_completes_scripts_and_shells", "fish is not installed (scripts/setup installs it)");
        return;
    }
    let dir = scripts_dir("fish");
    let script = dir.0.join("steadytrace.fish");
    fs::write(&script, completion_script("fish")).unwrap();
    let completes = |line: &str| {
        let command = format!("source {}; complete -C '{line}'", script.display());
        let output =
            Command::new("fish").args(["-c", &command]).current_dir(&dir.0).output().expect("run fish");
        assert!(output.status.success(), "fish: {}", stderr(&output));
        let mut words: Vec<String> =
            stdout(&output).lines().map(|l| l.split('\t').next().unwrap_or("").to_string()).collect();
        words.sort();
        words
    };
    assert_eq!(completes("steadytrace --for"), ["--format"]);
    assert_eq!(completes("steadytrace completions "), ["bash", "fish", "zsh"]);
    let first = completes("steadytrace ");
    for word in ["trace.bt", "bench", "completions", "manpage"] {
        assert!(first.iter().any(|w| w == word), "{word} not offered: {first:?}");
    }
}

#[test]
fn man_renders_the_manual_page() {
    if !has("man") {
        skip("man_renders_the_manual_page", "man is not installed (scripts/setup installs man-db)");
        return;
    }
    let output = run_with(&["manpage"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let dir = TempDir::new("man");
    let page = dir.0.join("steadytrace.8");
    fs::write(&page, &output.stdout).unwrap();
    let rendered = Command::new("man")
        .args(["--warnings", "-l"])
        .arg(&page)
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100")
        .output();
    let rendered = rendered.expect("run man");
    assert!(rendered.status.success(), "man: {}", stderr(&rendered));
    assert_eq!(stderr(&rendered), "", "groff warned");
    let text = stdout(&rendered);
    assert!(text.starts_with("STEADYTRACE(8)"), "{text}");
    // Compared with every run of white space as one space: man justifies lines to its width.
    let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = words(&text);
    for needle in [
        "NAME\n       steadytrace - a bpftrace-language tracer",
        "SYNOPSIS\n       steadytrace [OPTIONS] FILE [PARAM...]",
        "-f, --format <FORMAT>",
        "EXAMPLES\n       steadytrace -e 'BEGIN { printf(\"hello\\n\"); exit(); }'",
        "STEADYTRACE_TRIGGER=uprobe",
        "BPFTRACE_MISSING_PROBES",
        "steadytrace completions bash|zsh|fish",
        "INSTALL.md",
    ] {
        assert!(text.contains(&words(needle)), "no {needle:?} in\n{text}");
    }
}

#[test]
fn install_puts_every_file_in_place_twice() {
    let dir = TempDir::new("prefix");
    let prefix = dir.0.join("usr");
    let install = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/install");
    let files = [
        ("bin/steadytrace", 0o755),
        ("share/man/man8/steadytrace.8", 0o644),
        ("share/bash-completion/completions/steadytrace", 0o644),
        ("share/zsh/site-functions/_steadytrace", 0o644),
        ("share/fish/vendor_completions.d/steadytrace.fish", 0o644),
    ];
    let mut listings = Vec::new();
    for _ in 0..2 {
        let output = Command::new(&install)
            .args(["--binary", BIN])
            .arg(&prefix)
            .output()
            .expect("run scripts/install");
        assert!(output.status.success(), "scripts/install: {}", stderr(&output));
        listings.push(stdout(&output));
        for (file, mode) in files {
            let path = prefix.join(file);
            let metadata = fs::metadata(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(metadata.permissions().mode() & 0o777, mode, "{}", path.display());
            assert!(listings.last().unwrap().contains(&format!("installed {}\n", path.display())));
        }
    }
    assert_eq!(listings[0], listings[1], "a second run does the same");
    let version = Command::new(prefix.join("bin/steadytrace")).arg("--version").output().expect("run it");
    assert_eq!(stdout(&version), format!("steadytrace {}\n", env!("CARGO_PKG_VERSION")));
    let page = fs::read(prefix.join("share/man/man8/steadytrace.8")).unwrap();
    assert_eq!(page, run_with(&["manpage"]).stdout, "the installed page is the binary's own");

    let refused = Command::new(&install).args(["one", "two"]).output().expect("run scripts/install");
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
}

#[test]
fn a_shell_that_is_not_known_is_a_clear_error() {
    for args in [&["completions"][..], &["completions", "tcsh"], &["completions", "bash", "zsh"]] {
        let output = run_with(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let said = stdout(&output) + &stderr(&output);
        assert!(said.contains("bash, zsh, fish") || said.contains("unexpected argument"), "{args:?}: {said}");
        assert!(!said.contains("internal error"), "{said}");
    }
    let output = run_with(&["manpage", "extra"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
}

/// The tracer's command line is what it was: a script file named like a command runs as `./NAME`,
/// and such a word after the first argument is the script's or the program's.
#[test]
fn scripts_and_programs_named_like_commands_still_run() {
    let dir = TempDir::new("named");
    let script = dir.0.join("completions");
    fs::write(&script, "BEGIN { printf(\"ran %s\\n\", str($1)); exit(); }\n").unwrap();
    let checked = run_with(&["--dry-run", script.to_str().unwrap(), "manpage"]);
    assert!(checked.status.success(), "{}", stderr(&checked));
    let checked = run_with(&["--dry-run", "-e", "BEGIN { exit(); }", "completions"]);
    assert!(checked.status.success(), "{}", stderr(&checked));
    if !can_trace("scripts_and_programs_named_like_commands_still_run") {
        return;
    }
    let output = Reaped::spawn(
        tracer(&["-q", "./completions", "bash"])
            .current_dir(&dir.0)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .expect("spawn");
    let output = wait_output(output, LIMIT);
    assert_eq!(stdout(&output).trim_end(), "ran bash", "{}", stderr(&output));
    let output = run_with(&["-q", "-e", "BEGIN { printf(\"%s\\n\", str($1)); exit(); }", "completions"]);
    assert_eq!(stdout(&output).trim_end(), "completions", "{}", stderr(&output));
}
