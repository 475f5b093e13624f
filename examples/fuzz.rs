//! A mutation fuzzer for the front end (lexer, preprocessor, parser, type checker, code generator): the
//! path `--dry-run` takes. It starts from the scripts of tests/scripts and tests/errors, mutates them
//! (bytes, tokens of the language, splices of two scripts, repeated and deleted runs) with a seeded
//! generator, and compiles each result in-process.
//!
//! A crash is a panic (caught and reported) or a process abort such as a stack overflow: before each
//! input the fuzzer writes it to `OUT/current.bt`, so an abort leaves it behind. A hang is an input
//! that takes longer than `--hang-ms` (5000): a watchdog saves it to `OUT/hang.bt` and exits with 2.
//! Exit status 0: no crash and no hang; 1: crashes (saved as `OUT/crash-N.bt`).
//!
//! `cargo run --profile fuzz --example fuzz -- --seconds 1800 --seed 1 --out /tmp/fuzz`

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
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
}

/// One mutation of `input`, using `corpus` for splices.
fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(out.len() + 1);
        match rng.below(7) {
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

fn corpus(root: &Path) -> Vec<Vec<u8>> {
    let mut scripts = vec![];
    for dir in ["tests/scripts", "tests/errors"] {
        let Ok(entries) = fs::read_dir(root.join(dir)) else { continue };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
        paths.sort();
        scripts.extend(
            paths
                .iter()
                .filter(|p| p.extension().is_some_and(|e| e == "bt"))
                .filter_map(|p| fs::read(p).ok()),
        );
    }
    scripts
}

struct Args {
    seconds: u64,
    seed: u64,
    out: PathBuf,
    hang_ms: u64,
}

fn args() -> Args {
    let mut args =
        Args { seconds: 10, seed: 1, out: std::env::temp_dir().join("steadytrace-fuzz"), hang_ms: 5000 };
    let mut words = std::env::args().skip(1);
    while let Some(flag) = words.next() {
        let value = words.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--seconds" => args.seconds = value.parse().expect("--seconds N"),
            "--seed" => args.seed = value.parse().expect("--seed N"),
            "--out" => args.out = PathBuf::from(value),
            "--hang-ms" => args.hang_ms = value.parse().expect("--hang-ms N"),
            _ => panic!("unknown flag {flag}: --seconds N --seed N --out DIR --hang-ms N"),
        }
    }
    args
}

fn main() {
    let args = args();
    fs::create_dir_all(&args.out).expect("the output directory");
    let corpus = corpus(Path::new(env!("CARGO_MANIFEST_DIR")));
    assert!(!corpus.is_empty(), "no corpus scripts found");
    // The compiler's own panics are caught below; keep their messages out of the log.
    std::panic::set_hook(Box::new(|_| {}));

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
    };
    let mut rng = Rng(args.seed.max(1));
    let deadline = epoch + Duration::from_secs(args.seconds);
    let (mut runs, mut compiled, mut crashes, mut slowest) = (0u64, 0u64, 0u64, Duration::ZERO);
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
        let source = Source { name: "fuzz.bt", text: &text };
        // A number and a word, so that `$1` and `str($2)` compile.
        let params = ["7".to_string(), "word".to_string()];
        let begin = Instant::now();
        started.store(epoch.elapsed().as_millis().max(1) as u64, Ordering::SeqCst);
        let result = std::panic::catch_unwind(|| {
            steadytrace::pipeline::compile(&source, &params, &probe_options, &options)
        });
        started.store(0, Ordering::SeqCst);
        slowest = slowest.max(begin.elapsed());
        runs += 1;
        match result {
            Ok(Ok(_)) => {
                compiled += 1;
                // Scripts that compile are the best seeds for the next mutations.
                if interesting.len() < 4096 {
                    interesting.push(input);
                }
            }
            Ok(Err(message)) if !message.contains("the compiler failed") => {}
            _ => {
                crashes += 1;
                let path = args.out.join(format!("crash-{crashes}.bt"));
                fs::write(&path, &text).expect("write the crash input");
                eprintln!("fuzz: CRASH: saved as {}", path.display());
            }
        }
    }
    let _ = fs::remove_file(args.out.join("current.bt"));
    println!(
        "fuzz: seed {}: {runs} inputs in {} s, {compiled} compiled, {crashes} crashes, 0 hangs, slowest {} ms",
        args.seed,
        args.seconds,
        slowest.as_millis()
    );
    std::process::exit(if crashes == 0 { 0 } else { 1 });
}
