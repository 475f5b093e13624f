//! What runs beside tracing when the script or the command line asks for it: the journal of process
//! mappings (user frames of exited processes named), the packet capture of `skboutput()`, and the
//! `--metrics` endpoint, with the health and copied stacks they share with the event reader.

use super::captures::{CaptureThread, Captured};
use super::control::Control;
use super::copied_stacks::SharedCopies;
use super::health::Health;
use super::journal::JournalThread;
use super::load::Loaded;
use super::{metrics, system, Failure, Settings};
use crate::codegen::Compiled;
use crate::metrics::server::Endpoint;
use std::sync::Arc;

pub struct Companions {
    pub journal: Option<JournalThread>,
    captures: Option<CaptureThread>,
    pub health: Arc<Health>,
    pub copies: SharedCopies,
    /// Served until the run is over.
    _metrics: Option<Endpoint>,
}

impl Companions {
    /// Starts what `compiled` and `settings` ask for, before anything is attached.
    pub fn start(compiled: &Compiled, settings: &Settings, loaded: &Loaded) -> Result<Companions, Failure> {
        let journal = start_journal(compiled, settings.verbose);
        let captures = start_captures(compiled, loaded, settings.ring_pages)?;
        let health = Arc::new(Health::default());
        let copies = SharedCopies::default();
        let metrics = start_metrics(compiled, settings, loaded, &health, &copies)?;
        Ok(Companions { journal, captures, health, copies, _metrics: metrics })
    }

    /// Stops the journal and the capture, saying what they lost; a capture that failed fails the run.
    pub fn stop(&mut self, verbose: bool, control: &Control) {
        if let Some(journal) = self.journal.take() {
            let lost = journal.stop().lock().lost;
            if lost > 0 {
                crate::stderr!(
                    "steadytrace: the journal of process mappings lost {lost} record{}: the frames of some exited processes may stay addresses",
                    if lost == 1 { "" } else { "s" }
                );
            }
        }
        if let Some(captures) = self.captures.take() {
            report_captures(captures.stop(), verbose, control);
        }
    }
}

/// The journal of process mappings, when the script keeps user stacks or `usym` symbols in maps: their frames
/// get names even when the process exited before the maps are printed. Without it (perf_event_open denied) they
/// are named while the process lives, as before.
fn start_journal(compiled: &Compiled, verbose: bool) -> Option<JournalThread> {
    use crate::sema::{maps::MapValue, types::Type};
    let user_symbol = |ty: &Type| matches!(ty, Type::Symbol { user: true });
    let symbols_in_maps = compiled.script_maps.iter().any(|decl| {
        decl.key.iter().any(user_symbol) || matches!(&decl.value, MapValue::Plain(ty) if user_symbol(ty))
    });
    let user_stacks =
        compiled.stack_maps.iter().any(|&(user, _)| user) || compiled.records.copies_user_stacks();
    if !symbols_in_maps && !user_stacks {
        return None;
    }
    let cpus: Vec<u32> = crate::online_cpus::online().unwrap_or_default().into_iter().collect();
    match JournalThread::start(&cpus) {
        Ok(journal) => Some(journal),
        Err(e) => {
            if verbose {
                crate::stderr!("steadytrace: no journal of process mappings ({e}): exited processes' frames stay addresses");
            }
            None
        }
    }
}

/// The packet capture of `skboutput()`, when the script has one: its files are created and its rings opened
/// before anything is attached.
fn start_captures(
    compiled: &Compiled,
    loaded: &Loaded,
    ring_pages: Option<u64>,
) -> Result<Option<CaptureThread>, Failure> {
    if compiled.records.captures().is_empty() {
        return Ok(None);
    }
    let map = loaded.maps[compiled.layout.packets()]
        .try_clone()
        .map_err(|e| system("cannot open the packets map", e))?;
    let pages = ring_pages.and_then(|p| usize::try_from(p).ok());
    CaptureThread::start(compiled.records.captures(), map, pages).map(Some).map_err(Failure::Other)
}

fn report_captures(captured: Result<Captured, String>, verbose: bool, control: &Control) {
    match captured {
        Ok(captured) => {
            if captured.lost > 0 {
                crate::stderr!(
                    "steadytrace: {} packet{} lost: skboutput()'s rings were full (config perf_rb_pages sets their size)",
                    captured.lost,
                    if captured.lost == 1 { " was" } else { "s were" }
                );
            }
            if verbose {
                crate::stderr!("steadytrace: skboutput() wrote {} packets", captured.written);
            }
        }
        Err(e) => {
            crate::stderr!("steadytrace: {e}");
            control.stop(1);
        }
    }
}

/// `--metrics`: its own map handles and thread, so that a scrape never waits for the event reader, nor holds
/// it up.
fn start_metrics(
    compiled: &Compiled,
    settings: &Settings,
    loaded: &Loaded,
    health: &Arc<Health>,
    copies: &SharedCopies,
) -> Result<Option<Endpoint>, Failure> {
    let Some(metrics) = &settings.metrics else { return Ok(None) };
    let source = metrics::MetricsSource::new(
        compiled,
        &loaded.maps,
        Arc::clone(health),
        Arc::clone(copies),
        metrics.max_keys,
    )
    .map_err(|e| system("cannot open the maps for --metrics", e))?;
    let web = Arc::clone(&metrics.web);
    let scheme = if web.tls.is_some() { "https" } else { "http" };
    let endpoint = Endpoint::start(metrics.address, web, move |format, counts| source.scrape(format, counts))
        .map_err(Failure::Other)?;
    // Said where the kernel chose the port, or with -v.
    if settings.verbose || metrics.address.port() == 0 {
        crate::stderr!("steadytrace: serving metrics at {scheme}://{}/metrics", endpoint.address);
    }
    Ok(Some(endpoint))
}
