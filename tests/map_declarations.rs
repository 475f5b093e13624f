//! Map declarations (`let @m = lruhash(N);`) as the kernel sees them, and their warnings on stderr, which
//! the corpus (stdout only) cannot check.

mod common;

use common::*;
use std::process::Stdio;
use std::time::Duration;

/// `(map_type, max_entries)` of every BPF map the process `pid` holds, read from its fdinfo.
fn maps_of(pid: u32) -> Vec<(u32, u32)> {
    let mut maps = vec![];
    for entry in std::fs::read_dir(format!("/proc/{pid}/fdinfo")).expect("fdinfo") {
        let Ok(info) = std::fs::read_to_string(entry.expect("fdinfo entry").path()) else { continue };
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().parse::<u32>().expect("a number"))
        };
        if let (Some(kind), Some(max)) = (field("map_type:"), field("max_entries:")) {
            maps.push((kind, max));
        }
    }
    maps
}

#[test]
fn declared_maps_have_the_declared_type_and_size() {
    if !can_trace("declared_maps_have_the_declared_type_and_size") {
        return;
    }
    let script = "let @h = hash(3); let @l = lruhash(5); let @p = percpuhash(7); let @pl = percpulruhash(9);
        BEGIN { @h[1] = 1; @l[1] = 1; @p[1] = count(); @pl[1] = count(); }";
    let mut child =
        Reaped::spawn(tracer(&["-e", script]).stdout(Stdio::null()).stderr(Stdio::piped())).expect("spawn");
    let rest = wait_for_stderr_line(&mut child, "Attached");
    let maps = maps_of(child.id());
    // SAFETY: kill has no memory preconditions; the pid is our child's.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().expect("wait");
    let _ = rest.join();
    assert!(status.success(), "{status:?}");
    // BPF_MAP_TYPE_HASH = 1, PERCPU_HASH = 5, LRU_HASH = 9, LRU_PERCPU_HASH = 10.
    for expected in [(1, 3), (9, 5), (5, 7), (10, 9)] {
        assert!(maps.contains(&expected), "no map (type, entries) {expected:?} among {maps:?}");
    }
}

#[test]
fn a_full_declared_map_warns_where_the_update_failed() {
    if !can_trace("a_full_declared_map_warns_where_the_update_failed") {
        return;
    }
    let output =
        run("let @a = hash(1);\nBEGIN { @a[1] = 1; @a[2] = 2; @a[1] = 3; exit(); }", Duration::from_secs(20));
    assert_eq!(stdout(&output), "\n\n@a[1]: 3\n");
    let expected = "stdin:2:20: WARNING: Map full; can't update element\n\
        BEGIN { @a[1] = 1; @a[2] = 2; @a[1] = 3; exit(); }\n                   ^^^^^^^^^\n\
        help: declare @a with more entries, e.g. `let @a = hash(5000);`\n";
    assert_eq!(stderr(&output), expected);
}

#[test]
fn an_undeclared_full_map_says_at_exit_how_many_updates_it_dropped() {
    if !can_trace("an_undeclared_full_map_says_at_exit_how_many_updates_it_dropped") {
        return;
    }
    // 5000 keys into maps of 4096: 904 dropped from each; the count map is per-CPU, the other not. (Two probes: one
    // program with both loops is more than the verifier follows.)
    let output = run(
        "config = { print_maps_on_exit = false } BEGIN { $i = 0; while ($i < 5000) { @c[$i] = count(); $i++; } } BEGIN { $i = 0; while ($i < 5000) { @v[$i] = $i; $i++; } exit(); }",
        Duration::from_secs(20),
    );
    assert_eq!(
        stderr(&output),
        "steadytrace: @c: 904 updates dropped: the map was full (declare it larger: `let @c = percpuhash(N);`)\n\
         steadytrace: @v: 904 updates dropped: the map was full (declare it larger: `let @v = hash(N);`)\n"
    );
}

#[test]
fn an_lru_map_evicts_without_a_warning_and_an_unused_declaration_warns() {
    if !can_trace("an_lru_map_evicts_without_a_warning_and_an_unused_declaration_warns") {
        return;
    }
    let output = run(
        "let @a = lruhash(1); let @unused = hash(4); BEGIN { @a[1] = 1; @a[2] = 2; exit(); }",
        Duration::from_secs(20),
    );
    assert_eq!(stdout(&output), "\n\n@a[2]: 2\n");
    let stderr = stderr(&output);
    assert!(stderr.starts_with("stdin:1:22: WARNING: Unused map: @unused\n"), "{stderr}");
    assert!(!stderr.contains("Map full"), "{stderr}");
}
