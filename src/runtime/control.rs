//! The run's control state, apart from the output: whether tracing is to stop and with which code (an
//! `exit()` record, a closed output pipe, a failure beside tracing), whether END is running, the watchpoints
//! `unwatch()` asked to remove, and the counts the event loop and `--test` go by. The event loop's stages
//! and the record handler share one `Control`; its cells never hold a borrow across a call.

use std::cell::{Cell, RefCell};

#[derive(Default)]
pub struct Control {
    exit_code: Cell<Option<i64>>,
    /// While an iterator runs, `exit()` waits for its end: its code is kept here meanwhile.
    defer_exit: Cell<bool>,
    deferred_exit: Cell<Option<i64>>,
    /// END's probes run: their records are acted on after `exit()`.
    in_end: Cell<bool>,
    /// Addresses `unwatch()` named, for the event loop to remove their watchpoints.
    unwatched: RefCell<Vec<u64>>,
    /// Records read so far.
    records: Cell<u64>,
    /// Of them, copied user stacks (`dw_ustack`): each fills 16 KiB of the ring buffer.
    stack_copies: Cell<u64>,
    /// `errorf()` messages seen so far: under `--test` each fails its test.
    errors: Cell<u64>,
}

impl Control {
    /// The code tracing stops with, once it is to stop.
    pub fn exit_code(&self) -> Option<i64> {
        self.exit_code.get()
    }

    pub fn stopping(&self) -> bool {
        self.exit_code.get().is_some()
    }

    /// Tracing is to stop with `code`, unless it already is to stop.
    pub fn stop(&self, code: i64) {
        self.exit_code.set(Some(self.exit_code.get().unwrap_or(code)));
    }

    /// An `exit()` record: stops tracing, or waits for the iteration's end while [`Control::defer_exits`].
    pub fn exit(&self, code: i64) {
        match self.defer_exit.get() {
            true => self.deferred_exit.set(Some(self.deferred_exit.get().unwrap_or(code))),
            false => self.stop(code),
        }
    }

    /// From now on `exit()` waits for [`Control::end_deferral`].
    pub fn defer_exits(&self) {
        self.defer_exit.set(true);
    }

    /// The iteration ended: an `exit()` it deferred takes effect.
    pub fn end_deferral(&self) {
        self.defer_exit.set(false);
        if let Some(code) = self.deferred_exit.take() {
            self.stop(code);
        }
    }

    /// Forgets an `exit()` (`--test` and `--bench` run each probe as if none came before).
    pub fn clear_exit(&self) {
        self.exit_code.set(None);
    }

    /// END's probes run from now on.
    pub fn enter_end(&self) {
        self.in_end.set(true);
    }

    /// Whether records are acted on: until `exit()`, and again for END's.
    pub fn acts_on_records(&self) -> bool {
        !self.stopping() || self.in_end.get()
    }

    pub fn unwatch(&self, address: u64) {
        self.unwatched.borrow_mut().push(address);
    }

    /// The addresses `unwatch()` named since the last call.
    pub fn take_unwatched(&self) -> Vec<u64> {
        self.unwatched.take()
    }

    pub fn record_read(&self) {
        self.records.set(self.records.get() + 1);
    }

    pub fn stack_copied(&self) {
        self.stack_copies.set(self.stack_copies.get() + 1);
    }

    /// (records, copied user stacks) read so far.
    pub fn read(&self) -> (u64, u64) {
        (self.records.get(), self.stack_copies.get())
    }

    pub fn error_logged(&self) {
        self.errors.set(self.errors.get() + 1);
    }

    /// `errorf()` messages since [`Control::clear_errors`].
    pub fn errors(&self) -> u64 {
        self.errors.get()
    }

    pub fn clear_errors(&self) {
        self.errors.set(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_reason_to_stop_wins() {
        let control = Control::default();
        assert!(control.acts_on_records());
        control.exit(3);
        control.stop(0);
        assert_eq!(control.exit_code(), Some(3));
        assert!(!control.acts_on_records(), "records after exit() are dropped");
        control.enter_end();
        assert!(control.acts_on_records(), "END's are not");
    }

    #[test]
    fn an_exit_during_an_iteration_waits_for_its_end() {
        let control = Control::default();
        control.defer_exits();
        control.exit(2);
        control.exit(5);
        assert_eq!(control.exit_code(), None);
        control.end_deferral();
        assert_eq!(control.exit_code(), Some(2));
    }
}
