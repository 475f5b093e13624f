//! Attach points that name what does not exist here: a function a binary or the kernel lacks, a library
//! or a tracepoint that is not there. As in bpftrace (config `missing_probes`), such a point is skipped
//! with a warning (the default, as bpftrace 0.17 did), skipped silently, or an error; a script none of
//! whose attach points exist is an error whatever the setting (`sema::check`).

use super::{Arguments, AttachPoint, Context, Func, MissingProbes, Options, Provider, Retval};
use crate::lang::{Diagnostic, Span};
use bpf::ProgType;

/// The environment variable that sets `missing_probes` (`error`, `warn` or `ignore`), as in bpftrace.
pub const ENV: &str = "BPFTRACE_MISSING_PROBES";

/// What an attach point that names what does not exist (`problem`) resolves to under `options`.
pub fn skip_or_fail(problem: Diagnostic, options: &Options) -> Result<Vec<AttachPoint>, Diagnostic> {
    match options.missing_probes {
        MissingProbes::Error => {
            let skip =
                format!("to run without it, set `config = {{ missing_probes = \"warn\" }}` or {ENV}=warn");
            let help = match &problem.help {
                Some(help) => format!("{help}; {skip}"),
                None => skip,
            };
            Err(problem.with_help(help))
        }
        MissingProbes::Warn if !options.no_warnings => {
            crate::stderr!("steadytrace: warning: {}: skipped", problem.message);
            Ok(vec![])
        }
        MissingProbes::Warn | MissingProbes::Ignore => Ok(vec![]),
    }
}

/// Stands in for the attach points of a probe that was skipped whole. It never runs; its probe is only
/// read for the maps it gives values to, so that the probes that do run read them as in bpftrace (with
/// `kprobe:blk_account_io_start` absent, biolatency's `@start` is still a map, reading 0).
#[derive(Debug)]
pub struct Absent;

impl Absent {
    pub fn point(span: Span) -> AttachPoint {
        AttachPoint::new(Absent, "absent".to_string(), span)
    }
}

impl Provider for Absent {
    fn kind(&self) -> &'static str {
        "absent"
    }

    fn prog_type(&self) -> ProgType {
        ProgType::Kprobe
    }

    /// Everything a function probe offers, so that as much of the body as possible is understood.
    fn context(&self) -> Context {
        Context {
            arguments: Some(Arguments::Registers),
            retval: Some(Retval::REGISTER),
            func: Some(Func::Name(String::new())),
            user_addresses: false,
            ctx_record: None,
        }
    }

    fn describe(&self) -> String {
        "is skipped: what it names does not exist here".into()
    }
}
