//! The invariants of docs/ARCHITECTURE.md ("Layers and invariants"), checked on the sources: which layer
//! may import which, where names are resolved, where `unsafe` may be; and that the project holds no copy of a
//! file of bpftrace's source (tests read that at test time). No root, no kernel.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The layers from the ground up: a file may use `crate::M` only for modules of its own layer or below.
const LAYERS: &[&[&str]] = &[
    &["sys", "executable", "clocks", "online_cpus", "apk"],
    &["lang", "symbols", "privilege"],
    &["kernel", "bpf_token"],
    &["probes"],
    &["config"],
    &["sema"],
    &["codegen"],
    &["functions", "output"],
    &["metrics"],
    &["pipeline"],
    &["runtime", "info"],
    &["bench", "cli"],
    &["manpage", "completions"],
];

/// The files where `unsafe` may appear: system calls without a safe wrapper in nix or libbpf-rs, and memory
/// the kernel shares. The tracer crate itself allows it in src/sys.rs alone (`deny(unsafe_code)`; main.rs allows the
/// lint for one `#[no_mangle]`, its C entry, with no `unsafe` code).
const UNSAFE_ALLOWED: &[&str] = &[
    "src/sys.rs",
    "bpf/src/sys/btf.rs",
    "bpf/src/sys/features.rs",
    "bpf/src/sys/link.rs",
    "bpf/src/sys/perf.rs",
    "bpf/src/sys/perf_ring.rs",
    "bpf/src/sys/prog.rs",
    // The ring buffer read through its mapped pages, by the kernel's protocol (libbpf's consumer published its
    // position after every record: docs/BENCHMARKS.md, the printf row).
    "bpf/src/sys/ringbuf.rs",
    "bpf/src/sys/token.rs",
];

fn sources() -> Vec<PathBuf> {
    sources_under("src")
}

fn sources_under(dir: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read src").flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = vec![];
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join(dir), &mut files);
    files.sort();
    files
}

/// The file's code without its unit tests and comments.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("read");
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// `src/sema/typing.rs` → `sema`; `src/main.rs` → `main`.
fn module_of(path: &Path) -> String {
    let relative = path.strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")).join("src")).expect("under src");
    let first = relative.components().next().expect("a component").as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_string()
}

fn layer(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// The top-level modules a file names as `crate::M`.
fn imports(code: &str) -> Vec<String> {
    let mut found = vec![];
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if !name.is_empty() && !found.contains(&name) {
            found.push(name);
        }
    }
    found
}

#[test]
fn no_layer_imports_one_above_it() {
    let mut wrong = vec![];
    for file in sources() {
        let module = module_of(&file);
        let Some(own) = layer(&module) else { continue };
        for target in imports(&code(&file)) {
            if let Some(theirs) = layer(&target) {
                if theirs > own {
                    wrong.push(format!("{} ({module}) uses crate::{target}", file.display()));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "imports running up the layers:\n{}", wrong.join("\n"));
}

#[test]
fn every_module_has_a_layer() {
    let unplaced: Vec<String> = sources()
        .iter()
        .map(|f| module_of(f))
        .filter(|m| !["lib", "main"].contains(&m.as_str()) && layer(m).is_none())
        .collect();
    assert!(unplaced.is_empty(), "modules with no layer in LAYERS: {unplaced:?}");
}

/// Names are resolved in sema: codegen reads what the checked program recorded.
#[test]
fn codegen_resolves_no_names() {
    for file in sources().iter().filter(|f| module_of(f) == "codegen") {
        let code = code(file);
        assert!(!code.contains("Builtin::from_name"), "{} looks a builtin up by name", file.display());
        assert!(!code.contains("enum_value("), "{} looks an enum constant up by name", file.display());
        assert!(!code.contains("strip_prefix(\"arg\")"), "{} parses `argN` itself", file.display());
        assert!(!code.contains("functions::lookup"), "{} looks a function up by name", file.display());
    }
}

/// What `use crate::kernel::...` and `crate::kernel::...` paths in `code` name: the last segment of each
/// path, every name of a `{...}` group (`kernel::{Member, btf::Vmlinux}` names `Member` and `Vmlinux`).
fn kernel_names(code: &str) -> Vec<String> {
    let word = |s: &str| s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>();
    let mut names = vec![];
    for (at, _) in code.match_indices("crate::kernel::") {
        let rest = &code[at + "crate::kernel::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            names.extend(group.split(',').map(|p| word(p.trim().rsplit("::").next().unwrap_or(""))));
        } else {
            let path: String =
                rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':').collect();
            // A path used in code ends at a function or type; its segments name modules on the way.
            names.extend(path.split("::").map(str::to_string));
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

/// The kernel's types are looked up in sema, which records what it found in the checked program: the code
/// that generates instructions (codegen, and the `emit` halves in `functions/`, which only get a `Gen`)
/// cannot reach the lookups. Only sema's `Env` carries a `KernelTypes`; nothing below it may name one.
#[test]
fn code_generation_reaches_no_kernel_type_lookup() {
    let lookups = ["KernelTypes", "Vmlinux", "btf", "script_types", "KernelFunction"];
    let mut wrong = vec![];
    for file in sources().iter().filter(|f| ["codegen", "functions"].contains(&module_of(f).as_str())) {
        for name in kernel_names(&code(file)) {
            if lookups.contains(&name.as_str()) {
                wrong.push(format!("{} names crate::kernel::{name}", file.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "code generation reaching the kernel's type lookups:\n{}", wrong.join("\n"));
    let gen = code(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src/codegen/mod.rs")));
    let fields = gen.split("pub struct Gen<'a> {").nth(1).and_then(|s| s.split("\n}").next()).expect("Gen");
    assert!(
        !fields.contains("Kernel") && !fields.contains("Env"),
        "Gen carries the kernel's types:\n{fields}"
    );
}

/// What the compiler knows of the kernel is handed down as values (`KernelTypes`, `Features`): nothing is kept
/// per thread.
#[test]
fn no_thread_keeps_state_of_its_own() {
    let kept: Vec<String> = sources()
        .iter()
        .filter(|f| code(f).contains("thread_local!"))
        .map(|f| f.display().to_string())
        .collect();
    assert!(kept.is_empty(), "thread-locals in {kept:?}");
}

#[test]
fn the_check_finds_kernel_lookups_by_import() {
    let names = kernel_names(
        "use crate::kernel::{Member, btf::Vmlinux};\nlet k = crate::kernel::KernelTypes::none();",
    );
    assert_eq!(names, ["Member", "Vmlinux", "KernelTypes", "none"]);
}

/// What a probe type can do is asked of its `Provider`, never decided by its name outside src/probes.
#[test]
fn no_probe_type_is_decided_by_its_name_outside_probes() {
    let names =
        ["\"uprobe\"", "\"uretprobe\"", "\"kprobe\"", "\"kretprobe\"", "\"usdt\"", "\"fentry\"", "\"fexit\""];
    for file in sources().iter().filter(|f| ["sema", "functions", "codegen"].contains(&module_of(f).as_str()))
    {
        let code = code(file);
        assert!(!code.contains(".kind()"), "{} asks a provider its kind", file.display());
        for name in names {
            assert!(!code.contains(name), "{} matches the probe type {name}", file.display());
        }
    }
}

/// `unsafe` stays in the few files that talk to the kernel without a safe wrapper.
#[test]
fn unsafe_code_stays_in_its_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = vec![];
    for file in
        sources_under("src").into_iter().chain(sources_under("bpf/src")).chain(sources_under("trigger/src"))
    {
        let code = code(&file);
        // The keyword, not a name ending in it (`allow_unsafe {`).
        let keyword = |u: &str| {
            code.match_indices(u)
                .any(|(at, _)| !code[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_'))
        };
        if ["unsafe {", "unsafe fn", "unsafe impl", "unsafe extern"].iter().any(|u| keyword(u)) {
            let relative = file.strip_prefix(root).expect("under the project").to_string_lossy().into_owned();
            if !UNSAFE_ALLOWED.contains(&relative.as_str()) {
                found.push(relative);
            }
        }
    }
    assert!(found.is_empty(), "unsafe code outside {UNSAFE_ALLOWED:?}: {found:?}");
}

/// bpftrace's files are read from its source when the tests run (scripts/bpftrace-source), never kept in the
/// project: no file `git ls-files` lists may have the same bytes as a file of that source.
#[test]
fn no_tracked_file_is_a_copy_of_a_bpftrace_file() {
    let test = "no_tracked_file_is_a_copy_of_a_bpftrace_file";
    let source = match common::fetched("bpftrace-source") {
        Ok(source) => source,
        Err(why) => return common::skip(test, &format!("no bpftrace source: {why}")),
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let listed = match std::process::Command::new("git").arg("-C").arg(root).args(["ls-files", "-z"]).output()
    {
        Ok(out) if out.status.success() => out.stdout,
        Ok(out) => {
            return common::skip(test, &format!("git ls-files: {}", String::from_utf8_lossy(&out.stderr)))
        }
        Err(e) => return common::skip(test, &format!("cannot run git: {e}")),
    };
    // bpftrace's files by size: only a file of the same size is read and compared.
    fn walk(dir: &Path, by_size: &mut HashMap<u64, Vec<PathBuf>>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
            let path = entry.path();
            let meta = entry.metadata().expect("metadata");
            if meta.is_dir() {
                walk(&path, by_size);
            } else if meta.is_file() && meta.len() > 0 {
                by_size.entry(meta.len()).or_default().push(path);
            }
        }
    }
    let mut by_size = HashMap::new();
    walk(&source, &mut by_size);
    let mut copies = vec![];
    for name in listed.split(|&b| b == 0).filter(|name| !name.is_empty()) {
        let path = root.join(String::from_utf8_lossy(name).as_ref());
        // Listed but deleted in the work tree: not in the project any more.
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        let Some(candidates) = by_size.get(&meta.len()) else { continue };
        let bytes = std::fs::read(&path).expect("read a tracked file");
        for theirs in candidates {
            if std::fs::read(theirs).expect("read a bpftrace file") == bytes {
                copies.push(format!("{} = {}", path.display(), theirs.display()));
            }
        }
    }
    assert!(copies.is_empty(), "files of bpftrace's source kept in the project:\n{}", copies.join("\n"));
}
