//! A mutation fuzzer for the front end (lexer, preprocessor, parser, type checker, code generator): the
//! path `--dry-run` takes. Its seeds are the scripts of tests/scripts and tests/errors, bpftrace's tools as
//! scripts/bpftrace-tools fetches them from Debian's newest bpftrace package, and, where scripts/bpftrace-source
//! finds bpftrace's source (`STEADYTRACE_BPFTRACE_SOURCE`, else ../shared/upstream/bpftrace, else a clone), its
//! runtime cases (each `PROG` and `-e '...'` of tests/runtime), tools/*.bt and tests/self/*.bt; what cannot be had
//! is said and left out, and the seeds taken from each place are counted on stderr. It mutates them with a seeded generator (bytes, tokens of the language, splices of two
//! scripts, repeated and deleted runs; `let` declarations at statement starts, calls with no argument or
//! one, `?:` with calls in its branches, statements and expressions nested in `if`, `unroll`, `for`, blocks
//! and parentheses) and compiles each result in-process.
//!
//! A crash is a panic (caught and reported), a diagnostic saying "internal error", or a process abort
//! such as a stack overflow: before each input the fuzzer writes it to `OUT/current.bt`, so an abort leaves
//! it behind. The first input of each distinct panic or internal error is saved as `OUT/crash-N.bt`, its
//! message as `OUT/crash-N.txt`. An input taking more than `--slow-ms` (2000) twice is slow: saved as
//! `OUT/slow-N.bt`, and the run goes on; the slowest input is `OUT/slowest.bt`. An input still running after
//! `--hang-ms` (60000) is a hang: a watchdog saves it to `OUT/hang.bt` and exits with 2.
//! Exit status 0: no crash and no hang; 1: crashes.
//!
//! `cargo run --profile fuzz --example fuzz -- --seconds 1800 --seed 1 --out /tmp/fuzz`

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use steadytrace::lang::Source;
use steadytrace::{codegen, probes};

/// Pieces of the language that mutations insert: they reach the deeper stages far more often than bytes.
const TOKENS: &[&str] = &[
    "BEGIN",
    "END",
    "interval:ms:10",
    "profile:hz:99",
    "tracepoint:syscalls:sys_enter_openat",
    "rawtracepoint:sched_switch",
    "uprobe:/bin/sh:main",
    "uprobe:\"/bin/s h\":\"ma,in\"",
    "iter:task:../pin",
    "\"",
    "kprobe:do_nanosleep",
    "software:cpu-clock:1000",
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    ";",
    ",",
    ":",
    "?",
    "/",
    "*",
    "+",
    "-",
    "%",
    "<<",
    ">>",
    "&&",
    "||",
    "!",
    "~",
    "==",
    "!=",
    "<=",
    ">=",
    "=",
    "+=",
    "++",
    "--",
    ".",
    "->",
    "$x",
    "$1",
    "@",
    "@m",
    "@m[1]",
    "@m[comm, pid]",
    "if",
    "else",
    "while",
    "for",
    "unroll(100)",
    "break",
    "continue",
    "return",
    "let",
    "exit()",
    "if comptime (1 < $1) { fail(\"x %d\", 1); } else { exit(); }",
    "exit(1)",
    "printf(\"%d %s\\n\", pid, comm)",
    "print(@m)",
    "clear(@m)",
    "delete(@m[1])",
    "count()",
    "sum(1)",
    "hist(pid)",
    "lhist(pid, 0, 100, 10)",
    "stats(1)",
    "avg(1)",
    "min(1)",
    "max(1)",
    "str(arg0)",
    "ksym(1)",
    "usym(1)",
    "kstack",
    "ustack",
    "args",
    "args.filename",
    "arg0",
    "retval",
    "func",
    "probe",
    "cpu",
    "pid",
    "tid",
    "comm",
    "nsecs",
    "elapsed",
    "curtask",
    "cpid",
    "has_key(@m, 1)",
    "len(@m)",
    "join(arg0)",
    "(struct task_struct *)",
    "strcontains(comm, \"a\")",
    "\"str\"",
    "0",
    "1",
    "-1",
    "0xffffffffffffffff",
    "18446744073709551616",
    "'c'",
    "#ifdef BPFTRACE_HAVE_BTF",
    "#endif",
    "#include <linux/sched.h>",
    "é",
    "\n",
    " ",
];

/// Calls that mutations insert with no argument or one: arity and type errors, and calls that give no value.
const CALLS: &[&str] = &[
    "print",
    "printf",
    "str",
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "stats",
    "hist",
    "lhist",
    "delete",
    "clear",
    "zero",
    "exit",
    "ksym",
    "usym",
    "kaddr",
    "uaddr",
    "ntop",
    "buf",
    "join",
    "reg",
    "cgroupid",
    "cat",
    "signal",
    "strncmp",
    "strcontains",
    "has_key",
    "len",
    "path",
    "macaddr",
    "bswap",
    "strftime",
    "pton",
    "offsetof",
    "sizeof",
    "time",
    "kptr",
    "uptr",
    "errorf",
    "warnf",
    "strerror",
    "typeof",
    "nsecs",
    "kstack",
    "ustack",
    "strlen",
    "system",
];

/// Expressions for `let` initialisers, call arguments and `?:` conditions.
const EXPRS: &[&str] = &[
    "0",
    "1",
    "-1",
    "true",
    "\"s\"",
    "comm",
    "pid",
    "arg0",
    "$x",
    "$v",
    "$1",
    "@m",
    "@m[1]",
    "(1, \"a\")",
    "kstack",
    "curtask",
    "args",
    "str(arg0)",
    "nsecs",
    "pid > 1",
];

/// The types a `let` declares, none for an inferred one.
const TYPES: &[&str] = &["", ": uint8", ": int64", ": string", ": int32[4]", ": typeof(comm)"];

/// The wrappers of deep nesting: statements, then expressions.
const STATEMENT_NESTS: &[(&str, &str)] = &[
    ("if 1 { ", " }"),
    ("if pid > 1 { ", " } else { exit(); }"),
    ("unroll(3) { ", " }"),
    ("for $i : 0..3 { ", " }"),
    ("while $x < 2 { $x++; ", " }"),
    ("{ ", " }"),
];
const EXPRESSION_NESTS: &[(&str, &str)] = &[("(", ")"), ("(1 ? ", " : 0)"), ("(uint64)(", ")"), ("!(", ")")];

/// xorshift64*: small, seeded, and the same sequence on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// A random place after one of `after` (after `{` or `;`: a statement's start; after `(`, `,` or `=`: an
/// expression's), or anywhere if there is none.
fn place(rng: &mut Rng, text: &[u8], after: &[u8]) -> usize {
    let places: Vec<usize> =
        (0..text.len()).filter(|&i| after.contains(&text[i]) && text.get(i + 1) != Some(&b'=')).collect();
    if places.is_empty() {
        rng.below(text.len() + 1)
    } else {
        places[rng.below(places.len())] + 1
    }
}

/// Where the run of text from `start` ends: at one of `stops`, or at a bracket it did not open (strings and
/// brackets are skipped).
fn run_end(text: &[u8], start: usize, stops: &[u8]) -> usize {
    let (mut depth, mut in_string) = (0usize, false);
    for (i, &b) in text.iter().enumerate().skip(start) {
        match b {
            b'"' => in_string = !in_string,
            _ if in_string => {}
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' if depth == 0 => return i,
            b')' | b']' | b'}' => depth -= 1,
            _ if depth == 0 && stops.contains(&b) => return i,
            _ => {}
        }
    }
    text.len()
}

/// A call with no argument or one.
fn short_call(rng: &mut Rng) -> String {
    let name = rng.pick(CALLS);
    if rng.below(2) == 0 {
        format!("{name}()")
    } else {
        format!("{name}({})", rng.pick(EXPRS))
    }
}

/// Inserts `text` as a statement, or in place of an expression.
fn insert_statement_or_expression(rng: &mut Rng, out: &mut Vec<u8>, text: &str) {
    if rng.below(2) == 0 {
        let at = place(rng, out, b"{;");
        out.splice(at..at, format!(" {text};").bytes());
    } else {
        let at = place(rng, out, b"(,=");
        let end = run_end(out, at, b",;");
        out.splice(at..end, format!("({text})").bytes());
    }
}

/// One mutation of `input`, using `corpus` for splices.
fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(out.len() + 1);
        match rng.below(11) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 | 2 => {
                let token = TOKENS[rng.below(TOKENS.len())].as_bytes();
                out.splice(at..at, token.iter().copied());
            }
            3 if !out.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(out.len());
                out.drain(at.min(end)..end);
            }
            4 => {
                let other = &corpus[rng.below(corpus.len())];
                let from = rng.below(other.len());
                let to = (from + rng.below(200)).min(other.len());
                out.splice(at..at, other[from..to].iter().copied());
            }
            5 if !out.is_empty() => {
                // A run repeated: deep nesting and long chains.
                let end = (at + 1 + rng.below(12)).min(out.len());
                let run = out[at.min(end)..end].to_vec();
                for _ in 0..rng.below(300) {
                    out.splice(at..at, run.iter().copied());
                }
            }
            6 => {
                // A declaration at a statement's start, with or without a type and a value.
                let at = place(rng, &out, b"{;");
                let (name, ty) = (rng.pick(&["$v", "$x", "$i"]), rng.pick(TYPES));
                let declaration = match rng.below(2) {
                    0 => format!(" let {name}{ty};"),
                    _ => format!(" let {name}{ty} = {};", rng.pick(EXPRS)),
                };
                out.splice(at..at, declaration.bytes());
            }
            7 => {
                let call = short_call(rng);
                insert_statement_or_expression(rng, &mut out, &call);
            }
            8 => {
                let ternary = format!("{} ? {} : {}", rng.pick(EXPRS), short_call(rng), short_call(rng));
                insert_statement_or_expression(rng, &mut out, &ternary);
            }
            9 => {
                // Deep nesting: a statement (or an expression) wrapped a few times, now and then past the
                // parser's limit of 100.
                let (start, end, (open, close)) = if rng.below(2) == 0 {
                    let start = place(rng, &out, b"{;");
                    let end = run_end(&out, start, b";");
                    let end = if out.get(end) == Some(&b';') { end + 1 } else { end };
                    (start, end, rng.pick(STATEMENT_NESTS))
                } else {
                    let start = place(rng, &out, b"(,=");
                    (start, run_end(&out, start, b",;"), rng.pick(EXPRESSION_NESTS))
                };
                let depth = if rng.below(8) == 0 { 1 + rng.below(120) } else { 1 + rng.below(6) };
                let inner = String::from_utf8_lossy(&out[start..end]).into_owned();
                let nested = format!("{}{inner}{}", open.repeat(depth), close.repeat(depth));
                out.splice(start..end, nested.bytes());
            }
            _ => {
                let token = TOKENS[rng.below(TOKENS.len())].as_bytes();
                let end = (at + rng.below(8)).min(out.len());
                out.splice(at..end, token.iter().copied());
            }
        }
    }
    out.truncate(64 * 1024);
    out
}

/// The files in `dir` (not below it) whose names end in `suffix`, sorted.
fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else { return vec![] };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.is_file() && p.to_string_lossy().ends_with(suffix))
        .collect();
    paths.sort();
    paths
}

/// The programs of a file of bpftrace's runtime suite: each `PROG` (with its continuation lines, indented
/// past `PROG `) and each `-e '...'` of a `RUN` line.
fn suite_programs(text: &str) -> Vec<String> {
    let mut programs: Vec<String> = vec![];
    let mut in_prog = false;
    for line in text.lines() {
        if let (true, Some(rest), Some(prog)) = (in_prog, line.strip_prefix("     "), programs.last_mut()) {
            prog.push('\n');
            prog.push_str(rest);
            continue;
        }
        in_prog = false;
        if let Some(prog) = line.strip_prefix("PROG ") {
            programs.push(prog.to_string());
            in_prog = true;
        } else if line.starts_with("RUN ") {
            let mut rest = line;
            while let Some(at) = rest.find("-e '") {
                let program = &rest[at + 4..];
                let Some(end) = program.find('\'') else { break };
                programs.push(program[..end].to_string());
                rest = &program[end + 1..];
            }
        }
    }
    programs
}

/// The seeds: the project's scripts and error cases, and bpftrace's tools and source where they were found. Says
/// how many each place gave.
fn corpus(root: &Path, tools: Option<&Path>, bpftrace_source: Option<&Path>) -> Vec<Vec<u8>> {
    let mut scripts = vec![root.join("tests/scripts"), root.join("tests/errors")];
    scripts.extend(tools.map(Path::to_path_buf));
    let mut suites = vec![];
    if let Some(source) = bpftrace_source {
        scripts.extend([source.join("tools"), source.join("tests/self")]);
        suites.push(source.join("tests/runtime"));
    }
    let mut seeds: Vec<Vec<u8>> = vec![];
    let mut taken = vec![];
    for dir in &scripts {
        let found: Vec<Vec<u8>> = files(dir, ".bt").into_iter().filter_map(|p| fs::read(p).ok()).collect();
        taken.push(format!("{} scripts of {}", found.len(), dir.display()));
        seeds.extend(found);
    }
    for dir in &suites {
        let before = seeds.len();
        for path in files(dir, "") {
            let text = fs::read_to_string(path).unwrap_or_default();
            seeds.extend(suite_programs(&text).into_iter().map(String::into_bytes));
        }
        taken.push(format!("{} programs of {}", seeds.len() - before, dir.display()));
    }
    eprintln!("fuzz: seeds: {}", taken.join(", "));
    // The same program in two places (a tool in Debian's package and in the source) is one seed.
    seeds.sort();
    seeds.dedup();
    seeds
}

/// The directory a fetching script of scripts/ (bpftrace-tools, bpftrace-source) prints; `None`, said on stderr,
/// when it cannot.
fn fetched(root: &Path, script: &str) -> Option<PathBuf> {
    let output = std::process::Command::new(root.join("scripts").join(script)).output();
    match output {
        Ok(output) if output.status.success() => {
            Some(PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()))
        }
        Ok(output) => {
            eprintln!("fuzz: without {script}: {}", String::from_utf8_lossy(&output.stderr).trim());
            None
        }
        Err(e) => {
            eprintln!("fuzz: without {script}: scripts/{script}: {e}");
            None
        }
    }
}

struct Args {
    seconds: u64,
    seed: u64,
    out: PathBuf,
    slow_ms: u64,
    hang_ms: u64,
}

fn args() -> Args {
    let out = std::env::temp_dir().join("steadytrace-fuzz");
    let mut args = Args { seconds: 10, seed: 1, out, slow_ms: 2000, hang_ms: 60_000 };
    let mut words = std::env::args().skip(1);
    while let Some(flag) = words.next() {
        let value = words.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--seconds" => args.seconds = value.parse().expect("--seconds N"),
            "--seed" => args.seed = value.parse().expect("--seed N"),
            "--out" => args.out = PathBuf::from(value),
            "--slow-ms" => args.slow_ms = value.parse().expect("--slow-ms N"),
            "--hang-ms" => args.hang_ms = value.parse().expect("--hang-ms N"),
            _ => panic!("unknown flag {flag}: --seconds N --seed N --out DIR --slow-ms N --hang-ms N"),
        }
    }
    args
}

/// The message of the last panic, kept by the panic hook (`catch_unwind` gives only its payload).
static PANIC: Mutex<String> = Mutex::new(String::new());

fn main() {
    let args = args();
    fs::create_dir_all(&args.out).expect("the output directory");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tools = fetched(root, "bpftrace-tools");
    let bpftrace_source = fetched(root, "bpftrace-source");
    let corpus = corpus(root, tools.as_deref(), bpftrace_source.as_deref());
    assert!(!corpus.is_empty(), "no corpus scripts found");
    eprintln!("fuzz: {} seeds", corpus.len());
    // The compiler's panics are caught below; their messages go with the saved input, not to the log.
    std::panic::set_hook(Box::new(|info| {
        *PANIC.lock().unwrap_or_else(|e| e.into_inner()) = info.to_string();
    }));

    // The watchdog: the start of the input under way (ms since `epoch`, 0 between inputs).
    let epoch = Instant::now();
    let started = Arc::new(AtomicU64::new(0));
    let watched = started.clone();
    let hang_file = args.out.join("hang.bt");
    let current_file = args.out.join("current.bt");
    let hang_ms = args.hang_ms;
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(100));
        let since = watched.load(Ordering::SeqCst);
        let now = epoch.elapsed().as_millis() as u64;
        if since != 0 && now - since > hang_ms {
            let _ = fs::copy(&current_file, &hang_file);
            eprintln!("fuzz: HANG: an input took more than {hang_ms} ms: saved as {}", hang_file.display());
            std::process::exit(2);
        }
    });

    // Attach points missing here are skipped without a warning each time a mutation names one.
    let probe_options =
        probes::Options { missing_probes: probes::MissingProbes::Ignore, ..Default::default() };
    let options = codegen::Options {
        start_ns: 0,
        ncpus: 2,
        possible_cpus: 2,
        filter_pid: None,
        cpid: None,
        allow_unsafe: false,
        pid_namespace: None,
        namespace_only: false,
        read_warnings: false,
    };
    // A number and a word, so that `$1` and `str($2)` compile.
    let params = ["7".to_string(), "word".to_string()];
    // The running kernel's features, probed once for every input.
    let features = std::sync::Arc::new(steadytrace::kernel::features::from_env(&[]).unwrap_or_default());
    let compile = |text: &str| {
        let source = Source { name: "fuzz.bt", text };
        let begin = Instant::now();
        started.store(epoch.elapsed().as_millis().max(1) as u64, Ordering::SeqCst);
        let result = std::panic::catch_unwind(|| {
            steadytrace::pipeline::compile(
                &source,
                &params,
                &Default::default(),
                &features,
                &probe_options,
                &options,
            )
        });
        started.store(0, Ordering::SeqCst);
        (result, begin.elapsed())
    };

    let mut rng = Rng(args.seed.max(1));
    let deadline = epoch + Duration::from_secs(args.seconds);
    let (mut runs, mut compiled, mut panics, mut internal, mut slow) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut slowest = Duration::ZERO;
    // Each distinct panic or internal error: how often, and the first input saved for it.
    let mut findings: BTreeMap<String, (u64, PathBuf)> = BTreeMap::new();
    let mut interesting: Vec<Vec<u8>> = vec![];
    while Instant::now() < deadline {
        let base = if !interesting.is_empty() && rng.below(3) == 0 {
            &interesting[rng.below(interesting.len())]
        } else {
            &corpus[rng.below(corpus.len())]
        };
        let input = mutate(&mut rng, base, &corpus);
        let text = String::from_utf8_lossy(&input).into_owned();
        fs::write(args.out.join("current.bt"), &text).expect("write current.bt");
        let (result, mut took) = compile(&text);
        runs += 1;
        if took.as_millis() > args.slow_ms as u128 {
            // Once more: a CPU taken by others for a while does not make an input slow.
            took = took.min(compile(&text).1);
            if took.as_millis() > args.slow_ms as u128 {
                slow += 1;
                let path = args.out.join(format!("slow-{slow}.bt"));
                fs::write(&path, &text).expect("write the slow input");
                eprintln!("fuzz: SLOW: {} ms: saved as {}", took.as_millis(), path.display());
            }
        }
        if took > slowest {
            slowest = took;
            fs::write(args.out.join("slowest.bt"), &text).expect("write slowest.bt");
        }
        let (finding, message) = match result {
            Ok(Ok(_)) => {
                compiled += 1;
                // Scripts that compile are the best seeds for the next mutations.
                if interesting.len() < 4096 {
                    interesting.push(input);
                }
                continue;
            }
            // A finding is told apart by its message without the place in the input: the words after
            // "internal error", or where the compiler panicked.
            Ok(Err(message)) if message.contains("internal error") => {
                internal += 1;
                let line = message.lines().find(|l| l.contains("internal error")).unwrap_or_default();
                (line[line.find("internal error").unwrap_or(0)..].to_string(), message)
            }
            Ok(Err(_)) => continue,
            Err(_) => {
                panics += 1;
                let message = std::mem::take(&mut *PANIC.lock().unwrap_or_else(|e| e.into_inner()));
                (message.lines().next().unwrap_or("a panic").trim_end_matches(':').to_string(), message)
            }
        };
        let path = args.out.join(format!("crash-{}.bt", findings.len() + 1));
        let (count, _) = findings.entry(finding.clone()).or_insert_with(|| {
            eprintln!("fuzz: CRASH: {finding}: saved as {}", path.display());
            fs::write(&path, &text).expect("write the crash input");
            fs::write(path.with_extension("txt"), &message).expect("write the crash message");
            (0, path.clone())
        });
        *count += 1;
    }
    let _ = fs::remove_file(args.out.join("current.bt"));
    for (finding, (count, path)) in &findings {
        println!("fuzz: {count} x {} ({finding})", path.display());
    }
    let crashes = panics + internal;
    println!(
        "fuzz: seed {}: {runs} inputs in {} s, {compiled} compiled, {crashes} crashes ({panics} panics, \
         {internal} internal errors), {slow} over {} ms, 0 hangs, slowest {} ms",
        args.seed,
        args.seconds,
        args.slow_ms,
        slowest.as_millis()
    );
    std::process::exit(if crashes == 0 { 0 } else { 1 });
}
