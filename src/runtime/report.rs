//! What steadytrace says of the run itself, beside the script's output: how each probe runs (`-v`), and
//! when tracing ends, what CPU hotplug made it do and what was lost on the way (never silently).

use super::health;
use super::load::{Firing, Loaded};
use super::percpu::Revivals;
use super::sink::Sink;
use super::timer::{IntervalCounts, Timer};
use super::Settings;
use crate::codegen::Compiled;
use crate::output::writer::Format;
use bpf::{AttachMode, Map};
use std::cell::RefCell;

/// `-v`: the ring buffer's size, and how each probe runs.
pub fn describe_probes(compiled: &Compiled, loaded: &Loaded, ring_bytes: u32) {
    crate::stderr!("the ring buffer holds {} KiB", ring_bytes / 1024);
    for (program, firing) in compiled.programs.iter().zip(&loaded.firings) {
        let how = match (firing, loaded.uprobe_mode) {
            (Firing::OnRequest(_), _) => "runs on request (BPF_PROG_TEST_RUN)",
            (Firing::Kernel(_), _) => &program.point.provider.describe(),
            (_, Some(AttachMode::UprobeMulti)) => "runs through the trigger's uprobe (a uprobe_multi link)",
            _ => "runs through the trigger's uprobe (a perf uprobe event)",
        };
        crate::stderr!("{} {how}", program.point.name);
    }
}

/// `-v`: how the timer thread ran.
pub fn describe_timer(timer: &Timer) {
    let how = if timer.is_realtime() { "at real-time priority" } else { "as an ordinary thread" };
    crate::stderr!("the timer thread ran {how}");
}

/// What CPU hotplug made steadytrace do: on stderr with `-v`, and as a JSON line with `-f json`.
pub fn report_revivals(revivals: &Revivals, settings: &Settings, sink: &RefCell<Sink<'_>>) {
    let Revivals { reenabled, reopened, new_cpu, moved } = *revivals;
    if settings.verbose {
        crate::stderr!(
            "steadytrace: hotplug: {reopened} event(s) reopened, {reenabled} re-enabled, {new_cpu} opened on new CPUs, {moved} moved"
        );
    }
    if settings.format == Format::Json {
        sink.borrow_mut().write_raw(&crate::output::json::revivals(reopened, reenabled, new_cpu, moved));
    }
}

/// Says which maps refused updates because they were full, if any: never silently. A declared map said so at
/// each failure already, as bpftrace does.
pub fn report_dropped_updates(compiled: &Compiled, dropped: &Map) {
    for (decl, failed) in compiled.script_maps.iter().zip(health::dropped_updates(dropped)) {
        if failed > 0 && !compiled.records.warns_of_failed_updates(&decl.name) {
            let (name, storage) = (&decl.name, if decl.is_per_cpu() { "percpuhash" } else { "hash" });
            crate::stderr!(
                "steadytrace: @{name}: {failed} update{} dropped: the map was full (declare it larger: `let @{name} = {storage}(N);`)",
                if failed == 1 { "" } else { "s" }
            );
        }
    }
}

/// Says what was lost, if anything: periods the timer skipped, firings refused, output records lost.
pub fn report_losses(timer: Option<&Timer>, lost: u64) {
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    for IntervalCounts { name, skipped, failed } in timer.map(Timer::counts).unwrap_or_default() {
        if skipped > 0 {
            crate::stderr!(
                "steadytrace: {name}: {skipped} period{} skipped (the timer thread woke up more than a period late)",
                plural(skipped)
            );
        }
        if failed > 0 {
            crate::stderr!(
                "steadytrace: {name}: {failed} firing{} failed (the kernel refused to run the program)",
                plural(failed)
            );
        }
    }
    if lost > 0 {
        crate::stderr!("steadytrace: {lost} output record{} lost: the ring buffer was full", plural(lost));
    }
}
