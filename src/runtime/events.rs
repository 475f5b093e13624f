//! The event loop's parts: the sink that acts on records, and the pipe that turns signals into
//! something `poll` can wait on together with the ring buffer.

use super::copied_stacks::{self, SharedCopies};
use super::{maps, system, Failure};
use crate::codegen::Compiled;
use crate::output::writer::Format;
use crate::output::{decode, Event};
use bpf::ringbuf::RingBufReader;
use bpf::Map;
use nix::poll::PollTimeout;
use std::cell::RefCell;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

/// Where records go: acted on until `exit()` is seen; after it, only END's records are.
pub struct Sink<'a> {
    pub out: &'a mut dyn Write,
    pub format: Format,
    compiled: &'a Compiled,
    /// The script's maps, in declaration order.
    maps: &'a [Map],
    stacks: maps::StackTable<'a>,
    /// `dw_ustack`'s unwound stacks and the entries folded out of maps keyed by them.
    copies: SharedCopies,
    pub exit_code: Option<i64>,
    pub in_end: bool,
    /// Records handed to the sink so far.
    pub records: u64,
    /// Of them, copied user stacks (`dw_ustack`): each fills 16 KiB of the ring buffer.
    pub stack_copies: u64,
    /// Config `max_cat_bytes`: the most bytes of a file `cat()` prints.
    pub max_cat_bytes: u64,
    /// `errorf()` messages seen so far: under `--test` each fails its test.
    pub errors: u64,
    /// `errorf()` and `warnf()` messages go to the output rather than to stderr (`--test` keeps a
    /// test's messages with its output).
    pub logs_in_output: bool,
    /// Addresses `unwatch()` named, for the event loop to remove their watchpoints.
    pub unwatched: Vec<u64>,
    /// While an iterator runs, `exit()` waits for its end: its code is kept here meanwhile.
    pub defer_exit: bool,
    pub deferred_exit: Option<i64>,
    /// `errorf()`/`warnf()` messages for stderr held back (BEGIN's, until "Attached N probes" is written, as
    /// bpftrace orders the two); `None` while they go straight out.
    held_stderr: Option<Vec<u8>>,
    error: Option<io::Error>,
}

impl Drop for Sink<'_> {
    /// Messages still held when tracing stops early (attaching failed) are not lost.
    fn drop(&mut self) {
        self.release_stderr();
    }
}

impl<'a> Sink<'a> {
    pub fn new(
        out: &'a mut dyn Write,
        format: Format,
        compiled: &'a Compiled,
        all_maps: &'a [Map],
        copies: SharedCopies,
    ) -> Sink<'a> {
        let script_maps = &all_maps[compiled.layout.script_maps()];
        let stack_maps = &all_maps[compiled.layout.stack_maps()];
        let stacks = maps::StackTable::new(stack_maps, &compiled.stack_maps, Arc::clone(&copies));
        Sink {
            out,
            format,
            compiled,
            maps: script_maps,
            stacks,
            copies,
            exit_code: None,
            in_end: false,
            records: 0,
            stack_copies: 0,
            max_cat_bytes: 10240,
            errors: 0,
            logs_in_output: false,
            unwatched: vec![],
            defer_exit: false,
            deferred_exit: None,
            held_stderr: None,
            error: None,
        }
    }

    /// Holds back the messages for stderr until [`Sink::release_stderr`].
    pub fn hold_stderr(&mut self) {
        self.held_stderr.get_or_insert_with(Vec::new);
    }

    /// Writes the messages for stderr held so far, and the later ones as they come.
    pub fn release_stderr(&mut self) {
        if let Some(held) = self.held_stderr.take() {
            use std::io::Write as _;
            let _ = std::io::stderr().write_all(&held);
        }
    }

    /// Names the user frames of exited processes from `journal` too.
    pub fn use_journal(&mut self, journal: crate::symbols::journal::Journal) {
        self.stacks.use_journal(journal);
    }

    /// Writes bytes as they are (a line already in the output format).
    pub fn write_raw(&mut self, bytes: &[u8]) {
        self.write(bytes);
    }

    fn write(&mut self, bytes: &[u8]) {
        if let Err(e) = self.out.write_all(bytes) {
            self.error.get_or_insert(e);
        }
    }

    pub fn record(&mut self, data: &[u8]) {
        self.records += 1;
        // A copied user stack is taken even after `exit()`: the maps printed at exit hold its handle.
        if self.exit_code.is_some() && !self.in_end && !is_stack_copy(&self.compiled.records, data) {
            return;
        }
        let Some(event) = decode(&self.compiled.records, data, &mut self.stacks) else { return };
        let result = match event {
            Event::Printf(text) => {
                let bytes = self.format.printf(&text);
                self.write(&bytes);
                Ok(())
            }
            Event::Log(log, text) => {
                self.log(log, &text);
                Ok(())
            }
            Event::Cat(path) => {
                self.cat(&String::from_utf8_lossy(&path));
                Ok(())
            }
            Event::System(command) => {
                let command = String::from_utf8_lossy(&command).into_owned();
                match super::shell::run(&command) {
                    Ok(output) => {
                        let bytes = self.format.system(&output);
                        self.write(&bytes);
                    }
                    Err(e) => crate::stderr!("ERROR: system(\"{command}\") could not run: {e}"),
                }
                Ok(())
            }
            Event::Join(joined) => {
                let bytes = self.format.join(&joined);
                self.write(&bytes);
                Ok(())
            }
            Event::Exit(code) if self.defer_exit => {
                self.deferred_exit.get_or_insert(code);
                Ok(())
            }
            Event::Exit(code) => {
                self.exit_code.get_or_insert(code);
                Ok(())
            }
            Event::PrintMap { map, top, div } => {
                let decl = &self.compiled.script_maps[map];
                maps::snapshot(&self.maps[map], decl, &mut self.stacks, maps::Reading::Live).map(|snapshot| {
                    let snapshot = crate::output::decode::with_zero_scalar(snapshot, decl, &mut self.stacks);
                    // Current bpftrace prints nothing for a map without entries (0.17 printed an empty line).
                    if snapshot.entries.is_empty() && self.format != Format::Json {
                        return;
                    }
                    let bytes = self.format.map(&snapshot, top, div);
                    self.write(&bytes);
                })
            }
            Event::ClearMap(map) => {
                copied_stacks::lock(&self.copies).clear(&self.compiled.script_maps[map].name);
                maps::clear(&self.maps[map])
            }
            Event::ZeroMap(map) => {
                copied_stacks::lock(&self.copies).zero(&self.compiled.script_maps[map].name);
                maps::zero(&self.maps[map], &self.compiled.script_maps[map])
            }
            Event::PrintValue(value) => {
                let bytes = self.format.value(&value);
                self.write(&bytes);
                Ok(())
            }
            Event::Unwatch(address) => {
                self.unwatched.push(address);
                Ok(())
            }
            Event::StackCopied => {
                self.stack_copies += 1;
                Ok(())
            }
            Event::Warning(text) => {
                crate::stderr!("{}", text.trim_end());
                Ok(())
            }
            Event::Time(format) => {
                let bytes = self.format.time(&local_time(format));
                self.write(&bytes);
                Ok(())
            }
        };
        if let Err(e) = result {
            self.error.get_or_insert(e);
        }
    }

    /// A `log_*()` line: into the output where logs go there, else to stderr (held back until "Attached").
    fn log(&mut self, log: &crate::codegen::record::Log, text: &[u8]) {
        self.errors += u64::from(log.error);
        match self.format.log(log, text) {
            (bytes, _) if self.logs_in_output => self.write(&bytes),
            (bytes, true) => match &mut self.held_stderr {
                Some(held) => held.extend_from_slice(&bytes),
                None => {
                    use std::io::Write as _;
                    let _ = std::io::stderr().write_all(&bytes);
                }
            },
            (bytes, false) => self.write(&bytes),
        }
    }

    /// `cat(path)`: the file read when the record arrives, as bpftrace does; one that cannot be read says why.
    fn cat(&mut self, path: &str) {
        let mut contents = vec![];
        let read = std::fs::File::open(path).and_then(|file| {
            std::io::Read::read_to_end(&mut std::io::Read::take(file, self.max_cat_bytes), &mut contents)
        });
        match read {
            Ok(_) => {
                let bytes = self.format.cat(&contents);
                self.write(&bytes);
            }
            Err(e) => {
                // In bpftrace's words; the errno's text without Rust's "(os error N)".
                let why =
                    e.raw_os_error().map_or(e.to_string(), |n| nix::errno::Errno::from_raw(n).desc().into());
                crate::stderr!("ERROR: failed to open file '{path}' ({why})")
            }
        }
    }

    /// Takes the entries of maps keyed by `dw_ustack` whose stacks are unwound out of the kernel's maps
    /// (see [`copied_stacks`]).
    pub fn fold_copied_stacks(&mut self) {
        let decls = &self.compiled.script_maps;
        // A handle merged into a folded entry is forgotten only where nothing else can ask for it: no other map
        // keyed by it (folded or not), no map holding it as a value, no record printing it.
        let keyed = decls.iter().filter(|d| !copied_stacks::handle_offsets(&d.key, 0).is_empty()).count();
        let forget = keyed == 1
            && !decls.iter().any(copied_stacks::holds_copies)
            && !self.compiled.records.prints_copied_stacks();
        for (map, decl) in self.maps.iter().zip(decls) {
            if copied_stacks::folds(decl) {
                if let Err(e) = copied_stacks::fold(map, decl, &self.copies, forget) {
                    self.error.get_or_insert(e);
                }
            }
        }
    }

    /// Every script map, printed as bpftrace does when tracing ends: after two blank lines, which
    /// bpftrace 0.17 prints even when a script has no maps, and current bpftrace also under config
    /// `print_maps_on_exit = false` (`with_maps` false), which leaves the maps out.
    pub fn print_maps_at_exit(&mut self, with_maps: bool) -> io::Result<()> {
        let snapshots = self
            .maps
            .iter()
            .zip(&self.compiled.script_maps)
            .filter(|_| with_maps)
            .map(|(map, decl)| maps::snapshot(map, decl, &mut self.stacks, maps::Reading::Final))
            .collect::<io::Result<Vec<_>>>()?;
        // A map without entries is not shown, as in current bpftrace (0.17 showed a scalar count as `@: 0` and
        // an empty keyed map as an empty line).
        let snapshots: Vec<_> =
            snapshots.into_iter().filter(|snapshot| !snapshot.entries.is_empty()).collect();
        let bytes = self.format.maps_at_exit(&snapshots);
        self.write(&bytes);
        Ok(())
    }
}

fn is_stack_copy(records: &crate::codegen::record::Records, data: &[u8]) -> bool {
    let id = data.get(..8).map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")));
    matches!(id.and_then(|id| records.get(id)), Some(crate::codegen::record::Record::UserStackCopy { .. }))
}

/// The local time now, formatted with strftime.
fn local_time(format: &str) -> Vec<u8> {
    let Ok(format) = std::ffi::CString::new(format) else { return vec![] };
    crate::sys::local_time(&format)
}

/// Hands every record waiting in the ring buffer to the sink, then flushes the output.
pub fn drain(reader: &RingBufReader<'_>, sink: &RefCell<Sink<'_>>) -> Result<(), Failure> {
    reader.drain().map_err(|e| system("reading the ring buffer failed", e))?;
    flush(sink)
}

/// Flushes the output, turning a closed pipe into a quiet stop.
pub fn flush(sink: &RefCell<Sink<'_>>) -> Result<(), Failure> {
    let mut sink = sink.borrow_mut();
    let flushed = sink.out.flush();
    match sink.error.take().map_or(flushed, Err) {
        // A closed pipe (`steadytrace ... | head`) ends tracing quietly, like any filter.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
            sink.exit_code.get_or_insert(0);
            Ok(())
        }
        Err(e) => Err(system("cannot write the output", e)),
        Ok(()) => Ok(()),
    }
}

/// SIGINT and SIGTERM, turned into a readable pipe; SIGUSR1 into another (it runs `self:signal:SIGUSR1`
/// probes, and no longer ends the process).
pub struct SignalPipe {
    read: OwnedFd,
    usr1: OwnedFd,
    _ids: Vec<signal_hook::SigId>,
}

impl SignalPipe {
    pub fn new() -> io::Result<SignalPipe> {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)?;
        let write = std::os::unix::net::UnixStream::from(write);
        let mut ids = vec![];
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            ids.push(signal_hook::low_level::pipe::register(signal, write.try_clone()?)?);
        }
        let (usr1, usr1_write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)?;
        let usr1_write = std::os::unix::net::UnixStream::from(usr1_write);
        ids.push(signal_hook::low_level::pipe::register(signal_hook::consts::SIGUSR1, usr1_write)?);
        Ok(SignalPipe { read, usr1, _ids: ids })
    }

    /// Becomes readable when SIGUSR1 arrives.
    pub fn usr1_fd(&self) -> RawFd {
        self.usr1.as_raw_fd()
    }

    /// Whether SIGUSR1 came since the last call (however many times).
    pub fn take_usr1(&self) -> bool {
        let mut byte = [0u8; 64];
        let mut came = false;
        while nix::unistd::read(self.usr1.as_raw_fd(), &mut byte).is_ok_and(|n| n > 0) {
            came = true;
        }
        came
    }

    /// Whether SIGINT or SIGTERM came, without waiting (the signal stays pending for `wait`).
    pub fn arrived(&self) -> bool {
        crate::sys::poll_readable(&[self.read.as_raw_fd()], PollTimeout::ZERO).is_ok_and(|r| r[0])
    }

    /// Waits for records, a signal, one of `also` becoming readable, or `timeout`.
    pub fn wait(
        &self,
        reader: &RingBufReader<'_>,
        also: &[RawFd],
        timeout: Option<Duration>,
    ) -> io::Result<Wake> {
        let mut fds = vec![reader.wait_fd(), self.read.as_raw_fd()];
        fds.extend_from_slice(also);
        let timeout =
            timeout.map_or(PollTimeout::NONE, |t| PollTimeout::try_from(t).unwrap_or(PollTimeout::MAX));
        let readable = crate::sys::poll_readable(&fds, timeout)?;
        Ok(Wake { signal: readable[1], also: readable[2..].to_vec() })
    }
}

/// What ended a wait.
#[derive(Debug, Default)]
pub struct Wake {
    /// SIGINT or SIGTERM: stop.
    pub signal: bool,
    /// Which of the extra descriptors became readable, in order.
    pub also: Vec<bool>,
}

impl Wake {
    pub fn also(&self, index: usize) -> bool {
        self.also.get(index).copied().unwrap_or(false)
    }
}
