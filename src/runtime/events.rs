//! Each record read from the ring buffer goes where it belongs: what steers the run (`exit()`, `unwatch()`,
//! a copied stack, an `errorf()`'s verdict) to the [`Control`], what prints to the [`Sink`]. After `exit()`
//! only END's records are acted on.

use super::control::Control;
use super::reader::{Look, Reader, Ring};
use super::sink::Sink;
use super::{system, Failure};
use crate::output::Event;
use std::cell::RefCell;
use std::io;

/// Acts on one record.
pub fn receive(data: &[u8], sink: &mut Sink<'_>, control: &Control) {
    control.record_read();
    if !control.acts_on_records() && !sink.is_stack_copy(data) {
        return;
    }
    let Some(event) = sink.decode(data) else { return };
    match event {
        Event::Exit(code) => control.exit(code),
        Event::Unwatch(address) => control.unwatch(address),
        Event::StackCopied => control.stack_copied(),
        Event::Log(log, _) if log.error => {
            control.error_logged();
            sink.write_event(event);
        }
        event => sink.write_event(event),
    }
}

/// Hands every record waiting in the ring buffer on, then flushes the output; what the look found.
pub fn drain(
    reader: &Reader<impl Ring>,
    sink: &RefCell<Sink<'_>>,
    control: &Control,
) -> Result<Look, Failure> {
    let look = reader.look(control).map_err(|e| system("reading the ring buffer failed", e))?;
    flush(sink, control)?;
    Ok(look)
}

/// Flushes the output, turning a closed pipe into a quiet stop.
pub fn flush(sink: &RefCell<Sink<'_>>, control: &Control) -> Result<(), Failure> {
    match sink.borrow_mut().flush() {
        // A closed pipe (`steadytrace ... | head`) ends tracing quietly, like any filter.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
            control.stop(0);
            Ok(())
        }
        Err(e) => Err(system("cannot write the output", e)),
        Ok(()) => Ok(()),
    }
}

/// Says the records lost since the last time asked, in the output as the format has it.
pub fn report_lost(reader: &Reader<impl Ring>, sink: &RefCell<Sink<'_>>) {
    let lost = reader.newly_lost();
    if lost > 0 {
        sink.borrow_mut().report_lost(lost);
    }
}
