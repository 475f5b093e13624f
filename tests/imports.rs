//! `import "path";`: each test writes a script and the files it imports into a directory of its own and runs
//! the tracer there, with `--dry-run` (no kernel, no root) except for the one that runs a script.

mod common;

use common::*;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

/// A directory of files for one test, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(test: &str) -> Dir {
        let path = std::env::temp_dir().join(format!("steadytrace-imports-{}-{test}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        let dir = Dir(path);
        dir.mkdir("");
        dir
    }

    /// Makes `name`, writable by its owner only (whatever the umask): imports refuse world-writable ones.
    fn mkdir(&self, name: &str) -> PathBuf {
        let path = self.0.join(name);
        fs::create_dir_all(&path).expect("create a directory");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
        path
    }

    fn write(&self, name: &str, text: &str) -> &Dir {
        if let Some(parent) = Path::new(name).parent() {
            self.mkdir(&parent.to_string_lossy());
        }
        fs::write(self.0.join(name), text).expect("write a file");
        self
    }

    /// The tracer with `args`, run in this directory, within a time limit (an import cycle must end).
    fn run(&self, args: &[&str]) -> Output {
        let child = Reaped::spawn(
            tracer(args)
                .current_dir(&self.0)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped()),
        )
        .expect("spawn the tracer");
        wait_output(child, Duration::from_secs(60))
    }

    /// `--dry-run main.bt`, which must fail: its stderr.
    fn error(&self) -> String {
        let output = self.run(&["--dry-run", "main.bt"]);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        stderr(&output)
    }

    /// `--dry-run main.bt`, which must succeed.
    fn compiles(&self) {
        let output = self.run(&["--dry-run", "main.bt"]);
        assert!(output.status.success(), "{}", stderr(&output));
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn an_imported_macro_probe_and_map_declaration_join_the_script() {
    let dir = Dir::new("merge");
    // The library's struct holds the script's by value: a file sees the C definitions of those read before it.
    dir.write(
        "lib/helpers.bt",
        "struct outer { struct inner i; long y; };\nmacro twice(x) { x * 2 }\nlet @small = hash(2);\nEND { printf(\"end %d\\n\", from_main(1)); }\n",
    )
    .write(
        "main.bt",
        "struct inner { int x; };\nimport \"lib/helpers.bt\";\nmacro from_main(x) { x + 1 }\nBEGIN { @small[1] = twice(sizeof(struct outer)); }\n",
    );
    dir.compiles();
    // Without the import, nothing the library defines is known.
    dir.write("main.bt", "BEGIN { @small[1] = twice(21); }\n");
    assert!(dir.error().contains("main.bt:1:21: ERROR: "), "{}", dir.error());
}

#[test]
fn nested_duplicate_and_circular_imports_are_read_once() {
    let dir = Dir::new("once");
    // A file read twice would define its macro twice, an error; a cycle followed would never end.
    dir.write("a.bt", "import \"sub/c.bt\";\nmacro from_a() { 1 }\n")
        .write("sub/c.bt", "import \"../a.bt\";\nimport \"../main.bt\";\nmacro from_c() { 3 }\n")
        .write("main.bt", "import \"a.bt\";\nimport \"./a.bt\";\nimport \"sub/../a.bt\";\nBEGIN { @ = from_a() + from_c(); }\n");
    dir.compiles();
}

#[test]
fn a_directory_imports_its_bt_files_in_name_order_and_nothing_else() {
    let dir = Dir::new("directory");
    dir.write("lib/b.bt", "macro from_b() { 2 }\n")
        .write("lib/a.bt", "macro from_a() { 1 }\n")
        .write("lib/notes.txt", "not a script\n")
        .write("lib/nested/broken.bt", "this is not read\n")
        .write("main.bt", "import \"lib\";\nBEGIN { @ = from_a() + from_b(); }\n");
    dir.compiles();
    // Two macros of one name: the second one read, `b.bt`'s, is the error.
    dir.write("lib/a.bt", "macro same() { 1 }\n").write("lib/b.bt", "macro same() { 2 }\n");
    dir.write("main.bt", "import \"lib\";\nBEGIN { @ = same(); }\n");
    let error = dir.error();
    assert!(error.starts_with("lib/b.bt:1:1: ERROR: a second macro `same` with 0 parameters\n"), "{error}");
}

#[test]
fn a_missing_file_is_an_error_at_the_import() {
    let dir = Dir::new("missing");
    dir.write("main.bt", "import \"nowhere.bt\";\nBEGIN { }\n");
    assert_eq!(
        dir.error(),
        "main.bt:1:8: ERROR: cannot import `nowhere.bt`: No such file or directory (os error 2)\nimport \"nowhere.bt\";\n       ^^^^^^^^^^^^\n"
    );
}

#[test]
fn a_world_writable_directory_is_refused() {
    let dir = Dir::new("writable");
    dir.write("open/lib.bt", "macro m() { 1 }\n")
        .write("main.bt", "import \"open/lib.bt\";\nBEGIN { @ = m(); }\n");
    dir.compiles();
    fs::set_permissions(dir.0.join("open"), fs::Permissions::from_mode(0o777)).expect("chmod");
    let error = dir.error();
    assert!(
        error.starts_with(
            "main.bt:1:8: ERROR: refusing to import `open/lib.bt`: `open` is writable by every user\n"
        ),
        "{error}"
    );
}

#[test]
fn an_imported_file_may_not_have_a_config_block() {
    let dir = Dir::new("config");
    dir.write("lib.bt", "config = { max_strlen = 64 }\nmacro m() { 1 }\n")
        .write("main.bt", "import \"lib.bt\";\nBEGIN { @ = m(); }\n");
    assert!(
        dir.error().starts_with("lib.bt:1:1: ERROR: an imported file cannot have a config block\n"),
        "{}",
        dir.error()
    );
}

#[test]
fn c_sources_headers_and_bpftrace_s_stdlib_are_refused() {
    let dir = Dir::new("c");
    dir.write("prog.bpf.c", "int f(void) { return 1; }\n")
        .write("main.bt", "import \"prog.bpf.c\";\nBEGIN { }\n");
    let error = dir.error();
    assert!(
        error.starts_with("main.bt:1:8: ERROR: cannot import `prog.bpf.c`: BPF C source is compiled by clang in bpftrace, and steadytrace does without a C compiler\nimport \"prog.bpf.c\";\n       ^^^^^^^^^^^^\n"),
        "{error}"
    );
    dir.write("types.h", "struct s { int a; };\n").write("main.bt", "import \"types.h\";\nBEGIN { }\n");
    let error = dir.error();
    assert!(error.contains("cannot import `types.h`: bpftrace reads a C header with clang"), "{error}");
    assert!(error.contains("help: define the types the script needs in the script"), "{error}");
    dir.write("main.bt", "import \"stdlib/test\";\nBEGIN { }\n");
    let error = dir.error();
    assert!(error.contains("`stdlib/test` is part of bpftrace's own standard library"), "{error}");
}

#[test]
fn an_error_in_an_imported_file_names_that_file() {
    let dir = Dir::new("error");
    dir.write("lib/bad.bt", "macro fine() { 1 }\n\nBEGIN {\n  @x = prinf(\"x\");\n}\n")
        .write("main.bt", "import \"lib/bad.bt\";\nBEGIN { @ = fine(); }\n");
    let error = dir.error();
    assert!(
        error.starts_with(
            "lib/bad.bt:4:8: ERROR: unknown function `prinf`\n  @x = prinf(\"x\");\n       ^^^^^\n"
        ),
        "{error}"
    );
    // A syntax error, and a program given with -e: imports are relative to the current directory.
    dir.write("lib/bad.bt", "BEGIN {\n  @x = ;\n}\n");
    let output = dir.run(&["--dry-run", "-e", "import \"lib/bad.bt\"; BEGIN { }"]);
    assert!(stderr(&output).starts_with("lib/bad.bt:2:8: ERROR: "), "{}", stderr(&output));
}

/// The one test that loads programs: the imported macro prints the size of the imported struct, the imported END
/// runs, and the imported declaration makes `@small` a map of two entries.
#[test]
fn an_imported_macro_probe_and_map_declaration_run() {
    if !can_trace("an_imported_macro_probe_and_map_declaration_run") {
        return;
    }
    let dir = Dir::new("run");
    dir.write(
        "lib/greet.bt",
        "struct pair { int a; long b; };\nmacro greet(n) { printf(\"hello from lib %d\\n\", n * 2) }\nlet @small = hash(2);\nEND { printf(\"end from lib\\n\"); }\n",
    )
    .write(
        "main.bt",
        "import \"lib/greet.bt\";\nBEGIN { greet(sizeof(struct pair)); @small[1] = 1; @small[2] = 2; @small[3] = 3; exit(); }\n",
    );
    let output = dir.run(&["-q", "main.bt"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "hello from lib 32\nend from lib\n\n\n@small[1]: 1\n@small[2]: 2\n");
    assert!(stderr(&output).contains("WARNING: Map full; can't update element"), "{}", stderr(&output));
}
