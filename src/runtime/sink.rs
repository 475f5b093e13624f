//! The output sink: records decoded and written as the output format says (`printf`, maps, `cat()`,
//! `system()`, logs), map operations the records ask for done. What steers the run (`exit()`, `unwatch()`)
//! is not its business: that is `Control`'s (`events.rs` hands each record to one or the other).

use super::copied_stacks::{self, SharedCopies};
use super::maps;
use crate::codegen::record::{Record, Records};
use crate::codegen::Compiled;
use crate::output::writer::Format;
use crate::output::{decode, Event};
use bpf::Map;
use std::io::{self, Write};
use std::sync::Arc;

/// Where output goes.
pub struct Sink<'a> {
    out: &'a mut dyn Write,
    format: Format,
    compiled: &'a Compiled,
    /// The script's maps, in declaration order.
    maps: &'a [Map],
    stacks: maps::StackTable<'a>,
    /// `dw_ustack`'s unwound stacks and the entries folded out of maps keyed by them.
    copies: SharedCopies,
    /// Config `max_cat_bytes`: the most bytes of a file `cat()` prints.
    pub max_cat_bytes: u64,
    /// `errorf()` and `warnf()` messages go to the output rather than to stderr (`--test` keeps a
    /// test's messages with its output).
    pub logs_in_output: bool,
    /// Warnings (failed map updates, `warnf()`, reads `-k` checks) are printed; `--no-warnings` drops them.
    pub warnings: bool,
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
            max_cat_bytes: 10240,
            logs_in_output: false,
            warnings: true,
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

    /// Looks for binaries' separate debug files in `debug_dirs` (`--debuginfo`) first.
    pub fn use_debug_dirs(&mut self, debug_dirs: crate::symbols::DebugDirs) {
        self.stacks.use_debug_dirs(debug_dirs);
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
        let written = self.out.write_all(bytes);
        self.keep_error(written);
    }

    /// Whether `data` is a copied user stack: taken even after `exit()`, as the maps printed at exit hold its
    /// handle.
    pub fn is_stack_copy(&self, data: &[u8]) -> bool {
        let id = data.get(..8).map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")));
        matches!(id.and_then(|id| self.compiled.records.get(id)), Some(Record::UserStackCopy { .. }))
    }

    /// The event a record carries; `None` for one no program of the script sends.
    pub fn decode(&mut self, data: &[u8]) -> Option<Event<'a>> {
        let records: &'a Records = &self.compiled.records;
        decode(records, data, &mut self.stacks)
    }

    /// Writes what `event` prints, or does the map operation it asks for.
    pub fn write_event(&mut self, event: Event<'_>) {
        match event {
            Event::Printf(text) => self.write_formatted(|format| format.printf(&text)),
            Event::Log(log, text) => self.log(log, &text),
            Event::Cat(path) => self.cat(&String::from_utf8_lossy(&path)),
            Event::System(command) => self.system(&String::from_utf8_lossy(&command)),
            Event::Join(joined) => self.write_formatted(|format| format.join(&joined)),
            Event::PrintValue(value) => self.write_formatted(|format| format.value(&value)),
            Event::Time(format) => self.write_formatted(|f| f.time(&local_time(format))),
            Event::Warning(text) if self.warnings => crate::stderr!("{}", text.trim_end()),
            Event::Warning(_) => {}
            Event::ReadFailed(read, ret) if self.warnings => {
                let message = self.format.read_failed(read, ret);
                self.route(message);
            }
            Event::ReadFailed(..) => {}
            Event::PrintMap { map, top, div } => {
                let printed = self.print_map(map, top, div);
                self.keep_error(printed);
            }
            Event::ClearMap(map) => {
                copied_stacks::lock(&self.copies).clear(&self.compiled.script_maps[map].name);
                self.keep_error(maps::clear(&self.maps[map]));
            }
            Event::ZeroMap(map) => {
                copied_stacks::lock(&self.copies).zero(&self.compiled.script_maps[map].name);
                self.keep_error(maps::zero(&self.maps[map], &self.compiled.script_maps[map]));
            }
            // What steers the run is `Control`'s: nothing to write.
            Event::Exit(_) | Event::Unwatch(_) | Event::StackCopied => {}
        }
    }

    /// Keeps the first error, for the next flush to report.
    fn keep_error(&mut self, result: io::Result<()>) {
        if let Err(e) = result {
            self.error.get_or_insert(e);
        }
    }

    fn write_formatted(&mut self, format: impl FnOnce(Format) -> Vec<u8>) {
        let bytes = format(self.format);
        self.write(&bytes);
    }

    fn print_map(&mut self, map: usize, top: Option<usize>, div: Option<u64>) -> io::Result<()> {
        let decl = &self.compiled.script_maps[map];
        let snapshot = maps::snapshot(&self.maps[map], decl, &mut self.stacks, maps::Reading::Live)?;
        let snapshot = crate::output::decode::with_zero_scalar(snapshot, decl, &mut self.stacks);
        // Current bpftrace prints nothing for a map without entries (0.17 printed an empty line).
        if !snapshot.entries.is_empty() || self.format == Format::Json {
            let bytes = self.format.map(&snapshot, top, div);
            self.write(&bytes);
        }
        Ok(())
    }

    /// `system(command)`: its output, when it could run.
    fn system(&mut self, command: &str) {
        match super::shell::run(command) {
            Ok(output) => self.write_formatted(|format| format.system(&output)),
            Err(e) => crate::stderr!("ERROR: system(\"{command}\") could not run: {e}"),
        }
    }

    /// Records the ring buffer had no room for: in the output where the format has a record for them (JSON),
    /// else on stderr, as bpftrace says it.
    pub fn report_lost(&mut self, lost: u64) {
        match self.format.lost_events(lost) {
            Some(record) => self.write(&record),
            None => crate::stderr!("Lost {lost} events"),
        }
    }

    /// Flushes the output; the first error writing it since the last flush, if any.
    pub fn flush(&mut self) -> io::Result<()> {
        let flushed = self.out.flush();
        self.error.take().map_or(flushed, Err)
    }

    /// A `log_*()` line: into the output where logs go there, else to stderr (held back until "Attached").
    fn log(&mut self, log: &crate::codegen::record::Log, text: &[u8]) {
        if !log.error && !self.warnings {
            return;
        }
        let message = self.format.log(log, text);
        self.route(message);
    }

    /// Writes a message to the output, or to stderr when the format says so (held back while BEGIN's are).
    fn route(&mut self, message: (Vec<u8>, bool)) {
        match message {
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

/// The local time now, formatted with strftime.
fn local_time(format: &str) -> Vec<u8> {
    let Ok(format) = std::ffi::CString::new(format) else { return vec![] };
    crate::sys::local_time(&format)
}
