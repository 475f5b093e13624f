//! Uprobe wildcards: one uprobe_multi link for all the functions of a binary that a wildcard matches,
//! `func` naming the function that fired, and functions the kernel refuses skipped with one warning.

mod common;

use common::*;

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
        println!("SKIPPED: one link per wildcard: this kernel has no uprobe_multi links");
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
        println!("SKIPPED: all_of_libc_attaches_and_counts: no /lib/x86_64-linux-gnu/libc.so.6");
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
    // Refused functions, if any, are named in one warning, with the reason in words.
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("refused")).collect();
    assert!(warnings.len() <= 1, "{err}");
    assert!(warnings.iter().all(|w| w.contains("ENOTSUPP") || w.contains("ENOEXEC")), "{err}");
    assert!(!err.contains("Unknown error"), "{err}");
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
