//! Uprobe wildcards: one uprobe_multi link for all the functions of a binary that a wildcard matches,
//! `func` naming the function that fired, and functions the kernel refuses skipped with one warning.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long a tracer of these tests may take.
const LIMIT: Duration = Duration::from_secs(30);

fn w() -> String {
    workload().to_string_lossy().into_owned()
}

/// `workload multi 4` calls workload_multi_one 4 times, _two 8 times and _three 12 times, each with
/// arguments 0..4.
const COUNTS: &str = "@[workload_multi_one]: 4\n@[workload_multi_two]: 8\n@[workload_multi_three]: 12\n";

fn script() -> String {
    format!(
        r#"uprobe:{w}:workload_multi_* {{ @[func] = count(); }}
           uretprobe:{w}:workload_multi_* {{ @returns[func] = count(); }}
           uprobe:{w}:workload_multi_t* /arg0 == 0/ {{ printf("first %s\n", func); }}"#,
        w = w()
    )
}

fn expected() -> String {
    format!(
        "first workload_multi_two\nfirst workload_multi_two\nfirst workload_multi_three\n\
         first workload_multi_three\nfirst workload_multi_three\n\n\n{COUNTS}{}",
        COUNTS.replace("@[", "@returns[")
    )
}

#[test]
fn a_wildcard_counts_each_function_exactly_through_one_link() {
    if !can_trace("a_wildcard_counts_each_function_exactly_through_one_link") {
        return;
    }
    let output = tracer(&["-v", "-e", &script(), "-c", &format!("{} multi 4", w())]).output().unwrap();
    let err = stderr(&output);
    assert_eq!(stdout(&output), expected(), "{err}");
    if err.contains("perf uprobe event") {
        skip(
            "a_wildcard_counts_each_function_exactly_through_one_link",
            "one link per wildcard: this kernel has no uprobe_multi links",
        );
        return;
    }
    for probe in ["uprobe", "uretprobe"] {
        let line = format!("{probe}:{}:workload_multi_* runs on one uprobe_multi link on 3 functions\n", w());
        assert!(err.contains(&line), "{err}");
    }
    assert!(err
        .contains(&format!("uprobe:{}:workload_multi_t* runs on one uprobe_multi link on 2 functions", w())));
}

/// Without uprobe_multi links every function gets its own probe; what the script prints is the same.
#[test]
fn one_probe_per_function_prints_the_same() {
    if !can_trace("one_probe_per_function_prints_the_same") {
        return;
    }
    let output = tracer(&["-v", "-e", &script(), "-c", &format!("{} multi 4", w())])
        .env("STEADYTRACE_UPROBE_ATTACH", "perf")
        .output()
        .unwrap();
    let err = stderr(&output);
    assert_eq!(stdout(&output), expected(), "{err}");
    assert!(err.contains(&format!("uprobe:{}:workload_multi_one runs on a perf uprobe event", w())), "{err}");
}

/// `probe`, and `func` compared with a string, need a value per function fixed at compile time: such a
/// probe gets a program per function, as in bpftrace.
#[test]
fn probe_and_func_as_a_string_get_a_program_per_function() {
    if !can_trace("probe_and_func_as_a_string_get_a_program_per_function") {
        return;
    }
    // A short path, so that `probe` fits in its 64 bytes.
    let copy = std::env::temp_dir().join(format!("stw-{}", std::process::id()));
    std::fs::copy(workload(), &copy).unwrap();
    let w = copy.display();
    let script = format!(
        r#"uprobe:{w}:workload_multi_* {{ @[probe] = count(); }}
           uprobe:{w}:workload_multi_* /func == "workload_multi_two"/ {{ @two = count(); }}"#
    );
    let output = tracer(&["-q", "-e", &script, "-c", &format!("{w} multi 3")]).output().unwrap();
    std::fs::remove_file(&copy).unwrap();
    let expected = format!(
        "\n\n@[uprobe:{w}:workload_multi_one]: 3\n@[uprobe:{w}:workload_multi_two]: 6\n\
         @[uprobe:{w}:workload_multi_three]: 9\n@two: 6\n"
    );
    assert_eq!(stdout(&output), expected, "{}", stderr(&output));
}

/// Every function of libc (over 7,000, some of which the kernel refuses to probe), in the traced
/// command only: attached, counted, and the run ends normally. (System-wide, every process on the
/// machine would run the probes.)
#[test]
fn all_of_libc_attaches_and_counts() {
    if !can_trace("all_of_libc_attaches_and_counts") {
        return;
    }
    let Ok(libc) = std::fs::canonicalize("/lib/x86_64-linux-gnu/libc.so.6") else {
        skip("all_of_libc_attaches_and_counts", "no /lib/x86_64-linux-gnu/libc.so.6");
        return;
    };
    let script = format!("uprobe:{}:* {{ @ = count(); }}", libc.display());
    let output = tracer(&["-e", &script, "-c", &format!("{} calls 3", w())]).output().unwrap();
    let err = stderr(&output);
    assert!(output.status.success(), "{err}");
    let count: u64 = stdout(&output)
        .trim()
        .strip_prefix("@: ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count: {}{err}", stdout(&output)));
    // Starting a Rust program calls libc hundreds of times.
    assert!(count > 100, "{count}");
    // Functions that cannot be probed, if any, are named in one warning, with the reasons in words.
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("cannot probe")).collect();
    assert!(warnings.len() <= 1, "{err}");
    let reasons = ["ENOTSUPP", "ENOEXEC", "an AVX instruction"];
    assert!(warnings.iter().all(|w| reasons.iter().any(|r| w.contains(r))), "{err}");
    assert!(!err.contains("Unknown error"), "{err}");
}

/// A copy of the machine's libc and its loader in a directory of its own, for programs started through
/// the copy's loader: uprobes belong to a file, so probing every function of the copy reaches those
/// programs and no other process of the machine, and a regression cannot hurt them. Removed on drop.
struct LibcCopy {
    dir: PathBuf,
}

impl LibcCopy {
    fn new(test: &str) -> Option<LibcCopy> {
        let (libc, loader) =
            (Path::new("/lib/x86_64-linux-gnu/libc.so.6"), Path::new("/lib64/ld-linux-x86-64.so.2"));
        if !libc.exists() || !loader.exists() {
            skip(test, "no x86_64 glibc at /lib/x86_64-linux-gnu (the copy needs its libc and loader)");
            return None;
        }
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("libc-copy-{test}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(libc, dir.join("libc.so.6")).unwrap();
        std::fs::copy(loader, dir.join("ld-linux-x86-64.so.2")).unwrap();
        Some(LibcCopy { dir })
    }

    /// `program` with `args`, run on the copy.
    fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut command = Command::new(self.dir.join("ld-linux-x86-64.so.2"));
        command.arg("--library-path").arg(&self.dir).arg(program).args(args).current_dir(&self.dir);
        command
    }

    /// A script counting the calls of every function of the copy.
    fn every_function(&self, rest: &str) -> String {
        format!("uprobe:{}:* {{ @ = count(); }} {rest}", self.dir.join("libc.so.6").display())
    }
}

impl Drop for LibcCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts a tracer (on the machine's libc) probing every function of `copy` system-wide.
fn probe_every_function(copy: &LibcCopy) -> (Reaped, std::thread::JoinHandle<String>) {
    let mut command = tracer(&["-e", &copy.every_function("")]);
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = Reaped::spawn(&mut command).expect("spawn the tracer");
    let said = wait_for_stderr_line(&mut child, "Attached");
    (child, said)
}

/// Stops a tracer of [`probe_every_function`] and returns its count, after checking that the kernel
/// unregistered every uprobe it placed (it logs `uprobe: COMM:PID failed to unregister, leaking uprobe`
/// when it cannot, and the breakpoint stays in the processes).
fn count_at_exit(child: Reaped, said: std::thread::JoinHandle<String>) -> u64 {
    let pid = child.id();
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let output = wait_output(child, Duration::from_secs(30));
    let err = said.join().unwrap_or_default();
    assert!(output.status.success(), "{err}");
    let log = Command::new("dmesg").output().expect("dmesg");
    let leaked = format!(":{pid} failed to unregister");
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(!log.lines().any(|line| line.contains(&leaked)), "the kernel kept uprobes: {log}");
    stdout(&output)
        .trim()
        .strip_prefix("@: ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count: {}{err}", stdout(&output)))
}

/// Programs running on a libc whose every function is probed print exactly what they print unprobed.
/// On Linux 6.18 a uprobe on an AVX first instruction (glibc's `__strchrnul_evex`: `vpbroadcastb`, EVEX
/// opcode 0x7a) is emulated as a `jp`: printf printed its formats unformatted in 300 of 300 runs here.
/// steadytrace never probes such an instruction.
#[test]
fn programs_run_correctly_while_every_function_of_their_libc_is_probed() {
    let test = "programs_run_correctly_while_every_function_of_their_libc_is_probed";
    if !can_trace(test) {
        return;
    }
    let Some(copy) = LibcCopy::new(test) else { return };
    let numbers: String = (0..20_000u64).map(|i| format!("{}\n", i.wrapping_mul(7919) % 20_011)).collect();
    std::fs::write(copy.dir.join("numbers"), numbers).unwrap();
    let programs: [(&str, &[&str]); 3] = [
        ("/usr/bin/md5sum", &["numbers"]),
        ("/usr/bin/printf", &["%d-%s-%x\\n", "42", "abc", "255"]),
        ("/usr/bin/sort", &["-n", "numbers"]),
    ];
    let run = |(program, args): &(&str, &[&str])| {
        let output = copy.command(program, args).output().expect("a program through the copy's loader");
        (output.status.code(), output.stdout)
    };
    let expected: Vec<_> = programs.iter().map(run).collect();
    let (child, said) = probe_every_function(&copy);
    let mut wrong = vec![];
    for round in 0..100 {
        for (program, expected) in programs.iter().zip(&expected) {
            let got = run(program);
            if got != *expected {
                let text = String::from_utf8_lossy(&got.1);
                wrong.push(format!("round {round}: {program:?} gave {:?}: {text}", got.0));
            }
        }
    }
    let count = count_at_exit(child, said);
    assert!(wrong.is_empty(), "{} of 300 runs went wrong while probed, first: {}", wrong.len(), wrong[0]);
    // 300 programs, each calling libc hundreds of times.
    assert!(count > 30_000, "{count}");
}

/// The tracer probing every function of the libc it runs on (dynamically linked to the copy) ends
/// normally with a count, three times, and so does `bench interval` running on it meanwhile: on 6.18 both
/// died of SIGSEGV in libc (a thread's start, malloc) before AVX first instructions were left alone.
#[test]
fn the_tracer_and_its_benchmark_survive_probing_the_libc_they_run_on() {
    let test = "the_tracer_and_its_benchmark_survive_probing_the_libc_they_run_on";
    if !can_trace(test) {
        return;
    }
    let Some(copy) = LibcCopy::new(test) else { return };
    let (child, said) = probe_every_function(&copy);
    for _ in 0..3 {
        let script = copy.every_function("interval:ms:100 { exit(); }");
        let output = copy.command(BIN, &["-q", "-e", &script]).output().expect("the tracer on the copy");
        assert!(output.status.success(), "{:?}\n{}", output.status, stderr(&output));
        assert!(stdout(&output).contains("@: "), "{}{}", stdout(&output), stderr(&output));
    }
    let bench = ["bench", "interval", "--period", "10ms", "--duration", "1s", "--rounds", "1", "-f", "json"];
    let output = copy.command(BIN, &bench).output().expect("the benchmark on the copy");
    assert!(output.status.success(), "{:?}\n{}", output.status, stderr(&output));
    assert!(count_at_exit(child, said) > 0);
}

/// A binary for another processor (the workload with its ELF header's machine changed: x86_64 and arm64
/// swapped) is refused by name, before any uprobe is placed, in listing and in a script alike.
#[test]
fn a_binary_for_another_processor_is_refused_by_name() {
    let mut elf = std::fs::read(workload()).expect("the workload");
    let (x86_64, aarch64) = (62u16, 183u16);
    let other = if u16::from_le_bytes([elf[18], elf[19]]) == x86_64 { aarch64 } else { x86_64 };
    elf[18..20].copy_from_slice(&other.to_le_bytes());
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("workload-for-another-processor");
    std::fs::write(&path, elf).expect("a copy");
    let path = path.to_string_lossy().into_owned();
    let other = if other == aarch64 { "aarch64" } else { "x86_64" };
    let expected = format!("{path} is code for {other}, not for this {} machine", std::env::consts::ARCH);
    let listed = tracer(&["-l", &format!("uprobe:{path}:*")]).output().unwrap();
    assert!(!listed.status.success() && stderr(&listed).contains(&expected), "{}", stderr(&listed));
    let traced = tracer(&["--dry-run", "-e", &format!("uprobe:{path}:workload_add {{ }}")]).output().unwrap();
    assert!(!traced.status.success() && stderr(&traced).contains(&expected), "{}", stderr(&traced));
}

/// A function named alone whose first instruction is AVX-512 (EVEX: `vpbroadcastb`, which 6.18's uprobes
/// emulate as `jp`) is an error at its attach point; probed further in, or matched by a wildcard beside an
/// ordinary function, it is not an error (the wildcard skips it with one warning naming the reason).
#[test]
fn an_avx_first_instruction_is_an_error_at_its_attach_point() {
    let test = "an_avx_first_instruction_is_an_error_at_its_attach_point";
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(test);
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("avx.c");
    std::fs::write(
        &source,
        "__attribute__((naked)) void avx_first(void) { __asm__(\"vpbroadcastb %esi, %ymm17\\n\\tret\"); }\n\
         __attribute__((naked)) void plain_first(void) { __asm__(\"xor %eax, %eax\\n\\tret\"); }\n\
         int main(void) { return 0; }\n",
    )
    .unwrap();
    let binary = dir.join("avx");
    match Command::new("cc").arg("-o").arg(&binary).arg(&source).output() {
        Ok(built) if built.status.success() => {}
        Ok(built) => {
            return skip(test, &format!("cc cannot build x86 AVX-512 code here: {}", stderr(&built)))
        }
        Err(error) => return skip(test, &format!("needs a C compiler (cc): {error}")),
    }
    let b = binary.display();
    let output = run_with(&["--dry-run", "-e", &format!("uprobe:{b}:avx_first {{ @ = count(); }}")], LIMIT);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("stdin:1:1: ERROR: `avx_first` starts with an AVX (VEX/EVEX-encoded) instruction"),
        "{err}"
    );
    assert!(
        err.contains("\n^^^^") && err.contains("help: probe an instruction further in (`avx_first+OFFSET`)"),
        "{err}"
    );
    // vpbroadcastb is 6 bytes long: the `ret` after it may be probed.
    let further =
        run_with(&["--dry-run", "-e", &format!("uprobe:{b}:avx_first+6 {{ @ = count(); }}")], LIMIT);
    assert!(further.status.success(), "{}", stderr(&further));
    if !can_trace(test) {
        return;
    }
    let wildcard = format!("uprobe:{b}:*_first {{ @[func] = count(); }} interval:ms:100 {{ exit(); }}");
    let output = run_with(&["-q", "-e", &wildcard], LIMIT);
    let err = stderr(&output);
    assert!(output.status.success(), "{err}");
    assert_eq!(
        err.trim_end(),
        "steadytrace: cannot probe 1 function, skipped: avx_first (an AVX instruction there, which the kernel's \
         uprobes take for another one and would run wrongly in every process)"
    );
}

/// A quoted binary is one field whatever it holds: `uprobe:"/dir/with:colon/workload":f`, in a script and in
/// `-l` (whose lines quote it back, so that one can be pasted into a script), as bpftrace 0.27.1 reads quotes.
#[test]
fn a_colon_inside_a_quoted_binary_parts_nothing() {
    if !can_trace("a_colon_inside_a_quoted_binary_parts_nothing") {
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("with:colon");
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("workload");
    std::fs::copy(workload(), &copy).expect("a copy of the workload");
    let copy = copy.to_string_lossy().into_owned();

    let listed = tracer(&["-l", &format!("uprobe:\"{copy}\":workload_multi_*")]).output().unwrap();
    let expected: String =
        ["one", "three", "two"].iter().map(|f| format!("uprobe:\"{copy}\":workload_multi_{f}\n")).collect();
    assert_eq!(stdout(&listed), expected, "{}", stderr(&listed));

    let script = format!("uprobe:\"{copy}\":workload_multi_* {{ @[func] = count(); }}");
    let output = run_with(&["-e", &script, "-c", &format!("{copy} multi 4")], LIMIT);
    assert_eq!(stdout(&output), format!("\n\n{COUNTS}"), "{}", stderr(&output));
}

/// A script's struct larger than the BPF stack, read whole from a uprobe's argument into a variable and a map
/// (`$s = *p`, `@m = *p`): the program keeps it in its scratch area, and prints what bpftrace 0.27.1 prints.
#[test]
fn a_struct_larger_than_the_stack_is_copied_from_a_uprobe_argument() {
    let test = "a_struct_larger_than_the_stack_is_copied_from_a_uprobe_argument";
    if !can_trace(test) {
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(test);
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("big.c");
    std::fs::write(
        &source,
        "#include <string.h>\n\
         struct big { char x[400]; int y; };\n\
         __attribute__((noinline)) void take(struct big *b) { __asm__ volatile(\"\" : : \"r\"(b) : \"memory\"); }\n\
         int main(void) { static struct big b; strcpy(b.x, \"hello\"); b.y = 42; take(&b); return 0; }\n",
    )
    .unwrap();
    let binary = dir.join("big");
    match Command::new("cc").arg("-O1").arg("-o").arg(&binary).arg(&source).output() {
        Ok(built) if built.status.success() => {}
        Ok(built) => return skip(test, &format!("cc failed: {}", stderr(&built))),
        Err(error) => return skip(test, &format!("needs a C compiler (cc): {error}")),
    }
    let b = binary.display();
    let script = format!(
        "struct big {{ char x[400]; int y; }}\n\
         uprobe:{b}:take {{ $s = *(struct big *)arg0; printf(\"%s %d\\n\", $s.x, $s.y); @m = *(struct big *)arg0; }}"
    );
    let output = run_with(&["-q", "-c", &b.to_string(), "-e", &script], LIMIT);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "hello 42\n\n\n@m: { .x = hello, .y = 42 }\n");
}
