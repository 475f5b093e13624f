//! Probe providers: one module per probe type, each implementing [`Provider`]. A module reads its own
//! attach points (`interval:ms:10`, `BEGIN`) into a value that knows everything the tracer does with
//! that probe: its program type, the builtins its context offers, how it is attached, and whether it
//! keeps perf events on CPUs (which the runtime's shared revival machinery then keeps alive through
//! hotplug). The compiler and the runtime only ever ask these questions through the trait; adding a
//! probe type means adding a module and one line in [`PROVIDERS`].

pub mod elf;
pub mod events;
pub mod fentry;
pub mod fentry_bpf;
pub mod interval;
pub mod iter;
pub mod kernel_functions;
pub mod kprobe;
pub mod kprobe_session;
pub mod listing;
pub mod missing;
pub mod numbers;
pub mod on_demand;
pub mod profile;
pub mod profile_timer;
pub mod rawtracepoint;
pub mod self_signal;
pub mod softirq_frames;
pub mod source_line;
pub mod special;
pub mod syscall;
pub mod syscall_formats;
mod syscall_signatures;
pub mod tracepoint;
pub mod trigger;
pub mod uprobe;
pub mod usdt;
pub mod usdt_args;
pub mod watchpoint;
pub mod wildcard;

use crate::kernel::tracefs;
use crate::kernel::{KernelTypes, Vmlinux};
use crate::lang::{Diagnostic, Span};
use bpf::perf::PerfEventSpec;
use bpf::{AttachMode, ProgType};
use std::fmt;
use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Duration;

/// A resolved attach point: what fires the probe.
#[derive(Clone, Debug)]
pub struct AttachPoint {
    pub provider: Arc<dyn Provider>,
    /// The canonical name, as the `probe` builtin gives it (`interval:ms:10` for `i:ms:10`).
    pub name: String,
    pub span: Span,
}

impl AttachPoint {
    pub fn new(provider: impl Provider + 'static, name: String, span: Span) -> AttachPoint {
        AttachPoint { provider: Arc::new(provider), name, span }
    }

    /// The probe type as the `probetype` builtin gives it: the canonical name's first part
    /// (`kretprobe`, `profile`), `special` for BEGIN and END.
    pub fn probe_type(&self) -> &str {
        match self.name.split(':').next().unwrap_or_default() {
            "BEGIN" | "END" | "begin" | "end" => "special",
            kind => kind,
        }
    }
}

/// The user binary a probe is in.
#[derive(Clone, Copy, Debug)]
pub struct UserBinary<'a> {
    pub path: &'a std::path::Path,
    /// The one function the probe is on, named (a uprobe on one function; not a wildcard's, not USDT's).
    pub function: Option<&'a str>,
}

/// Who makes a probe's program run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// steadytrace, once, before anything else.
    Begin,
    /// steadytrace, once, after everything else has stopped.
    End,
    /// steadytrace's timer thread, every period.
    Every(Duration),
    /// The kernel, when the event happens.
    Kernel,
    /// steadytrace, once, with `--test` (`test:NAME`); its return value says whether it passed.
    Test,
    /// steadytrace, many times over, with `--bench` (`bench:NAME`).
    Bench,
    /// steadytrace, each time it receives SIGUSR1 (`self:signal:SIGUSR1`).
    Signal,
}

impl Schedule {
    /// Run only in their own modes (`--test`, `--bench`), never while tracing.
    pub fn on_demand(self) -> bool {
        matches!(self, Schedule::Test | Schedule::Bench)
    }
}

/// Where `arg0`.. are found in a probe's context.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arguments {
    /// The function's argument registers in `struct pt_regs` (uprobes, kprobes).
    Registers,
    /// The raw tracepoint's array of 8-byte arguments.
    RawArray,
    /// Each where its probe point says, with its own size and sign (USDT probes).
    Located(Arc<[usdt_args::Argument]>),
}

impl Arguments {
    /// How many arguments can be read.
    pub fn limit(&self) -> usize {
        match self {
            Arguments::Registers => bpf::arch::HOST.args.len(),
            Arguments::RawArray => 12,
            Arguments::Located(arguments) => arguments.len(),
        }
    }

    /// The offset of argument `n` in the context, where every argument is a whole 8-byte word there.
    pub fn offset(&self, n: usize) -> Option<i16> {
        match self {
            Arguments::Registers => bpf::arch::HOST.args.get(n).copied(),
            Arguments::RawArray => (n < self.limit()).then_some(8 * n as i16),
            Arguments::Located(_) => None,
        }
    }

    /// Argument `n` of a probe point that says where each is.
    pub fn located(&self, n: usize) -> Option<&usdt_args::Argument> {
        match self {
            Arguments::Located(arguments) => arguments.get(n),
            _ => None,
        }
    }

    /// Whether argument `n` is read the same way in both (as a whole word, or each where its point
    /// says).
    pub fn same_kind(&self, other: &Arguments) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}

/// What `func` is in a probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Func {
    /// The function's name, known when the script is compiled.
    Name(String),
    /// The address of the function that fired, named when printed (one program on a kprobe_multi link).
    Address,
    /// The index of the function that fired among these, its link cookie (one program on a uprobe_multi
    /// link).
    Cookie(Arc<[String]>),
}

/// The builtins a probe's context offers beyond those every probe has.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Context {
    /// `arg0`..
    pub arguments: Option<Arguments>,
    /// `retval`: a return probe.
    pub retval: Option<Retval>,
    /// `func`.
    pub func: Option<Func>,
    /// A plain address (`*addr`, `(struct x *)addr`) is one of the traced process, not of the kernel.
    pub user_addresses: bool,
    /// `ctx` points to this kernel struct (an iterator's `bpf_iter__NAME`); else it is a plain address.
    pub ctx_record: Option<String>,
}

impl Context {
    /// Whether the context is the registers saved where the probe fired (`struct pt_regs`: kprobes,
    /// uprobes, usdt), which `reg()` reads.
    pub fn is_registers(&self) -> bool {
        matches!(self.arguments, Some(Arguments::Registers | Arguments::Located(_)))
            || self.retval == Some(Retval::REGISTER)
    }
}

/// Where a return probe finds the return value in its context, and the value's width and sign.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retval {
    pub offset: i16,
    /// 1, 2, 4 or 8 bytes.
    pub size: u8,
    pub signed: bool,
}

impl Retval {
    /// The return value register in `struct pt_regs` (uretprobes, kretprobes): a 64-bit word.
    pub const REGISTER: Retval = Retval { offset: bpf::arch::HOST.retval, size: 8, signed: false };
}

/// Where a value of the probe's context (a record field, the value a probe is filtered on) is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// At this byte offset of the context (a tracepoint's record, a raw tracepoint's arguments).
    Context(i16),
    /// At `offset` in the kernel memory that the pointer at byte `pointer` of the context points to (a
    /// system call's saved registers, behind the first argument of the `raw_syscalls` tracepoints).
    Behind { pointer: i16, offset: i16 },
}

/// Perf events a probe keeps open on CPUs, for the runtime to open, revive after hotplug, and close.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfEvents {
    pub spec: PerfEventSpec,
    /// Every online CPU; otherwise one CPU, moved when that CPU goes offline.
    pub every_cpu: bool,
}

/// A BPF timer a probe keeps armed on every online CPU, whose expiry runs its program where the timer
/// interrupted the CPU (`profile` where perf events are refused); the runtime arms it on each CPU,
/// re-arms it on a CPU that comes back, and cancels it, as it keeps perf events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuTimer {
    pub period_ns: u64,
    /// The offset of `_softexpires` in the kernel's `struct hrtimer` (its BTF).
    pub softexpires: i16,
}

/// Where the traced code begins in a kernel stack: after the first frame at `after` (a return address),
/// looked for among the first [`KernelStackStart::WITHIN`] frames; the whole stack is kept where it is
/// not there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelStackStart {
    pub after: u64,
}

impl KernelStackStart {
    pub const WITHIN: usize = 16;
}

/// What attaching needs to know of the run.
#[derive(Clone, Copy, Debug)]
pub struct AttachTarget {
    /// Only this process triggers uprobes (`-p`, `-c`).
    pub pid: Option<u32>,
    /// An online CPU to open a trace event's perf event on.
    pub cpu: u32,
}

/// An attachment (a perf event, a link, a uprobe), held only to be dropped: dropping it detaches.
pub struct Attachment {
    _held: Box<dyn std::any::Any>,
}

impl fmt::Debug for Attachment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Attachment")
    }
}

impl Attachment {
    pub fn new(held: impl std::any::Any) -> Attachment {
        Attachment { _held: Box::new(held) }
    }
}

/// Why a probe could not be attached.
#[derive(Debug)]
pub enum AttachError {
    /// A system call failed; the kernel's error is kept, so that messages can tell EPERM from ENODEV.
    Os { what: String, error: io::Error },
    /// The reason, said in full.
    Explained(String),
    /// These functions cannot be probed (each named with the reason); the probe runs on the
    /// others, if any are `attached`.
    Refused { functions: Vec<(String, String)>, attached: Option<Attachment> },
}

/// Functions that cannot be probed, `(name, reason)`, listed with each reason said once after the names
/// it applies to, in the order first seen: `a, b (reason); c (other reason)`.
pub fn list_refused<'a>(functions: impl IntoIterator<Item = &'a (String, String)>) -> String {
    let mut groups: Vec<(&str, Vec<&str>)> = vec![];
    for (function, reason) in functions {
        match groups.iter_mut().find(|(known, _)| *known == reason.as_str()) {
            Some((_, names)) => names.push(function),
            None => groups.push((reason, vec![function])),
        }
    }
    let listed: Vec<String> =
        groups.iter().map(|(reason, names)| format!("{} ({reason})", names.join(", "))).collect();
    listed.join("; ")
}

impl fmt::Display for AttachError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttachError::Os { what, error } => write!(f, "{what}: {error}"),
            AttachError::Explained(reason) => f.write_str(reason),
            AttachError::Refused { functions, .. } => {
                write!(f, "cannot probe {}", list_refused(functions))
            }
        }
    }
}

/// A probe type and the attach point it resolved: everything the compiler and the runtime need to know.
pub trait Provider: fmt::Debug + Send + Sync {
    /// The probe type (`tracepoint`), also the name of its programs in the kernel.
    fn kind(&self) -> &'static str;

    /// Who makes the program run.
    fn schedule(&self) -> Schedule {
        Schedule::Kernel
    }

    /// The type its program is loaded as.
    fn prog_type(&self) -> ProgType;

    /// How its program is attached, which the kernel wants to know at load time.
    fn attach_mode(&self) -> AttachMode {
        AttachMode::PerfEvent
    }

    /// The section of an `--emit-elf` object holding its program, named as libbpf's section table reads
    /// the program's type and, where the probe type knows it, its attach target (`tracepoint/CAT/NAME`).
    fn elf_section(&self) -> String {
        bpf::elf::section(self.prog_type(), self.attach_mode(), None)
    }

    /// The builtins its context offers.
    fn context(&self) -> Context {
        Context::default()
    }

    /// `args.NAME`: the fields of its record; `None` where the probe has no `args`.
    fn fields(&self, _kernel: &Vmlinux) -> Option<Result<Vec<tracefs::Field>, String>> {
        None
    }

    /// More help for a script that names a field it does not have.
    fn missing_field_help(&self) -> Option<String> {
        None
    }

    /// Where the value of one of its [`Provider::fields`] is read.
    fn field_place(&self, field: &tracefs::Field) -> Place {
        Place::Context(field.offset as i16)
    }

    /// The program does nothing unless the 8-byte value at this place equals this number (one system
    /// call among all those a `raw_syscalls` tracepoint sees).
    fn only_when(&self) -> Option<(Place, i32)> {
        None
    }

    /// Where the saved mode register is, when the program must also do nothing for the system calls of
    /// 32-bit processes ([`bpf::arch::Arch::compat_mode`]): their numbers are another table's, and the
    /// kernel's per-syscall tracepoints skip them.
    fn native_calls_only(&self) -> Option<Place> {
        None
    }

    /// Whether the pointers among its fields point into the process (system call arguments).
    fn fields_point_to_user(&self) -> bool {
        false
    }

    /// Whether the program fires in any process, so that `-p` filters in the program itself.
    fn fires_in_any_process(&self) -> bool {
        false
    }

    /// Whether the program fires in steadytrace's own threads (BEGIN, END, interval): a signal sent to
    /// "the current process" there would hit steadytrace.
    fn fires_in_steadytrace(&self) -> bool {
        false
    }

    /// The user binary the probe is in (uprobes, USDT), whose globals `uaddr()` finds.
    fn user_binary(&self) -> Option<UserBinary<'_>> {
        None
    }

    /// Whether the program runs on a BPF trampoline (fentry, fexit), where the kernel allows
    /// `bpf_d_path`.
    fn on_trampoline(&self) -> bool {
        false
    }

    /// Whether the program stops doing anything once `exit()` was called (probes steadytrace fires
    /// itself: a firing must not slip in before the exit record is read).
    fn checks_exit_flag(&self) -> bool {
        false
    }

    /// Whether `override()` can make the probed function return at once: a kprobe at a function's entry.
    fn overrides_return(&self) -> bool {
        false
    }

    /// Whether the program is an iterator, which steadytrace reads once everything is attached; tracing ends
    /// when the iteration does.
    fn iterates(&self) -> bool {
        false
    }

    /// Where an iterator is pinned (`iter:task:PIN`): its program prints with `bpf_seq_printf` into that
    /// file, read after steadytrace has gone, and cannot send steadytrace anything.
    fn pinned_at(&self) -> Option<&std::path::Path> {
        None
    }

    /// The program does nothing when the 8-byte word at this offset of its context is 0 (an iterator's
    /// object, NULL in the call that ends the iteration).
    fn skips_when_zero(&self) -> Option<i16> {
        None
    }

    /// Attaches its loaded program; `None` when nothing is attached here (probes steadytrace fires, and
    /// those that live on [`Provider::perf_events`]).
    fn attach(
        &self,
        _program: BorrowedFd<'_>,
        _target: &AttachTarget,
    ) -> Result<Option<Attachment>, AttachError> {
        Ok(None)
    }

    /// The perf events it keeps on CPUs, which the runtime revives after CPU hotplug.
    fn perf_events(&self) -> Option<PerfEvents> {
        None
    }

    /// What to add to the message when perf_event_open is refused to its [`Provider::perf_events`]:
    /// another way to the same probe, where this machine lacks it.
    fn when_perf_denied(&self) -> &'static str {
        ""
    }

    /// The BPF timer it keeps armed on every CPU, which the runtime re-arms after CPU hotplug.
    fn cpu_timer(&self) -> Option<CpuTimer> {
        None
    }

    /// Where the traced code's frames begin in the kernel stacks its program takes, when the machinery
    /// that ran the program comes first (`kstack` in `profile` on BPF timers: the timer's softirq).
    fn kernel_stack_start(&self) -> Option<KernelStackStart> {
        None
    }

    /// The address a watchpoint watches, which `unwatch()` names.
    fn watched_address(&self) -> Option<u64> {
        None
    }

    /// How the probe runs, for `-v`.
    fn describe(&self) -> String;

    /// One point per function, where this point shares one program among many functions (a
    /// kprobe_multi link) and the script needs a value fixed per function (`probe`, `func` as a string).
    fn per_function(&self, _span: Span) -> Option<Vec<AttachPoint>> {
        None
    }

    /// The one kernel function a kprobe or kretprobe runs at, where it could share a kprobe session with
    /// its partner (`kprobe_session`).
    fn session_part(&self) -> Option<kprobe_session::SessionPart> {
        None
    }
}

/// What resolving attach points depends on besides their text.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub interval_engine: IntervalEngine,
    /// What an attach point that does not exist does (config `missing_probes`).
    pub missing_probes: MissingProbes,
    /// `--unwind dwarf`: every `ustack` is read as `dw_ustack`.
    pub dwarf_ustack: bool,
    /// A process is traced (`-p`, `-c`): user addresses can be watched in it.
    pub target_process: bool,
    /// `--no-warnings`: an attach point skipped as missing is skipped silently.
    pub no_warnings: bool,
    /// `--probe-filter REGEX`: only the attach points whose text matches it are resolved.
    pub probe_filter: Option<regex_lite::Regex>,
    /// `--unsafe`: kprobes may be put on bare addresses.
    pub allow_unsafe: bool,
    /// `--debuginfo DIR[:DIR]`: where binaries' separate debug files are looked for first.
    pub debug_dirs: crate::symbols::DebugDirs,
}

impl Options {
    /// Whether the attach point written `text` is attached: BEGIN and END always are, as in bpftrace; the
    /// others when `--probe-filter`'s expression matches somewhere in their text (as written, before
    /// wildcards are expanded).
    pub fn attaches(&self, text: &str) -> bool {
        let always = matches!(text, "BEGIN" | "END" | "begin" | "end");
        always || self.probe_filter.as_ref().is_none_or(|filter| filter.is_match(text))
    }
}

/// What an attach point that does not exist, or cannot be attached, does: config `missing_probes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MissingProbes {
    /// It is skipped silently.
    Ignore,
    /// It is skipped with a warning.
    #[default]
    Warn,
    /// The trace does not start.
    Error,
}

/// What fires interval probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum IntervalEngine {
    /// steadytrace's timer thread (the default): no CPU to lose, no perf_event_open.
    #[default]
    Timer,
    /// A CPU-clock perf event on one CPU, as bpftrace does, moved to another CPU when its CPU goes away.
    Perf,
}

/// Reads the text after `TYPE:` of an attach point; with wildcards it may stand for several.
type Resolve = fn(
    written: &str,
    rest: &Fields,
    span: Span,
    options: &Options,
    kernel: &KernelTypes,
) -> Result<Vec<AttachPoint>, Diagnostic>;

/// Every probe type: the names it is written with (aliases included) and how it reads its attach points.
const PROVIDERS: &[(&[&str], Resolve)] = &[
    (&["BEGIN", "begin", "END", "end"], special::resolve),
    (&["interval", "i"], interval::resolve),
    (&["profile", "p"], profile::resolve),
    (&["software", "s", "hardware", "h"], events::resolve),
    (&["tracepoint", "t"], tracepoint::resolve),
    (&["rawtracepoint", "rt"], rawtracepoint::resolve),
    (&["uprobe", "u", "uretprobe", "ur"], uprobe::resolve),
    (&["kprobe", "k", "kretprobe", "kr"], kprobe::resolve),
    (&["usdt", "U"], usdt::resolve),
    (&["fentry", "f", "kfunc", "fexit", "fr", "kretfunc"], fentry::resolve),
    (&["test", "bench"], on_demand::resolve),
    (&["self"], self_signal::resolve),
    (&["watchpoint", "w"], watchpoint::resolve),
    (&["iter", "it"], iter::resolve),
];

/// bpftrace's probe types that steadytrace does not have yet.
const NOT_YET: &[&str] = &["asyncwatchpoint"];

/// Reads one attach point; with wildcards it may stand for several.
pub fn resolve(
    text: &str,
    span: Span,
    options: &Options,
    kernel: &KernelTypes,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    let (written, rest) = Fields::read(text).first();
    let written = written.as_str();
    if let Some((_, resolve)) = PROVIDERS.iter().find(|(names, _)| names.contains(&written)) {
        return resolve(written, &rest, span, options, kernel);
    }
    // Probe types are read whatever their case, as bpftrace reads them (`BENCH:b`, `Interval:s:1`); an exact
    // alias comes first (`U` is usdt, `u` uprobe).
    let lowered = written.to_ascii_lowercase();
    if let Some((_, resolve)) = PROVIDERS.iter().find(|(names, _)| names.contains(&lowered.as_str())) {
        return resolve(&lowered, &rest, span, options, kernel);
    }
    if NOT_YET.contains(&written) {
        return Err(Diagnostic::error(span, format!("`{written}` probes are not supported yet"))
            .with_help("steadytrace has BEGIN, END, interval, profile, software, hardware, tracepoint, rawtracepoint, uprobe, uretprobe, usdt, kprobe, kretprobe, fentry, fexit, watchpoint, iter, self, test and bench probes"));
    }
    Err(Diagnostic::error(span, format!("unknown probe type `{written}`"))
        .with_help("probes look like `BEGIN`, `END` or `interval:s:1`"))
}

/// An attach point's text (or what follows its `TYPE:`) with its quoted parts read: the quotes go, `\x` inside
/// them is `x`, and a `:` inside them parts no fields, as in bpftrace (`uprobe:"/opt/my:app":f` is `uprobe`,
/// `/opt/my:app` and `f`). Read as a `str`, it is the text without the quotes.
#[derive(Debug)]
pub struct Fields {
    text: String,
    /// Where in `text` the `:`s that part fields are.
    colons: Vec<usize>,
}

impl Fields {
    pub fn read(written: &str) -> Fields {
        let mut fields = Fields { text: String::with_capacity(written.len()), colons: vec![] };
        let mut quoted = false;
        let mut chars = written.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => quoted = !quoted,
                '\\' if quoted => fields.text.extend(chars.next()),
                ':' if !quoted => {
                    fields.colons.push(fields.text.len());
                    fields.text.push(c);
                }
                _ => fields.text.push(c),
            }
        }
        fields
    }

    /// The first field, and the fields after it.
    fn first(self) -> (String, Fields) {
        let Some((&at, colons)) = self.colons.split_first() else { return (self.text, Fields::read("")) };
        let rest = Fields {
            text: self.text[at + 1..].to_string(),
            colons: colons.iter().map(|c| c - at - 1).collect(),
        };
        (self.text[..at].to_string(), rest)
    }

    /// The first field and the text after it.
    pub fn split_first(&self) -> Option<(&str, &str)> {
        let &at = self.colons.first()?;
        Some((&self.text[..at], &self.text[at + 1..]))
    }

    /// Every field, whole.
    pub fn fields(&self) -> Vec<&str> {
        let starts = std::iter::once(0).chain(self.colons.iter().map(|c| c + 1));
        let ends = self.colons.iter().copied().chain(std::iter::once(self.text.len()));
        starts.zip(ends).map(|(start, end)| &self.text[start..end]).collect()
    }

    /// The text before the last field and the last field: a uprobe's binary (which may hold unquoted `:`s
    /// too) and its function.
    pub fn split_last(&self) -> Option<(&str, &str)> {
        let &at = self.colons.last()?;
        Some((&self.text[..at], &self.text[at + 1..]))
    }
}

impl std::ops::Deref for Fields {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::Fields;

    #[test]
    fn quoted_parts_lose_their_quotes() {
        assert_eq!(&*Fields::read(r#"uprobe:"/opt/my app/bin":main"#), "uprobe:/opt/my app/bin:main");
        assert_eq!(&*Fields::read(r#"iter:task:"a\"b\\c""#), r#"iter:task:a"b\c"#);
        assert_eq!(&*Fields::read("kprobe:f"), "kprobe:f");
    }

    #[test]
    fn a_colon_in_quotes_parts_no_fields() {
        let (written, rest) = Fields::read(r#"usdt:"/opt/my:app":"prov":"a:b""#).first();
        assert_eq!((written.as_str(), rest.fields()), ("usdt", vec!["/opt/my:app", "prov", "a:b"]));
        let (_, rest) = Fields::read(r#"uprobe:"/opt/my:app":f"#).first();
        assert_eq!(rest.split_last(), Some(("/opt/my:app", "f")));
        let (_, rest) = Fields::read(r#"uprobe:/opt/x:"ns::f""#).first();
        assert_eq!(rest.split_last(), Some(("/opt/x", "ns::f")));
        let (written, rest) = Fields::read("BEGIN").first();
        assert_eq!((written.as_str(), rest.fields()), ("BEGIN", vec![""]));
    }

    #[test]
    fn probe_types_are_read_whatever_their_case() {
        let span = crate::lang::Span::new(0, 0);
        for (written, name) in
            [("TEST:t", "test:t"), ("Bench:b", "bench:b"), ("INTERVAL:ms:10", "interval:ms:10")]
        {
            let points =
                super::resolve(written, span, &Default::default(), &crate::kernel::KernelTypes::none())
                    .expect(written);
            assert_eq!(points[0].name, name);
        }
    }
}
