//! Output records: what a program sends through the ring buffer, and how userspace reads it back.
//! Each record starts with a 64-bit id naming its kind in the script's record table; formats and
//! anything else known at compile time stay in userspace.

use crate::lang::{Diagnostic, Span};
use crate::sema::format::Piece;
use crate::sema::types::Type;

/// The id of the record that `exit()` sends.
pub const EXIT_RECORD: u64 = 0;

/// Where a printf argument comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgSource {
    /// Known at compile time (a string literal, the `probe` builtin).
    ConstStr(String),
    ConstInt {
        value: u64,
        signed: bool,
    },
    /// Read from the record at `offset`.
    Int {
        offset: usize,
        signed: bool,
    },
    Str {
        offset: usize,
        size: usize,
    },
    /// A uid at `offset`, printed as its user's name.
    Username {
        offset: usize,
    },
    /// A `buf()` value at `offset`: its length, then its bytes.
    Buf {
        offset: usize,
    },
    /// A `strftime()` value (nanoseconds since boot) at `offset`, printed as `format` gives.
    Timestamp {
        offset: usize,
        format: std::sync::Arc<str>,
    },
    /// A `cgroup_path()` value (a cgroup id) at `offset`, printed as its paths.
    CgroupPath {
        offset: usize,
        filter: std::sync::Arc<str>,
    },
    /// A `container_id()` value (a cgroup id) at `offset`, printed as its container's id.
    ContainerId {
        offset: usize,
    },
    /// A CPU bitmap of `bytes` bytes at `offset`, printed as a CPU list.
    Cpumask {
        offset: usize,
        bytes: usize,
    },
    /// An address at `offset` (and the pid after it for a user one), printed as its function's name.
    Symbol {
        offset: usize,
        user: bool,
    },
    /// A uprobe_multi link's function index at `offset`, printed as the function's name.
    Function {
        offset: usize,
        names: std::sync::Arc<[String]>,
    },
    /// `args` (of a tracepoint or raw tracepoint) at `offset`, its fields one after the other, printed as
    /// `print(args)` prints it: `{ .name = value, ... }`.
    Args {
        offset: usize,
        fields: Vec<(String, Type, bool)>,
    },
    /// A script's enum value at `offset` for `%s`: the name of its constant, or the number.
    Enum {
        offset: usize,
        def: std::sync::Arc<crate::lang::cdecl::EnumDef>,
    },
    /// An `ntop()` value at `offset`, printed as an IP address.
    Inet {
        offset: usize,
    },
    /// A `macaddr()` value at `offset`, printed as a MAC address.
    MacAddr {
        offset: usize,
    },
    /// A stack at `offset`, printed as its frames.
    Stack {
        offset: usize,
        stack: crate::sema::types::StackType,
    },
    /// Any other value for `%s` (an integer, a bool, a pointer, a tuple, an array, a struct) at
    /// `offset`, laid out as `ty`: printed as `print()` prints it.
    Value {
        offset: usize,
        ty: Type,
    },
}

/// What userspace does with a formatted text when its record arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextAction {
    /// `printf`: prints it.
    Print,
    /// `cat`: prints the file it names.
    PrintFile,
    /// `system`: runs it as a shell command and prints what the command prints.
    RunCommand,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// `[id][code: i64]`
    Exit,
    /// `printf(format, args...)`, `cat(format, args...)`, `system(format, args...)`: the formatted
    /// text, and what userspace does with it.
    Printf {
        pieces: Vec<Piece>,
        args: Vec<ArgSource>,
        action: TextAction,
        /// `errorf()`, `warnf()`: the message goes to the log with the call's location.
        log: Option<Log>,
    },
    /// `print(@map, top, div)`: userspace reads and prints the map when the record arrives.
    PrintMap {
        map: usize,
        top: Option<usize>,
        div: Option<u64>,
    },
    ClearMap {
        map: usize,
    },
    ZeroMap {
        map: usize,
    },
    /// `unwatch(address)`: `[id][address]`.
    Unwatch,
    /// `print(value)`: `[id][value laid out as ty]`.
    PrintValue {
        ty: Type,
    },
    /// `print(args)`: `[id][each field laid out as its type]`; `(name, type, is a pointer)`.
    PrintArgs {
        fields: Vec<(String, Type, bool)>,
    },
    /// `join(array, delim)`: `[id][JOIN_ARGS strings of JOIN_ARG_SIZE bytes]`, printed joined by `delim`.
    Join {
        delim: String,
    },
    /// `time(format)`: userspace prints the wall-clock time when the record arrives.
    Time {
        format: String,
    },
    /// `dw_ustack`: a copy of the user stack to unwind, laid out as `codegen/user_stack_copy.rs` describes;
    /// `depth` frames are kept.
    UserStackCopy {
        depth: u8,
    },
    /// A declared map refused an update at `span`: `[id][the helper's return value: i64]`.
    UpdateFailed {
        map: String,
        /// The declared map type, `hash`, `lruhash`, ...
        storage: &'static str,
        span: Span,
        /// The warnings printed for a full map and for any other failure, rendered at `span` by
        /// [`Records::render_warnings`] (the compiler does not see the script's text).
        warnings: [String; 2],
    },
    /// A range loop at `span` stopped after `most` iterations, all a kernel without `bpf_loop` can
    /// check: `[id]`.
    LoopCut {
        span: Span,
        most: usize,
        /// The warning, rendered at `span` by [`Records::render_warnings`].
        warning: String,
    },
    /// A division or modulo by zero at `span` gave 1, as in current bpftrace: `[id]`.
    DivideByZero {
        span: Span,
        /// The warning, rendered at `span` by [`Records::render_warnings`].
        warning: String,
    },
    /// With `-k`, a probe read helper failed: `[id][the helper's return value: i64]`.
    ReadFailed(ReadFailure),
}

/// A probe read helper's call that `-k` checks: which helper, and the expression it reads for, named as
/// bpftrace 0.27.1 names it in its warning (`stdin:1:77-80`, the line and `~` under the expression).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadFailure {
    /// The helper's C name (`probe_read_kernel`).
    pub helper: &'static str,
    pub span: Span,
    /// Filled by [`Records::locate_logs`] (the compiler does not see the script's text).
    pub location: Location,
    /// The script's line holding the expression and `~` under it, filled by [`Records::locate_logs`].
    pub marked: String,
}

/// Where an `errorf()` or `warnf()` message comes from; the pipeline fills `location` from the
/// source (`stdin:1:9-62`), which codegen does not see.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Log {
    pub error: bool,
    pub span: crate::lang::Span,
    pub location: Location,
    /// The macro calls whose expansions brought the call, innermost first.
    pub expanded_from: Vec<crate::lang::Span>,
    /// What text output adds after the message for `expanded_from`: each call's place, its line of the script and
    /// `~` under it, as bpftrace prints them; empty when the call is the script's own.
    pub expansions: String,
}

/// A place in the script as bpftrace names it in messages.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    pub file: String,
    pub line: usize,
    pub column: usize,
    /// `file:line:col-endcol`, or `file:line-endline` for a call over several lines.
    pub text: String,
}

/// A `skboutput()` call's pcap file, and how many leading bytes of each packet it leaves out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capture {
    pub path: String,
    pub offset: u64,
}

/// Every record kind of a compiled script, indexed by id; and the packet captures, which programs send
/// through their own rings (`bpf_skb_output` writes only into a perf event array), indexed by id too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Records {
    records: Vec<Record>,
    captures: Vec<Capture>,
}

impl Default for Records {
    fn default() -> Records {
        Records { records: vec![Record::Exit], captures: vec![] }
    }
}

impl Records {
    pub fn add(&mut self, record: Record) -> u64 {
        self.records.push(record);
        (self.records.len() - 1) as u64
    }

    pub fn add_capture(&mut self, capture: Capture) -> u64 {
        self.captures.push(capture);
        (self.captures.len() - 1) as u64
    }

    /// The captures, by id.
    pub fn captures(&self) -> &[Capture] {
        &self.captures
    }

    /// Gives every `errorf()`/`warnf()` record, and every read `-k` checks, its place in the script's files.
    pub fn locate_logs(&mut self, sources: &crate::lang::Sources) {
        for record in &mut self.records {
            if let Record::ReadFailed(read) = record {
                read.location = Location::of(sources, read.span);
                read.marked = sources.marked_line(read.span, '~');
            }
            if let Record::Printf { log: Some(log), .. } = record {
                log.location = Location::of(sources, log.span);
                let severity = if log.error { "ERROR" } else { "WARNING" };
                for &at in &log.expanded_from {
                    let place = Location::of(sources, at).text;
                    let marked = sources.marked_line(at, '~');
                    log.expansions.push_str(&format!("{place}: {severity}: expanded from\n{marked}"));
                }
            }
        }
    }

    /// Whether a failed update of `@map` sends a warning record (a declared map does).
    pub fn warns_of_failed_updates(&self, map: &str) -> bool {
        self.records.iter().any(|record| matches!(record, Record::UpdateFailed { map: m, .. } if m == map))
    }

    pub fn get(&self, id: u64) -> Option<&Record> {
        self.records.get(usize::try_from(id).ok()?)
    }

    /// Whether a record prints a `dw_ustack` (`printf("%s", dw_ustack)`, `print(dw_ustack)`): its handle is
    /// looked up when the record arrives.
    pub fn prints_copied_stacks(&self) -> bool {
        self.records.iter().any(|record| match record {
            Record::Printf { args, .. } => args.iter().any(|arg| match arg {
                ArgSource::Stack { stack, .. } => stack.dwarf,
                ArgSource::Value { ty, .. } => ty.holds_copied_stack(),
                _ => false,
            }),
            Record::PrintValue { ty } => ty.holds_copied_stack(),
            Record::PrintArgs { fields } => fields.iter().any(|(_, ty, _)| ty.holds_copied_stack()),
            _ => false,
        })
    }

    /// Whether a program copies user stacks (`dw_ustack`).
    pub fn copies_user_stacks(&self) -> bool {
        self.records.iter().any(|r| matches!(r, Record::UserStackCopy { .. }))
    }

    /// Renders the warnings of [`Record::UpdateFailed`], [`Record::LoopCut`] and [`Record::DivideByZero`] records
    /// with `render`.
    pub fn render_warnings(&mut self, render: &dyn Fn(&Diagnostic) -> String) {
        for record in &mut self.records {
            if let Record::UpdateFailed { map, storage, span, warnings } = record {
                let full = Diagnostic::warning(*span, "Map full; can't update element").with_help(format!(
                    "declare @{map} with more entries, e.g. `let @{map} = {storage}(5000);`"
                ));
                let other = Diagnostic::warning(*span, format!("Can't update an element of @{map}"));
                *warnings = [render(&full), render(&other)];
            }
            if let Record::LoopCut { span, most, warning } = record {
                *warning = render(
                    &Diagnostic::warning(*span, format!("this loop stopped after {most} iterations"))
                        .with_help("a kernel without bpf_loop (Linux 5.17) cannot run a range loop of bounds known only at run time longer"),
                );
            }
            if let Record::DivideByZero { span, warning } = record {
                *warning = render(&Diagnostic::warning(
                    *span,
                    "Divide or modulo by 0 detected. This can lead to unexpected results. 1 is being used as the result.",
                ));
            }
        }
    }
}

impl Location {
    pub fn of(sources: &crate::lang::Sources, span: crate::lang::Span) -> Location {
        let (source, base) = sources.get(span.start);
        let (line, column) = source.line_col(span.start - base);
        let (end_line, end_column) = source.line_col(span.end.saturating_sub(base));
        let text = match end_line == line {
            true => format!("{}:{line}:{column}-{end_column}", source.name),
            false => format!("{}:{line}-{end_line}", source.name),
        };
        Location { file: source.name.to_string(), line, column, text }
    }
}
