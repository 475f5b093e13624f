//! `--emit-elf FILE`: the object steadytrace writes is one libbpf opens and loads, each program
//! accepted by the verifier (through libbpf-rs's vendored libbpf, as bpftool's `prog loadall` would).
//! Writing needs no kernel; loading needs root.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

/// The scripts, each with the sections of its programs (one per program: programs of one section name
/// share it).
const SCRIPTS: &[(&str, &str, &[&str])] = &[
    (
        "getppid_count",
        "tracepoint:syscalls:sys_enter_getppid { @[comm] = count(); }",
        &["tracepoint/syscalls/sys_enter_getppid"],
    ),
    ("begin_printf", r#"BEGIN { printf("hello %d\n", 42); exit(); }"#, &["raw_tracepoint"]),
    (
        "hist",
        "tracepoint:syscalls:sys_enter_read { @bytes = hist(args.count); } END { print(@bytes); }",
        &["tracepoint/syscalls/sys_enter_read", "raw_tracepoint"],
    ),
    (
        "interval_count",
        "interval:ms:100 { @ticks = count(); } rawtracepoint:sched_switch { @s[cpu] = count(); }",
        &["raw_tracepoint", "raw_tracepoint/sched_switch"],
    ),
];

/// Scripts whose programs have callbacks (`for` loops: `bpf_loop`, `bpf_for_each_map_elem`), which are
/// functions of `.text` described in `.BTF` and `.BTF.ext`; each with its programs' sections.
const WITH_CALLBACKS: &[(&str, &str, &[&str])] = &[
    (
        "for_range",
        "tracepoint:syscalls:sys_enter_getppid { for ($i : 0..3) { @n[$i] = count(); } }",
        &["tracepoint/syscalls/sys_enter_getppid"],
    ),
    (
        "for_map",
        r#"BEGIN { @m[1] = 2; @m[3] = 4; } END { for ($kv : @m) { printf("%d %d\n", $kv.0, $kv.1); } }"#,
        &["raw_tracepoint", "raw_tracepoint"],
    ),
    (
        "for_nested",
        "interval:ms:100 { for ($kv : @m) { for ($i : 0..2) { @s[$kv.0, $i] = sum($kv.1); } } } \
         tracepoint:syscalls:sys_enter_getppid { @m[pid] = 1; }",
        &["raw_tracepoint", "tracepoint/syscalls/sys_enter_getppid"],
    ),
];

/// Writes the object of `script` with `--dry-run` (which then stops), compiled for the feature table
/// `features`, else for this kernel.
fn emit(name: &str, script: &str, features: Option<&str>) -> PathBuf {
    emit_with(name, script, features, &[])
}

/// [`emit`], with these environment variables.
fn emit_with(name: &str, script: &str, features: Option<&str>, env: &[(&str, &str)]) -> PathBuf {
    // Each test's file its own: the tests run at once.
    let path = std::env::temp_dir().join(format!(
        "steadytrace-emit-elf-{}-{name}-{}.o",
        std::process::id(),
        features.unwrap_or("this-kernel")
    ));
    let mut command = tracer(&["--dry-run", "--emit-elf", path.to_str().unwrap(), "-e", script]);
    match features {
        Some(features) => command.env("STEADYTRACE_KERNEL_FEATURES", features),
        None => command.env_remove("STEADYTRACE_KERNEL_FEATURES"),
    };
    command.envs(env.iter().copied()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let output = wait_output(Reaped::spawn(&mut command).expect("spawn"), LIMIT);
    assert_eq!(output.status.code(), Some(0), "{name}: {}", stderr(&output));
    assert_eq!(stdout(&output), "", "{name}: --dry-run runs nothing");
    path
}

fn section_names(path: &Path) -> Vec<String> {
    use object::{Object, ObjectSection};
    let bytes = std::fs::read(path).expect("read the object");
    let file = object::File::parse(&*bytes).expect("an ELF object");
    assert_eq!(file.architecture(), object::Architecture::Bpf);
    file.sections().map(|s| s.name().unwrap().to_string()).collect()
}

#[test]
fn the_object_has_a_section_per_program_license_and_maps() {
    // Tracepoints read through tracefs formats: with "all" features, the syscall tracepoints are classic ones.
    if !std::path::Path::new("/sys/kernel/tracing/events/syscalls").exists() {
        skip("the_object_has_a_section_per_program_license_and_maps", "no tracefs syscall events here");
        return;
    }
    for (name, script, programs) in SCRIPTS {
        let path = emit(name, script, Some("all"));
        let sections = section_names(&path);
        std::fs::remove_file(&path).unwrap();
        for wanted in programs.iter().chain(&["license", ".maps", ".BTF"]) {
            assert!(sections.iter().any(|s| s == wanted), "{name}: no section {wanted} in {sections:?}");
        }
        assert!(!sections.iter().any(|s| s == ".text" || s == ".BTF.ext"), "{name}: {sections:?}");
    }
    for (name, script, programs) in WITH_CALLBACKS {
        let path = emit(name, script, Some("all"));
        let sections = section_names(&path);
        std::fs::remove_file(&path).unwrap();
        for wanted in programs.iter().chain(&[".text", ".rel.text", "license", ".maps", ".BTF", ".BTF.ext"]) {
            assert!(sections.iter().any(|s| s == wanted), "{name}: no section {wanted} in {sections:?}");
        }
        // Programs of one section name share it.
        let raw = sections.iter().filter(|s| *s == "raw_tracepoint").count();
        assert!(raw <= 1, "{name}: {sections:?}");
    }
}

#[test]
fn libbpf_loads_every_program_of_the_object() {
    if !can_trace("libbpf_loads_every_program_of_the_object") {
        return;
    }
    for (name, script, programs) in SCRIPTS.iter().chain(WITH_CALLBACKS) {
        // Compiled for this kernel, as a user would.
        let path = emit(name, script, None);
        let object = libbpf_rs::ObjectBuilder::default()
            .open_file(&path)
            .and_then(|open| open.load())
            .unwrap_or_else(|e| panic!("{name}: libbpf cannot load the object: {e}"));
        assert_eq!(object.progs().count(), programs.len(), "{name}");
        drop(object);
        // And the system's bpftool (its own libbpf), where there is one: each program pinned, in a BPF
        // filesystem of the test's own (bpftool would mount one on /sys/fs/bpf and leave it there).
        let bpffs = PrivateBpffs::mount(&format!("{name}_{}", std::process::id()));
        let pins = bpffs.0.join("pins");
        if let Ok(output) = std::process::Command::new("bpftool")
            .args(["prog", "loadall", path.to_str().unwrap(), pins.to_str().unwrap()])
            .output()
        {
            let pinned = std::fs::read_dir(&pins).map(|dir| dir.count()).unwrap_or(0);
            let _ = std::fs::remove_dir_all(&pins);
            assert!(output.status.success(), "{name}: {}", String::from_utf8_lossy(&output.stderr));
            assert_eq!(pinned, programs.len(), "{name}");
        }
        drop(bpffs);
        std::fs::remove_file(&path).unwrap();
    }
}

/// Uprobe programs' sections say the binary and the function as libbpf's `SEC("uprobe/PATH:FUNCTION")`
/// does, so that libbpf attaches them by itself: `uprobe.multi/` on a kernel with uprobe_multi links,
/// `uprobe/` for perf uprobe events (`uretprobe` alike); an offset into functions that a uprobe_multi
/// section cannot say leaves it bare, loaded but not attached by libbpf.
#[test]
fn uprobe_sections_name_the_binary_and_libbpf_attaches_them() {
    if !can_trace("uprobe_sections_name_the_binary_and_libbpf_attaches_them") {
        return;
    }
    let w = workload().to_string_lossy().into_owned();
    let script = format!(
        "uprobe:{w}:workload_multi_one {{ @a = count(); }} uretprobe:{w}:workload_multi_t* {{ @b = count(); }} \
         uprobe:{w}:workload_add+4 {{ @c = count(); }}"
    );
    let multi = [
        format!("uprobe.multi/{w}:workload_multi_one"),
        format!("uretprobe.multi/{w}:workload_multi_t*"),
        "uprobe.multi".to_string(),
    ];
    let perf = [
        format!("uprobe/{w}:workload_multi_one"),
        format!("uretprobe/{w}:workload_multi_three"),
        format!("uretprobe/{w}:workload_multi_two"),
        format!("uprobe/{w}:workload_add+4"),
    ];
    for (attach, expected) in [("multi", &multi[..]), ("perf", &perf[..])] {
        let name = format!("uprobe_{attach}");
        let path = emit_with(&name, &script, None, &[("STEADYTRACE_UPROBE_ATTACH", attach)]);
        let sections = section_names(&path);
        let mut programs: Vec<&String> = sections.iter().filter(|s| s.starts_with('u')).collect();
        programs.sort();
        let mut expected: Vec<&String> = expected.iter().collect();
        expected.sort();
        assert_eq!(programs, expected, "{attach}: {sections:?}");
        let object = libbpf_rs::ObjectBuilder::default()
            .open_file(&path)
            .and_then(|open| open.load())
            .unwrap_or_else(|e| panic!("{attach}: libbpf cannot load the object: {e}"));
        // libbpf attaches each program its section names the binary of (for every process).
        let mut links = vec![];
        for program in object.progs_mut().filter(|p| p.section().to_string_lossy().contains(':')) {
            let section = program.section().to_string_lossy().into_owned();
            links.push(
                program.attach().unwrap_or_else(|e| panic!("{attach}: libbpf attaches no {section}: {e}")),
            );
        }
        assert_eq!(links.len(), expected.iter().filter(|s| s.contains(':')).count(), "{attach}");
        drop(links);
        drop(object);
        std::fs::remove_file(&path).unwrap();
    }
}

/// A BPF filesystem mounted on a directory of its own, unmounted and removed when dropped (also when an
/// assertion fails).
struct PrivateBpffs(PathBuf);

impl PrivateBpffs {
    fn mount(name: &str) -> PrivateBpffs {
        let dir = std::env::temp_dir().join(format!("steadytrace-bpffs-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mounted =
            std::process::Command::new("mount").args(["-t", "bpf", "bpf"]).arg(&dir).status().unwrap();
        assert!(mounted.success(), "cannot mount a BPF filesystem on {}", dir.display());
        PrivateBpffs(dir)
    }
}

impl Drop for PrivateBpffs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}
