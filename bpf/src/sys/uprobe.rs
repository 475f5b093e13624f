//! Attaching programs to user-space functions: a uprobe_multi link where the kernel has them
//! (no `perf_event_open` needed), a perf uprobe event otherwise.

use crate::code::perf::{PerfEventSpec, Sample};
use crate::code::prog::AttachMode;
use crate::sys::link;
use crate::sys::perf::{pmu_type, PerfEvent};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Where and for whom a uprobe fires.
#[derive(Clone, Debug)]
pub struct UprobeTarget<'a> {
    pub path: &'a Path,
    pub offset: u64,
    pub retprobe: bool,
    /// Only this process (all its threads) triggers the probe; `None`: every process.
    pub pid: Option<u32>,
    /// For a perf uprobe event of every process: an online CPU to open it on (the program runs on every
    /// CPU all the same: the kernel runs the programs of a uprobe's trace event, not of one CPU).
    pub cpu: u32,
    /// The file offset of a USDT semaphore the kernel counts up while the probe is attached (0: none).
    pub ref_ctr_offset: u64,
}

/// An attached uprobe. Dropping it detaches.
pub enum Uprobe {
    Link(OwnedFd),
    Perf(PerfEvent),
}

impl Uprobe {
    pub fn attach(prog: BorrowedFd<'_>, mode: AttachMode, target: &UprobeTarget<'_>) -> io::Result<Uprobe> {
        if misread_at(target.path, target.offset) {
            return Err(misread_error());
        }
        match mode {
            AttachMode::UprobeMulti => multi_link(prog, target).map(Uprobe::Link),
            AttachMode::PerfEvent => perf_uprobe(prog, target).map(Uprobe::Perf),
            AttachMode::KprobeMulti
            | AttachMode::KprobeSession
            | AttachMode::Trampoline { .. }
            | AttachMode::Iterator { .. } => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a uprobe attaches through a uprobe_multi link or a perf event",
            )),
        }
    }
}

/// Whether this kernel has uprobe_multi links (Linux 6.6 and later), found out without attaching
/// anything: every uprobe detach waits for an RCU grace period, tens of milliseconds. A link request
/// with too many offsets fails with E2BIG only where the kernel knows uprobe_multi links.
pub(crate) fn multi_supported() -> bool {
    let offsets = [0 as libc::c_ulong];
    let mut opts = link::options();
    opts.__bindgen_anon_1.uprobe_multi = libbpf_sys::bpf_link_create_opts__bindgen_ty_1__bindgen_ty_3 {
        cnt: u32::MAX,
        path: c"/".as_ptr(),
        offsets: offsets.as_ptr(),
        ..Default::default()
    };
    // The kernel rejects the count before reading the arrays; the pointers are valid anyway.
    link::refused_with(AttachMode::UprobeMulti, libbpf_sys::BPF_TRACE_UPROBE_MULTI, &opts, libc::E2BIG)
}

/// Many functions of one file, attached through uprobe_multi links.
#[derive(Clone, Debug)]
pub struct MultiTarget<'a> {
    pub path: &'a Path,
    /// File offsets; the program reads the index of the one that fired with `bpf_get_attach_cookie`.
    pub offsets: &'a [u64],
    pub retprobe: bool,
    /// Only this process (all its threads) triggers the probes; `None`: every process.
    pub pid: Option<u32>,
}

/// Links on every offset of a [`MultiTarget`] the kernel accepts (usually one link), and the offsets it
/// refused to probe.
#[derive(Debug)]
pub struct MultiUprobe {
    pub links: Vec<OwnedFd>,
    /// Indexes into [`MultiTarget::offsets`], each with the kernel's error (or [`refusal_reason`]'s own).
    pub refused: Vec<(usize, io::Error)>,
}

/// Attaches `prog` (loaded with [`AttachMode::UprobeMulti`]) to every offset of `target` the kernel
/// accepts.
///
/// The kernel fails a whole link when it refuses one offset, without saying which. Which it refuses
/// is decided by its instruction decoder (x86: an undecodable instruction, ENOEXEC; a lock or segment
/// prefix, an opcode outside its tables of single-steppable instructions, an `int3`: ENOTSUPP), by
/// rules that differ between architectures and kernel versions. Predicting them exactly would mean a
/// copy of that decoder, and any mismatch would either abort the run or skip a function the kernel
/// accepts. So the kernel decides: a refused link is split in halves, each attached on its own, down
/// to the single refused offsets. A failed link request costs a grace period (about 40 ms here)
/// whatever its size, so two things keep this fast: the halves are requested concurrently (the
/// waits overlap: one round per level), and offsets whose first instruction the kernel is likely to
/// refuse ([`likely_refused`]: only a guess, never trusted) go into a group of their own, so that the
/// others usually attach through one link at the first request. libc's 7,414 functions with 27
/// refused: one link for 7,387 functions after one request, and the 27 found in 6 rounds.
///
/// One kind of offset is never asked for: an instruction the kernel would misread ([`misread`]), whose
/// uprobe the kernel may accept and then run wrongly in every process that maps the file.
pub fn attach_multi(prog: BorrowedFd<'_>, target: &MultiTarget<'_>) -> io::Result<MultiUprobe> {
    let path = c_path(target.path)?;
    let file = std::fs::File::open(target.path).ok();
    let at = |i: &usize, test: fn(&std::fs::File, u64) -> bool| {
        file.as_ref().is_some_and(|file| test(file, target.offsets[*i]))
    };
    let (misread, rest): (Vec<usize>, Vec<usize>) = (0..target.offsets.len()).partition(|i| at(i, misread));
    let (suspects, likely): (Vec<usize>, Vec<usize>) = rest.into_iter().partition(|i| at(i, likely_refused));
    let request = Request {
        prog,
        target,
        path: &path,
        attached: Mutex::new(MultiUprobe {
            links: vec![],
            refused: misread.into_iter().map(|i| (i, misread_error())).collect(),
        }),
        failure: Mutex::new(None),
        threads: AtomicUsize::new(0),
    };
    std::thread::scope(|scope| {
        for group in [likely, suspects] {
            request.attach_group(scope, group);
        }
    });
    if let Some(error) = lock(&request.failure).take() {
        return Err(error);
    }
    let mut attached = request.attached.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
    if attached.links.is_empty() {
        // Nothing accepted: not one function's trouble but the probe's (a wrong file, say).
        if let Some((_, error)) = attached.refused.pop() {
            return Err(error);
        }
    }
    attached.refused.sort_by_key(|(index, _)| *index);
    Ok(attached)
}

/// At most this many threads request links at once while refused offsets are searched for.
const MAX_THREADS: usize = 64;

/// One [`attach_multi`] call, shared by the threads that split refused groups.
struct Request<'a> {
    prog: BorrowedFd<'a>,
    target: &'a MultiTarget<'a>,
    path: &'a CString,
    attached: Mutex<MultiUprobe>,
    /// The first error that is not a refused offset: it ends the search.
    failure: Mutex<Option<io::Error>>,
    threads: AtomicUsize,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means a thread panicked; the data is a list, whole after every push.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<'a> Request<'a> {
    /// Attaches `indexes` through one link, or, refused, its halves (concurrently while threads are
    /// free), down to the single refused offsets.
    fn attach_group<'scope>(&'scope self, scope: &'scope std::thread::Scope<'scope, '_>, indexes: Vec<usize>)
    where
        'a: 'scope,
    {
        if indexes.is_empty() || lock(&self.failure).is_some() {
            return;
        }
        match self.link(&indexes) {
            Ok(link) => lock(&self.attached).links.push(link),
            Err(error) if refuses_offset(&error) => {
                if let [index] = indexes[..] {
                    lock(&self.attached).refused.push((index, error));
                    return;
                }
                let mut first = indexes;
                let second = first.split_off(first.len() / 2);
                if self.threads.fetch_add(1, Ordering::Relaxed) < MAX_THREADS {
                    scope.spawn(move || {
                        self.attach_group(scope, first);
                        self.threads.fetch_sub(1, Ordering::Relaxed);
                    });
                } else {
                    self.threads.fetch_sub(1, Ordering::Relaxed);
                    self.attach_group(scope, first);
                }
                self.attach_group(scope, second);
            }
            Err(error) => {
                lock(&self.failure).get_or_insert(error);
            }
        }
    }

    fn link(&self, indexes: &[usize]) -> io::Result<OwnedFd> {
        let target = self.target;
        let offsets: Vec<libc::c_ulong> =
            indexes.iter().map(|&i| target.offsets[i] as libc::c_ulong).collect();
        let cookies: Vec<u64> = indexes.iter().map(|&i| i as u64).collect();
        let mut opts = link::options();
        opts.__bindgen_anon_1.uprobe_multi = libbpf_sys::bpf_link_create_opts__bindgen_ty_1__bindgen_ty_3 {
            flags: if target.retprobe { libbpf_sys::BPF_F_UPROBE_MULTI_RETURN } else { 0 },
            cnt: u32::try_from(offsets.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?,
            path: self.path.as_ptr(),
            offsets: offsets.as_ptr(),
            cookies: cookies.as_ptr(),
            pid: target.pid.unwrap_or(0),
            ..Default::default()
        };
        // The path, offsets and cookies outlive the call.
        link::create(self.prog, libbpf_sys::BPF_TRACE_UPROBE_MULTI, &opts)
    }
}

/// A guess, from the bytes at `offset` of `file`, that the kernel will refuse a uprobe there (see
/// [`crate::code::arch::Arch::uprobe_likely_refused`]). Wrong guesses cost time, never correctness: see
/// [`attach_multi`].
fn likely_refused(file: &std::fs::File, offset: u64) -> bool {
    use std::os::unix::fs::FileExt;
    let mut bytes = [0u8; 16];
    let Ok(n) = file.read_at(&mut bytes, offset) else { return false };
    (crate::code::arch::HOST.uprobe_likely_refused)(&bytes[..n])
}

/// Whether the kernel would misread the instruction at `offset` of `file` (see
/// [`crate::code::arch::Arch::uprobe_misread`]): a uprobe there would make every process running it go wrong.
fn misread(file: &std::fs::File, offset: u64) -> bool {
    use std::os::unix::fs::FileExt;
    let mut bytes = [0u8; 16];
    let Ok(n) = file.read_at(&mut bytes, offset) else { return false };
    (crate::code::arch::HOST.uprobe_misread)(&bytes[..n])
}

/// Whether a uprobe at `offset` of the file at `path` is one steadytrace never places, for the kernel would
/// misread the instruction there ([`crate::code::arch::Arch::uprobe_misread`]); false when the file cannot be read.
pub fn misread_at(path: &Path, offset: u64) -> bool {
    std::fs::File::open(path).is_ok_and(|file| misread(&file, offset))
}

/// Why steadytrace itself refuses a uprobe the kernel might accept.
#[derive(Debug)]
struct Misread;

impl std::fmt::Display for Misread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "an AVX instruction there, which the kernel's uprobes take for another one and would run \
             wrongly in every process",
        )
    }
}

impl std::error::Error for Misread {}

fn misread_error() -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, Misread)
}

/// The kernel-internal "not supported" errno, which libc has no message for ("Unknown error 524").
pub const ENOTSUPP: i32 = 524;

/// Whether one offset was refused (rather than the request as a whole): ENOTSUPP and ENOEXEC from the
/// kernel's instruction decoder, EINVAL for an offset beyond the file's end, or an instruction the kernel
/// would misread.
pub fn refuses_offset(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(ENOTSUPP | libc::ENOEXEC | libc::EINVAL))
        || error.get_ref().is_some_and(|inner| inner.is::<Misread>())
}

/// Why the kernel refused a uprobe at an offset, in words.
pub fn refusal_reason(error: &io::Error) -> String {
    match error.raw_os_error() {
        Some(ENOTSUPP) => "ENOTSUPP: uprobes cannot step over the instruction there".into(),
        Some(libc::ENOEXEC) => "ENOEXEC: the kernel cannot decode the instruction there".into(),
        Some(libc::EINVAL) => "EINVAL: the offset is not in the file".into(),
        _ => error.to_string(),
    }
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::other("path contains a NUL byte"))
}

fn multi_link(prog: BorrowedFd<'_>, target: &UprobeTarget<'_>) -> io::Result<OwnedFd> {
    let path = c_path(target.path)?;
    let offsets = [target.offset as libc::c_ulong];
    let ref_ctr_offsets = [target.ref_ctr_offset as libc::c_ulong];
    let mut opts = link::options();
    opts.__bindgen_anon_1.uprobe_multi = libbpf_sys::bpf_link_create_opts__bindgen_ty_1__bindgen_ty_3 {
        flags: if target.retprobe { libbpf_sys::BPF_F_UPROBE_MULTI_RETURN } else { 0 },
        cnt: 1,
        path: path.as_ptr(),
        offsets: offsets.as_ptr(),
        ref_ctr_offsets: ref_ctr_offsets.as_ptr(),
        pid: target.pid.unwrap_or(0),
        ..Default::default()
    };
    // The path and offsets outlive the call.
    link::create(prog, libbpf_sys::BPF_TRACE_UPROBE_MULTI, &opts)
}

fn perf_uprobe(prog: BorrowedFd<'_>, target: &UprobeTarget<'_>) -> io::Result<PerfEvent> {
    let path = c_path(target.path)?;
    let spec = PerfEventSpec {
        type_: pmu_type("uprobe")?,
        // Bit 0 of config is the retprobe flag, bits 32-63 the semaphore's offset
        // (/sys/bus/event_source/devices/uprobe/format/).
        config: target.retprobe as u64 | target.ref_ctr_offset << 32,
        config1: path.as_ptr() as u64,
        config2: target.offset,
        sample: Sample::Period(1),
        bp_type: 0,
        inherit: false,
    };
    let (pid, cpu) = match target.pid {
        Some(pid) => (pid as i32, -1),
        None => (-1, target.cpu as i32),
    };
    let event = PerfEvent::open(&spec, pid, cpu)?.attach(prog)?;
    event.enable()?;
    Ok(event)
}

impl AsFd for Uprobe {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Uprobe::Link(fd) => fd.as_fd(),
            Uprobe::Perf(event) => event.as_fd(),
        }
    }
}
