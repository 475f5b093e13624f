//! Attach points that name what does not exist here: a function a binary or the kernel lacks, a library
//! or a tracepoint that is not there. As in bpftrace (config `missing_probes`), such a point is skipped
//! with a warning (the default, as bpftrace 0.17 did), skipped silently, or an error; a script none of
//! whose attach points exist is an error whatever the setting (`sema::check`).

use super::{AttachPoint, MissingProbes, Options};
use crate::lang::Diagnostic;

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
        MissingProbes::Warn => {
            crate::stderr!("steadytrace: warning: {}: skipped", problem.message);
            Ok(vec![])
        }
        MissingProbes::Ignore => Ok(vec![]),
    }
}
