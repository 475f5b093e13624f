//! `steadytrace manpage`: the manual page steadytrace(8) in roff. clap_mangen renders the name, synopsis,
//! description and options from `cli::Cli`; the commands, examples, environment and pointers to the
//! documentation are written here. Section 8, as bpftrace(8): a system administration command that
//! needs root (or CAP_BPF and CAP_PERFMON).

use crate::cli::Cli;
use clap::{CommandFactory, Parser};
use roff::{bold, italic, roman, Inline, Roff};
use std::io::Write;

#[derive(Parser, Debug)]
#[command(
    name = "steadytrace manpage",
    bin_name = "steadytrace manpage",
    about = "Print the manual page steadytrace(8) in roff (read it with `steadytrace manpage | man -l -`)"
)]
struct ManpageCli {}

/// Runs `steadytrace manpage` (`args` starts with `manpage`).
pub fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<i32, String> {
    ManpageCli::parse_from(args);
    std::io::stdout()
        .lock()
        .write_all(page().as_bytes())
        .map_err(|e| format!("steadytrace manpage: cannot write the page: {e}\n"))?;
    Ok(0)
}

const COMMANDS: &[(&str, &str)] = &[
    (
        "bench interval [--period TIME] [--duration TIME] [--engines LIST] [--load N] [--flap CPU[:MS]] [-f text|json] [--plot FILE.svg]",
        "Measures timer accuracy: the same period through each way of firing an interval probe, side by side, also under load and CPU hotplug (steadytrace bench interval --help).",
    ),
    (
        "completions bash|zsh|fish",
        "Prints a completion script for the shell (scripts/install puts them where each shell looks).",
    ),
    ("manpage", "Prints this page in roff."),
];

const EXAMPLES: &[(&str, &str)] = &[
    ("steadytrace -e 'BEGIN { printf(\"hello\\n\"); exit(); }'", "Print hello and exit."),
    ("steadytrace examples/hello.bt", "Run a script file."),
    (
        "steadytrace -e 'interval:s:1 { printf(\"%d\\n\", elapsed / 1000000000); }'",
        "Print the seconds elapsed, every second, through CPU hotplug.",
    ),
    (
        "steadytrace -e 'tracepoint:syscalls:sys_enter_openat { printf(\"%s %s\\n\", comm, str(args.filename)); }'",
        "Show which process opens which file.",
    ),
    ("steadytrace -e 'profile:hz:99 { @[ustack] = count(); }' -f folded -o stacks.folded", "Sample user stacks as folded lines for a flame graph."),
    ("steadytrace -l 'tracepoint:sched:*'", "List the scheduler's tracepoints."),
    ("steadytrace --info", "Say what this kernel and this process allow."),
];

const ENVIRONMENT: &[(&str, &str)] = &[
    ("BPFTRACE_PRINT_MAPS_ON_EXIT", "true or false: print the maps at exit (default true); wins over the script's config block, as in bpftrace."),
    ("BPFTRACE_MISSING_PROBES", "ignore, warn or error: what an attach point that does not exist does (default warn)."),
    ("BPFTRACE_MAX_CAT_BYTES", "The most bytes of a file that cat() prints (default 10240)."),
    ("BPFTRACE_DUMMY_TS_MAP", "bpftrace's test hook: the scalar map (@ts) whose value is the clock of every tseries()."),
    ("LIBBPF_BPF_TOKEN_PATH", "The delegated BPF filesystem to make a BPF token from, as libbpf reads it (set but empty: no token); --bpf-token wins over it."),
    ("STEADYTRACE_TRIGGER=uprobe", "Run BEGIN, END and interval probes through a uprobe on steadytrace's trigger function instead of BPF_PROG_TEST_RUN (the path of kernels before 5.10)."),
    ("STEADYTRACE_UPROBE_ATTACH=perf", "Attach uprobes as perf uprobe events instead of uprobe_multi links (the path of kernels before 6.6)."),
    ("STEADYTRACE_KPROBE_ATTACH=perf", "Attach a kprobe wildcard as one perf kprobe event per function instead of one kprobe_multi link."),
    ("STEADYTRACE_PROFILE_ENGINE=timer|perf", "Sample profile probes on a BPF timer pinned to each CPU (no perf event; Linux 6.7), or on perf events (default: the timer only where perf_event_open is refused)."),
    ("STEADYTRACE_SYSCALL_ATTACH=raw|perf", "Run tracepoint:syscalls:* on the raw_syscalls raw tracepoint, or on the classic tracepoint (default: raw only where perf_event_open is refused)."),
];

/// The whole page.
pub fn page() -> String {
    let command = Cli::command().about(
        "a bpftrace-language tracer that compiles scripts straight to BPF; probes keep firing through CPU hotplug",
    );
    let man =
        clap_mangen::Man::new(command).title("STEADYTRACE").section("8").manual("System Manager's Manual");
    let mut rendered = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = man.render_title(&mut rendered);
    let _ = man.render_name_section(&mut rendered);
    rendered.extend(synopsis_and_description().render().into_bytes());
    let _ = man.render_options_section(&mut rendered);
    rendered.extend(sections().render().into_bytes());
    // Every piece starts with the preamble that keeps apostrophes upright (two `.ds Aq` lines); the
    // first copy, at the top, is the one kept.
    let mut page = String::new();
    let mut seen_preamble = 0;
    for line in String::from_utf8_lossy(&rendered).lines() {
        if line.starts_with(".ie \\n(.g .ds Aq ") || line.starts_with(".el .ds Aq ") {
            seen_preamble += 1;
            if seen_preamble > 2 {
                continue;
            }
        }
        page.push_str(line);
        page.push('\n');
    }
    page
}

/// Written here rather than by clap_mangen, whose synopsis lists every option without its value.
fn synopsis_and_description() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["SYNOPSIS"]);
    let forms: [&[Inline]; 5] = [
        &[
            bold("steadytrace"),
            roman(" ["),
            italic("OPTIONS"),
            roman("] "),
            italic("FILE"),
            roman(" ["),
            italic("PARAM"),
            roman("...]"),
        ],
        &[
            bold("steadytrace"),
            roman(" ["),
            italic("OPTIONS"),
            roman("] "),
            bold("-e"),
            roman(" "),
            italic("PROGRAM"),
            roman(" ["),
            italic("PARAM"),
            roman("...]"),
        ],
        &[bold("steadytrace -l"), roman(" ["), bold("-v"), roman("] ["), italic("PATTERN"), roman("]")],
        &[bold("steadytrace --info"), roman(" ["), bold("-f json"), roman("]")],
        &[
            bold("steadytrace"),
            roman(" "),
            bold("bench"),
            roman("|"),
            bold("completions"),
            roman("|"),
            bold("manpage"),
            roman(" ..."),
        ],
    ];
    for (i, form) in forms.iter().enumerate() {
        if i > 0 {
            roff.control("br", []);
        }
        roff.text(form.to_vec());
    }
    roff.control("SH", ["DESCRIPTION"]);
    roff.text([roman(
        "steadytrace runs scripts in the bpftrace language: it compiles them straight to BPF programs (no LLVM, no \
         clang), loads and attaches them, and prints their output as bpftrace prints it, as text, JSON lines or \
         folded stacks. BEGIN, END and interval probes are fired by steadytrace's own timer thread, pinned to no \
         CPU, and need no perf_event_open; profile, software and hardware probes reopen their events on a CPU \
         that comes back online, so every probe keeps firing through CPU hotplug.",
    )]);
    roff.control("PP", []);
    roff.text([roman(
        "It needs root, or CAP_BPF and CAP_PERFMON; some probe types work without perf_event_open (containers \
         whose seccomp profile denies it). The first line of a script file may be ",
    ), italic("#!/usr/bin/env steadytrace"), roman(".")]);
    roff
}

fn sections() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["COMMANDS"]);
    roff.text([roman("A first argument naming one of these runs it instead of a script; a script file of that name runs as "), italic("./NAME"), roman(".")]);
    for (synopsis, what) in COMMANDS {
        labelled(&mut roff, bold(format!("steadytrace {synopsis}")), what);
    }
    roff.control("SH", ["EXAMPLES"]);
    for (command, what) in EXAMPLES {
        labelled(&mut roff, bold(*command), what);
    }
    roff.control("SH", ["ENVIRONMENT"]);
    for (name, what) in ENVIRONMENT {
        labelled(&mut roff, bold(*name), what);
    }
    roff.control("SH", ["EXIT STATUS"]);
    roff.text([roman("The code given to exit() in the script, 0 when it ends otherwise, 1 when it cannot run (an error in the script, a probe the kernel refuses), 2 for a bad command line.")]);
    roff.control("SH", ["SEE ALSO"]);
    roff.text([
        bold("bpftrace"),
        roman("(8). The documentation, in the source tree's docs/: LANGUAGE.md (the language and where it differs from bpftrace), INSTALL.md (hosts, containers, Kubernetes), CONTAINERS.md (capabilities and seccomp), HOTPLUG.md, BENCHMARKS.md."),
    ]);
    roff
}

/// A `.TP` paragraph: `label` on its own line, `text` indented below.
fn labelled(roff: &mut Roff, label: Inline, text: &str) {
    roff.control("TP", []);
    roff.text([label]);
    roff.text([roman(text)]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_has_every_section_in_order() {
        let page = page();
        let order: Vec<usize> = [
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "OPTIONS",
            "COMMANDS",
            "EXAMPLES",
            "ENVIRONMENT",
            "\"SEE ALSO\"",
        ]
        .iter()
        .map(|s| page.find(&format!(".SH {s}\n")).unwrap_or_else(|| panic!("no {s} in\n{page}")))
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
        assert!(page.contains("\n.TH STEADYTRACE 8 "), "{page}");
    }
}
