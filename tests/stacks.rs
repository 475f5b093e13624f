//! Stacks: `ustack` of a known call chain in this test process symbolizes to its function names,
//! `kstack` of system calls shows the kernel's syscall entry, and `-f folded` gives flame-graph lines.
//! (Frame pointers are on for the workspace, see .cargo/config.toml, so user stacks can be walked.)

mod common;

use common::*;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[inline(never)]
#[no_mangle]
extern "C" fn stack_test_leaf(stop: &AtomicBool) -> u64 {
    let mut x = 0u64;
    while !stop.load(Ordering::Relaxed) {
        x = black_box(x.wrapping_mul(31).wrapping_add(7));
    }
    x
}

#[inline(never)]
#[no_mangle]
extern "C" fn stack_test_middle(stop: &AtomicBool) -> u64 {
    black_box(stack_test_leaf(stop)) + 1
}

#[inline(never)]
#[no_mangle]
extern "C" fn stack_test_outer(stop: &AtomicBool) -> u64 {
    black_box(stack_test_middle(stop)) + 1
}

/// Runs the known call chain in a thread of this process until dropped.
struct Workload {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Workload {
    fn start() -> Workload {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            black_box(stack_test_outer(&flag));
        });
        Workload { stop, thread: Some(thread) }
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.take().map(|t| t.join());
    }
}

/// Samples the user stacks of this test process (running the workload) for 700 ms, with `options`.
fn profile_this_process(options: &[&str]) -> std::process::Output {
    let _work = Workload::start();
    let me = std::process::id().to_string();
    let mut args = vec!["-q", "-p", &me];
    args.extend_from_slice(options);
    args.extend(["-e", "profile:hz:99 { @[ustack] = count(); } interval:ms:700 { exit(); }"]);
    tracer(&args).output().unwrap()
}

#[test]
fn ustack_names_the_functions_of_a_known_call_chain() {
    let Some(_kernel) = KernelState::acquire("ustack_names_the_functions_of_a_known_call_chain") else {
        return;
    };
    let output = profile_this_process(&[]);
    let text = stdout(&output);
    // One key, innermost frame first, 4-space indent as bpftrace prints map keys.
    let chain = text.split("@[").find(|key| key.contains("stack_test_leaf+"));
    let chain = chain.unwrap_or_else(|| panic!("no stack with stack_test_leaf:\n{text}{}", stderr(&output)));
    let leaf = chain.find("\n    stack_test_leaf+").expect("leaf frame");
    let middle = chain.find("\n    stack_test_middle+").expect("middle frame");
    let outer = chain.find("\n    stack_test_outer+").expect("outer frame");
    assert!(leaf < middle && middle < outer, "frames out of order:\n{chain}");
}

#[test]
fn folded_output_gives_flame_graph_lines() {
    let Some(_kernel) = KernelState::acquire("folded_output_gives_flame_graph_lines") else { return };
    let output = profile_this_process(&["-f", "folded"]);
    let text = stdout(&output);
    let line = text.lines().find(|l| l.contains("stack_test_outer;stack_test_middle;stack_test_leaf "));
    let line =
        line.unwrap_or_else(|| panic!("no folded line for the call chain:\n{text}{}", stderr(&output)));
    let count: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count > 0);
    assert!(!line.contains('+'), "offsets are dropped in folded lines: {line}");
}

#[test]
fn kstack_of_system_calls_shows_the_syscall_entry() {
    let Some(_kernel) = KernelState::acquire("kstack_of_system_calls_shows_the_syscall_entry") else {
        return;
    };
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let caller = std::thread::spawn(move || {
        while !flag.load(Ordering::Relaxed) {
            // SAFETY: getppid has no preconditions.
            black_box(unsafe { libc::getppid() });
        }
    });
    let me = std::process::id().to_string();
    let output = tracer(&[
        "-q",
        "-p",
        &me,
        "-e",
        "profile:hz:199 { @[kstack] = count(); } interval:ms:700 { exit(); }",
    ])
    .output()
    .unwrap();
    stop.store(true, Ordering::Relaxed);
    caller.join().unwrap();
    let text = stdout(&output);
    assert!(
        text.contains("\n    do_syscall_64+"),
        "no kernel stack through do_syscall_64:\n{text}{}",
        stderr(&output)
    );
}

/// How [`chain_program`] is built: with frame pointers as `-fno-omit-frame-pointer` keeps them, or without, as
/// distributions build (where only the binary's DWARF call frame information tells how to unwind); without
/// them also as a position-dependent binary (mapped where its headers say, `00400000` in `/proc/PID/maps`)
/// and linked by lld (as every Rust program is), which packs segments without page alignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Frames {
    Pointers,
    Omitted,
    OmittedNonPie,
    OmittedLld,
}

/// A directory holding `ld.lld` (the Rust toolchain's rust-lld), for `cc -fuse-ld=lld`.
fn lld_dir() -> Option<std::path::PathBuf> {
    let sysroot = std::process::Command::new("rustc").args(["--print", "sysroot"]).output().ok()?;
    let sysroot = String::from_utf8(sysroot.stdout).ok()?;
    let host = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let lld = std::path::Path::new(sysroot.trim()).join(format!("lib/rustlib/{host}/bin/rust-lld"));
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("lld");
    std::fs::create_dir_all(&dir).ok()?;
    let link = dir.join("ld.lld");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(lld.canonicalize().ok()?, &link).ok()?;
    Some(dir)
}

/// A C program `main → top → mid → leaf → getppid()`, built once into the target directory; `None` when there is
/// no C compiler.
fn chain_program(frames: Frames) -> Option<std::path::PathBuf> {
    static BUILT: std::sync::Mutex<Vec<(Frames, Option<std::path::PathBuf>)>> = std::sync::Mutex::new(vec![]);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, binary)) = built.iter().find(|(f, _)| *f == frames) {
        return binary.clone();
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let (name, flags): (&str, &[&str]) = match frames {
        Frames::Pointers => ("stack_chain", &["-O0", "-fno-omit-frame-pointer"]),
        Frames::Omitted => ("stack_chain_nofp", &["-O1", "-fomit-frame-pointer"]),
        Frames::OmittedNonPie => ("stack_chain_nopie", &["-O1", "-fomit-frame-pointer", "-no-pie"]),
        Frames::OmittedLld => ("stack_chain_lld", &["-O1", "-fomit-frame-pointer", "-fuse-ld=lld"]),
    };
    let (source, binary) = (dir.join(format!("{name}.c")), dir.join(name));
    let mut path = std::env::var_os("PATH").unwrap_or_default();
    if frames == Frames::OmittedLld {
        let Some(lld) = lld_dir() else {
            built.push((frames, None));
            return None;
        };
        path = std::env::join_paths(std::iter::once(lld).chain(std::env::split_paths(&path))).ok()?;
    }
    let made = std::fs::write(
        &source,
        "#include <stdlib.h>\n\
         #include <unistd.h>\n\
         volatile int sink;\n\
         __attribute__((noinline)) int leaf(void) { int p = getppid(); sink++; return p; }\n\
         __attribute__((noinline)) int mid(void) { int r = leaf() + 1; sink++; return r; }\n\
         __attribute__((noinline)) int top(void) { int r = mid() + 1; sink++; return r; }\n\
         int main(int argc, char **argv) {\n\
           int calls = argc > 1 ? atoi(argv[1]) : 1, r = 0;\n\
           for (int i = 0; i < calls; i++) { r += top(); if (calls > 1) usleep(5000); }\n\
           return r > 0 ? 0 : 1;\n\
         }\n",
    )
    .is_ok()
        && std::process::Command::new("cc")
            .env("PATH", path)
            .args(flags)
            .args(["-g", "-o"])
            .arg(&binary)
            .arg(&source)
            .status()
            .is_ok_and(|s| s.success());
    let result = made.then_some(binary);
    built.push((frames, result.clone()));
    result
}

/// [`chain_program`], when the test can trace; `None` after [`skip`].
fn traceable_program(test: &str, frames: Frames) -> Option<std::path::PathBuf> {
    if !can_trace(test) {
        return None;
    }
    let program = chain_program(frames);
    if program.is_none() {
        let linker = if frames == Frames::OmittedLld { " and the Rust toolchain's rust-lld" } else { "" };
        skip(test, &format!("needs a C compiler (cc){linker}"));
    }
    program
}

/// The frames of the program's getppid stack, as text and in JSON, have names although the program exited before
/// they were printed; `leaf` too where the stack was unwound from DWARF.
fn assert_named_after_exit(text: &str, json: bool, dwarf: bool) {
    // Along frame pointers, the frame of `leaf` (whose callee getppid keeps no frame) is not seen.
    let wanted: &[&str] = if dwarf {
        &["getppid+", "leaf+", "mid+", "top+", "main+"]
    } else {
        &["getppid+", "mid+", "top+", "main+"]
    };
    let stack = if json { text.replace("\\n", "\n") } else { text.to_string() };
    let positions: Vec<Option<usize>> =
        wanted.iter().map(|name| stack.find(&format!("\n    {name}"))).collect();
    assert!(positions.iter().all(Option::is_some), "not every frame of {wanted:?} named in\n{text}");
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "frames out of order in\n{text}");
    // The C library's own frame, where its symbols (or libc6-dbg's) name it.
    if std::path::Path::new("/usr/lib/debug/.build-id").is_dir() {
        assert!(stack.contains("\n    __libc_start_call_main+"), "no libc frame in\n{text}");
    }
}

#[test]
fn the_stacks_of_a_command_that_exited_are_named() {
    let test = "the_stacks_of_a_command_that_exited_are_named";
    let Some(program) = traceable_program(test, Frames::Pointers) else { return };
    let script = "tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { @[ustack] = count(); }";
    for (json, unwind) in [(false, "fp"), (true, "fp"), (false, "dwarf"), (true, "dwarf")] {
        let format = if json { "json" } else { "text" };
        let output =
            tracer(&["-q", "-f", format, "--unwind", unwind, "-c", &program.to_string_lossy(), "-e", script])
                .output()
                .expect("run the tracer");
        assert!(output.status.success(), "{}", stderr(&output));
        assert_named_after_exit(&stdout(&output), json, unwind == "dwarf");
    }
}

#[test]
fn the_stacks_of_a_short_lived_process_not_started_by_the_tracer_are_named() {
    let test = "the_stacks_of_a_short_lived_process_not_started_by_the_tracer_are_named";
    let Some(program) = traceable_program(test, Frames::Pointers) else { return };
    // A name of its own, so that the other tests' runs of the program are not traced here.
    let renamed = program.with_file_name("shortlived");
    std::fs::copy(&program, &renamed).expect("copy the program");
    let program = renamed;
    let script = r#"tracepoint:syscalls:sys_enter_getppid /comm == "shortlived"/ { @[ustack] = count(); }"#;
    for unwind in ["fp", "dwarf"] {
        let mut child = Reaped::spawn(
            tracer(&["--unwind", unwind, "-e", script])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped()),
        )
        .expect("start the tracer");
        drop(wait_for_stderr_line(&mut child, "Attached"));
        // Started by a shell, as any other program, and gone well before the maps are printed.
        let ran = std::process::Command::new("sh").arg("-c").arg(&program).status().expect("run the program");
        assert!(ran.success());
        std::thread::sleep(std::time::Duration::from_millis(300));
        let _ =
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::SIGINT);
        let output = wait_output(child, std::time::Duration::from_secs(20));
        assert_named_after_exit(&stdout(&output), false, unwind == "dwarf");
    }
}

#[test]
fn the_stacks_of_a_command_without_frame_pointers_are_whole_with_dwarf() {
    let test = "the_stacks_of_a_command_without_frame_pointers_are_whole_with_dwarf";
    let Some(program) = traceable_program(test, Frames::Omitted) else { return };
    let program = program.to_string_lossy();
    for (script, json) in [
        ("tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { @[dw_ustack] = count(); }", false),
        ("tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { @[dw_ustack] = count(); }", true),
        ("tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { @[ustack] = count(); }", false),
    ] {
        let unwind = if script.contains("dw_ustack") { "fp" } else { "dwarf" };
        let format = if json { "json" } else { "text" };
        let output = tracer(&["-q", "-f", format, "--unwind", unwind, "-c", &program, "-e", script])
            .output()
            .expect("run the tracer");
        assert!(output.status.success(), "{}", stderr(&output));
        assert_named_after_exit(&stdout(&output), json, true);
    }
    // As a flame graph's folded line, outermost first.
    let script = "tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { @[dw_ustack] = count(); }";
    let output =
        tracer(&["-q", "-f", "folded", "-c", &program, "-e", script]).output().expect("run the tracer");
    assert!(
        stdout(&output).lines().any(|l| l.contains("main;top;mid;leaf;getppid 1")),
        "no folded line of the whole stack:\n{}",
        stdout(&output)
    );
    // Along frame pointers the same stack ends after the first frame or two.
    let script = "tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { @[ustack] = count(); }";
    let output = tracer(&["-q", "-c", &program, "-e", script]).output().expect("run the tracer");
    assert!(
        !stdout(&output).contains("\n    top+"),
        "frame pointers walked a binary without them:\n{}",
        stdout(&output)
    );
}

#[test]
fn dw_ustack_walks_position_dependent_and_lld_linked_binaries() {
    let test = "dw_ustack_walks_position_dependent_and_lld_linked_binaries";
    for frames in [Frames::OmittedNonPie, Frames::OmittedLld] {
        let Some(program) = traceable_program(test, frames) else { continue };
        let script = "tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { @[dw_ustack] = count(); }";
        let output =
            tracer(&["-q", "-c", &program.to_string_lossy(), "-e", script]).output().expect("run the tracer");
        assert!(output.status.success(), "{frames:?}: {}", stderr(&output));
        assert_named_after_exit(&stdout(&output), false, true);
    }
}

/// gdb's backtrace at the program's getppid call, each frame as `function+offset` (`info symbol` of the frame's
/// pc: for a caller, the return address, as stacks print it); `None` without gdb.
fn gdb_backtrace(program: &str) -> Option<Vec<String>> {
    let mut args = vec!["-q", "-nx", "-batch", "-ex", "catch syscall getppid", "-ex", "run"];
    let frame_commands: Vec<String> = (0..5).map(|n| format!("frame {n}")).collect();
    for command in &frame_commands {
        args.extend(["-ex", command, "-ex", "info symbol $pc"]);
    }
    args.push(program);
    let output = std::process::Command::new("gdb").args(&args).output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    // `leaf + 9 in section .text of /path`, or `getppid + 7 in section .text of /lib/...` (`leaf in section ...`
    // at offset 0).
    let frames: Vec<String> = text
        .lines()
        .filter_map(|line| {
            let (symbol, _) = line.split_once(" in section ")?;
            Some(match symbol.split_once(" + ") {
                Some((name, offset)) => format!("{name}+{offset}"),
                None => format!("{symbol}+0"),
            })
        })
        .collect();
    (!frames.is_empty()).then_some(frames)
}

#[test]
fn dw_ustack_through_libc_equals_gdb_s_backtrace() {
    let test = "dw_ustack_through_libc_equals_gdb_s_backtrace";
    let Some(program) = traceable_program(test, Frames::Omitted) else { return };
    let program = program.to_string_lossy();
    let Some(gdb) = gdb_backtrace(&program) else {
        skip(test, "needs gdb");
        return;
    };
    let script = "tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { @[dw_ustack] = count(); }";
    let output = tracer(&["-q", "-c", &program, "-e", script]).output().expect("run the tracer");
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let ours: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("    ")).collect();
    // gdb stops at main; ours goes on into the C library's start-up. The first frame is in libc's getppid, which
    // gdb may name by another of its aliases (`__GI_getppid`).
    assert_eq!(gdb.len(), 5, "gdb's backtrace: {gdb:?}");
    assert!(ours.len() > 5, "too short a stack:\n{text}");
    let offset = |frame: &str| frame.rsplit_once('+').map(|(_, o)| o.to_string());
    assert_eq!(offset(ours[0]), offset(&gdb[0]), "innermost frame: ours {} gdb {}", ours[0], gdb[0]);
    assert!(gdb[0].contains("getppid") && ours[0].contains("getppid"));
    assert_eq!(ours[1..5], gdb[1..5].iter().map(String::as_str).collect::<Vec<_>>()[..], "\n{text}");
}

#[test]
fn dw_ustack_keys_are_merged_per_stack_beyond_the_map_s_size() {
    let test = "dw_ustack_keys_are_merged_per_stack_beyond_the_map_s_size";
    let Some(program) = traceable_program(test, Frames::Omitted) else { return };
    // Every copied stack has its own handle: 300 calls (20 every 100 ms) from one place fit a 64-key map only
    // because the handles of equal stacks are merged, and the kernel's map emptied, as the tracer runs.
    let command = format!("{} 300", program.to_string_lossy());
    // A plain value only counted (`++`) is merged by adding too.
    let script =
        "let @s = percpuhash(64); let @i = hash(64); tracepoint:syscalls:sys_enter_getppid /pid == cpid/ \
                  { @s[dw_ustack] = count(); @i[dw_ustack]++; @n = count(); }";
    let output = tracer(&["-q", "-c", &command, "-e", script]).output().expect("run the tracer");
    let (text, errors) = (stdout(&output), stderr(&output));
    assert!(output.status.success(), "{errors}");
    assert!(!errors.contains("dropped") && !errors.contains("full"), "{errors}");
    assert!(text.contains("@n: 300\n"), "calls seen:\n{text}");
    let keys: Vec<&str> = text.split("@s[").skip(1).collect();
    assert_eq!(keys.len(), 1, "one stack, one key:\n{text}");
    assert!(keys[0].contains("\n    leaf+") && keys[0].trim_end().ends_with("]: 300"), "{text}");
    let counted: Vec<&str> = text.split("@i[").skip(1).map(|k| k.split("\n@").next().unwrap_or(k)).collect();
    assert_eq!(counted.len(), 1, "one stack, one key:\n{text}");
    assert!(counted[0].contains("\n    leaf+") && counted[0].trim_end().ends_with("]: 300"), "{text}");
}

#[test]
fn usym_of_a_command_that_exited_is_named() {
    let test = "usym_of_a_command_that_exited_is_named";
    let Some(program) = traceable_program(test, Frames::Pointers) else { return };
    let program = program.to_string_lossy();
    let script = format!(r#"uprobe:{program}:mid {{ @[usym(reg("ip"))] = count(); }}"#);
    let output = tracer(&["-q", "-c", &program, "-e", &script]).output().expect("run the tracer");
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output).trim(), "@[mid]: 1");
}

/// The build id of the ELF file at `path` (its GNU build-id note), in hex.
fn build_id_of(path: &std::path::Path) -> String {
    use object::Object;
    let data = std::fs::read(path).expect("read the program");
    let file = object::File::parse(&*data).expect("an ELF file");
    let id = file.build_id().expect("parse its notes").expect("cc gives it a build id");
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// `ustack(build_id)`: each frame is the build id of the file mapped there and the offset in that file, as the
/// kernel's build-id stack maps give them: printed while the program runs, and from the journal after it exited.
#[test]
fn ustack_build_id_gives_build_ids_and_file_offsets() {
    let test = "ustack_build_id_gives_build_ids_and_file_offsets";
    let Some(program) = traceable_program(test, Frames::Pointers) else { return };
    let id = build_id_of(&program);
    let script = "tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { print(ustack(build_id)); @[ustack(build_id)] = count(); }";
    let output =
        tracer(&["-q", "-c", &program.to_string_lossy(), "-e", script]).output().expect("run the tracer");
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let frames: Vec<&str> =
        text.lines().filter(|l| !l.is_empty() && !l.starts_with('@') && *l != "]: 1").collect();
    let ours = |frame: &&&str| {
        frame.split_once(" 0x").is_some_and(|(build_id, offset)| {
            build_id == id && u64::from_str_radix(offset, 16).is_ok_and(|o| o > 0 && o < 1 << 20)
        })
    };
    // mid, top and main are the program's: in the printed stack and in the map's key, after the program exited.
    assert!(frames.iter().filter(ours).count() >= 6, "not 3 frames of {id} twice in\n{text}");
    for frame in &frames {
        let (build_id, offset) = frame.split_once(" 0x").unwrap_or((frame, ""));
        assert!(
            build_id.len() >= 16 && build_id.bytes().all(|b| b.is_ascii_hexdigit()) && !offset.is_empty(),
            "{frame:?} is not a build id and an offset in\n{text}"
        );
    }
}
