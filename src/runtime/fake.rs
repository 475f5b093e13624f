//! A fake kernel for the runtime's unit tests, which need no root and no kernel: CPUs that go offline and
//! come back, per-CPU events that behave as the kernel's do (an event dies with its CPU, and ENABLE revives
//! it only where `revives` is set), probes that attach and detach, and a ring of records. It stands behind
//! the same seams as the kernel does in a run (`percpu::Opener`, `hotplug::OnlineCpus`, `Provider::attach`,
//! `reader::Ring`), and logs every call made of it, in order.

use super::cpus::Change;
use super::hotplug::OnlineCpus;
use super::percpu::Opener;
use super::reader::Ring;
use crate::lang::Span;
use crate::probes::{AttachError, AttachPoint, AttachTarget, Attachment, Provider};
use bpf::ProgType;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, MutexGuard};

/// A call the runtime made of the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    Attach(String),
    Detach(String),
    /// A per-CPU event opened (attached to its program, disabled).
    Open {
        probe: usize,
        cpu: u32,
    },
    Enable {
        probe: usize,
        cpu: u32,
    },
    Close {
        probe: usize,
        cpu: u32,
    },
}

/// The machine's state; its fields are the tests' to set.
#[derive(Debug, Default)]
pub struct State {
    pub calls: Vec<Call>,
    pub online: BTreeSet<u32>,
    /// How many times each CPU has come online; an event lives in the epoch it was opened or revived in.
    pub epochs: BTreeMap<u32, u64>,
    /// Whether ENABLE revives an event whose CPU went offline and came back.
    pub revives: bool,
    /// Opens still to fail, per CPU: (how many, errno); ENODEV for a CPU still coming up.
    pub refusals: BTreeMap<u32, (u32, i32)>,
    pub opens: u32,
    pub enables: u32,
    /// Events not closed yet.
    pub open_events: i64,
    /// Reads of an event's enabled time (each an interrupt to its CPU, in a kernel).
    pub time_reads: u64,
    /// Advances on every read of a live event's enabled time.
    clock: u64,
    /// Probes whose attaching fails.
    refused: BTreeSet<String>,
    attached: usize,
}

#[derive(Clone)]
pub struct FakeKernel {
    state: Arc<Mutex<State>>,
    /// A descriptor to hand on as a loaded program (the fake probes never look at it).
    program: Arc<File>,
}

impl Default for FakeKernel {
    fn default() -> FakeKernel {
        FakeKernel::with_cpus(1, &[0], false)
    }
}

impl FakeKernel {
    /// `cpus` possible CPUs, of which `online` are online; `revives`: whether ENABLE revives events.
    pub fn with_cpus(cpus: u32, online: &[u32], revives: bool) -> FakeKernel {
        let state = State {
            online: online.iter().copied().collect(),
            epochs: (0..cpus).map(|cpu| (cpu, 0)).collect(),
            revives,
            ..State::default()
        };
        let program = File::open("/dev/null").expect("/dev/null opens");
        FakeKernel { state: Arc::new(Mutex::new(state)), program: Arc::new(program) }
    }

    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The calls made so far.
    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    /// Forgets the calls made so far.
    pub fn clear_calls(&self) {
        self.state().calls.clear();
    }

    pub fn online(&self) -> Vec<u32> {
        self.state().online.iter().copied().collect()
    }

    pub fn take_offline(&self, cpu: u32) {
        self.state().online.remove(&cpu);
    }

    /// `cpu` comes online: the events it had are dead (but where ENABLE revives them).
    pub fn bring_online(&self, cpu: u32) {
        let mut state = self.state();
        state.online.insert(cpu);
        *state.epochs.entry(cpu).or_default() += 1;
    }

    /// The online CPUs as the hotplug thread reads them, as seen now.
    pub fn cpus(&self) -> FakeCpus {
        FakeCpus { kernel: self.clone(), seen: self.state().online.clone() }
    }

    /// Attach points of probes the kernel fires, one per name.
    pub fn probes(&self, names: &[&str]) -> Vec<AttachPoint> {
        let probe = |name: &&str| FakeProbe { name: name.to_string(), state: Arc::clone(&self.state) };
        names.iter().map(|name| AttachPoint::new(probe(name), name.to_string(), Span::default())).collect()
    }

    pub fn program(&self) -> BorrowedFd<'_> {
        self.program.as_fd()
    }

    /// Attaching the probe `name` fails from now on.
    pub fn refuse(&self, name: &str) {
        self.state().refused.insert(name.to_string());
    }

    /// Probes attached so far (detached or not).
    pub fn attached(&self) -> usize {
        self.state().attached
    }
}

/// A probe's event on one CPU.
pub struct Event {
    probe: usize,
    cpu: u32,
    epoch: Cell<u64>,
    enabled: Cell<bool>,
    kernel: FakeKernel,
}

impl Event {
    fn alive(&self) -> bool {
        let state = self.kernel.state();
        state.online.contains(&self.cpu) && state.epochs.get(&self.cpu) == Some(&self.epoch.get())
    }

    /// Whether it is enabled and alive: its probe fires on its CPU.
    pub fn counts(&self) -> bool {
        self.enabled.get() && self.alive()
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let mut state = self.kernel.state();
        state.open_events -= 1;
        state.calls.push(Call::Close { probe: self.probe, cpu: self.cpu });
    }
}

impl Opener for FakeKernel {
    type Event = Event;

    fn open(&mut self, probe: usize, cpu: u32) -> io::Result<Event> {
        let mut state = self.state();
        state.opens += 1;
        state.calls.push(Call::Open { probe, cpu });
        if let Some((left, errno)) = state.refusals.get_mut(&cpu).filter(|(left, _)| *left > 0) {
            *left -= 1;
            return Err(io::Error::from_raw_os_error(*errno));
        }
        if !state.online.contains(&cpu) {
            return Err(io::Error::from_raw_os_error(libc::ENODEV));
        }
        state.open_events += 1;
        let epoch = Cell::new(state.epochs[&cpu]);
        Ok(Event { probe, cpu, epoch, enabled: Cell::new(false), kernel: self.clone() })
    }

    fn enable(&self, event: &Event) -> io::Result<()> {
        let mut state = self.state();
        state.enables += 1;
        state.calls.push(Call::Enable { probe: event.probe, cpu: event.cpu });
        event.enabled.set(true);
        if state.revives && state.online.contains(&event.cpu) {
            event.epoch.set(state.epochs[&event.cpu]);
        }
        Ok(())
    }

    fn enabled_time(&self, event: &Event) -> io::Result<u64> {
        self.state().time_reads += 1;
        if event.counts() {
            let mut state = self.state();
            state.clock += 1000;
            return Ok(state.clock);
        }
        Ok(7) // frozen
    }
}

/// The online CPUs, read as `CpuWatcher` reads them: what changed since the last look. A CPU that went
/// offline and came back between two looks is not seen to.
pub struct FakeCpus {
    kernel: FakeKernel,
    seen: BTreeSet<u32>,
}

impl OnlineCpus for FakeCpus {
    fn online(&self) -> &BTreeSet<u32> {
        &self.seen
    }

    fn poll(&mut self) -> io::Result<Change> {
        let now = self.kernel.state().online.clone();
        let change = Change {
            went_offline: self.seen.difference(&now).copied().collect(),
            came_online: now.difference(&self.seen).copied().collect(),
        };
        self.seen = now;
        Ok(change)
    }
}

/// A probe the kernel fires; attaching and detaching it are logged.
#[derive(Debug)]
struct FakeProbe {
    name: String,
    state: Arc<Mutex<State>>,
}

impl FakeProbe {
    fn log(state: &Mutex<State>, call: Call) {
        state.lock().unwrap_or_else(|e| e.into_inner()).calls.push(call);
    }
}

/// Its attachment: dropping it detaches.
struct Attached(Arc<Mutex<State>>, String);

impl Drop for Attached {
    fn drop(&mut self) {
        FakeProbe::log(&self.0, Call::Detach(self.1.clone()));
    }
}

impl Provider for FakeProbe {
    fn kind(&self) -> &'static str {
        "fake"
    }

    fn prog_type(&self) -> ProgType {
        ProgType::RawTracepoint
    }

    fn describe(&self) -> String {
        format!("fake probe {}", self.name)
    }

    fn attach(&self, _: BorrowedFd<'_>, _: &AttachTarget) -> Result<Option<Attachment>, AttachError> {
        if self.state.lock().unwrap_or_else(|e| e.into_inner()).refused.contains(&self.name) {
            return Err(AttachError::Explained(format!("the kernel refused {}", self.name)));
        }
        FakeProbe::log(&self.state, Call::Attach(self.name.clone()));
        self.state.lock().unwrap_or_else(|e| e.into_inner()).attached += 1;
        Ok(Some(Attachment::new(Attached(Arc::clone(&self.state), self.name.clone()))))
    }
}

/// A ring of records, handed to its receiver in the order written; records written while it is full are
/// lost, and counted.
pub struct FakeRing<F> {
    pending: RefCell<VecDeque<Vec<u8>>>,
    lost: Cell<u64>,
    on_record: RefCell<F>,
    /// Readable while records wait.
    wake: (UnixStream, UnixStream),
}

impl<F: FnMut(&[u8])> FakeRing<F> {
    pub fn new(on_record: F) -> FakeRing<F> {
        let wake = UnixStream::pair().expect("a socket pair");
        wake.1.set_nonblocking(true).expect("non-blocking");
        FakeRing { pending: RefCell::default(), lost: Cell::new(0), on_record: RefCell::new(on_record), wake }
    }

    pub fn write(&self, records: &[&[u8]]) {
        self.pending.borrow_mut().extend(records.iter().map(|r| r.to_vec()));
        let _ = (&self.wake.0).write_all(&[1]);
    }

    /// `records` more found the ring full.
    pub fn overflow(&self, records: u64) {
        self.lost.set(self.lost.get() + records);
    }
}

impl<F: FnMut(&[u8])> Ring for FakeRing<F> {
    fn drain(&self) -> io::Result<()> {
        while (&self.wake.1).read(&mut [0u8; 64]).is_ok_and(|n| n > 0) {}
        loop {
            let Some(record) = self.pending.borrow_mut().pop_front() else { return Ok(()) };
            (self.on_record.borrow_mut())(&record);
        }
    }

    fn wait_fd(&self) -> RawFd {
        self.wake.1.as_raw_fd()
    }

    fn lost(&self) -> u64 {
        self.lost.get()
    }
}
