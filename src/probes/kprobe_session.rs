//! A kprobe and a kretprobe of the same function as one program on one kprobe session link (Linux 6.10), as
//! current bpftrace pairs them: the kernel runs the program at the function's entry and again at its return,
//! one attachment and one ftrace registration instead of two. Codegen joins the two programs
//! (`codegen::session`); the kretprobe's own point then attaches nothing.

use super::{Arguments, Func, Retval};
use super::{AttachError, AttachTarget, Attachment, Context, Provider};
use bpf::kprobe::{attach_multi, MultiKind};
use bpf::{AttachMode, ProgType};
use std::os::fd::BorrowedFd;

/// What a kprobe or kretprobe puts its program on, as far as pairing goes: one function, at its entry or
/// return.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionPart {
    pub function: String,
    pub retprobe: bool,
}

/// The joined program of a kprobe (`entry`, its probe's name) and a kretprobe (`exit`) of `function`.
#[derive(Debug)]
pub struct KprobeSession {
    pub function: String,
    pub entry: String,
    pub exit: String,
}

/// The kretprobe's point of a pair: its code runs in the session program of the kprobe `entry`.
#[derive(Debug)]
pub struct SessionReturn {
    pub entry: String,
}

impl Provider for KprobeSession {
    fn overrides_return(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        "kprobe"
    }

    fn prog_type(&self) -> ProgType {
        ProgType::Kprobe
    }

    fn attach_mode(&self) -> AttachMode {
        AttachMode::KprobeSession
    }

    /// Each part was compiled with its own probe's context; these are both parts' builtins.
    fn context(&self) -> Context {
        Context {
            arguments: Some(Arguments::Registers),
            retval: Some(Retval::REGISTER),
            func: Some(Func::Name(self.function.clone())),
            user_addresses: false,
            ctx_record: None,
        }
    }

    fn fires_in_any_process(&self) -> bool {
        true
    }

    fn attach(&self, program: BorrowedFd<'_>, _: &AttachTarget) -> Result<Option<Attachment>, AttachError> {
        let link = attach_multi(program, &[&self.function], &[], MultiKind::Session).map_err(|error| {
            AttachError::Os {
                what: format!("cannot attach the kprobe session of `{}`", self.function),
                error,
            }
        })?;
        Ok(Some(Attachment::new(link)))
    }

    fn describe(&self) -> String {
        format!(
            "runs on a kprobe session link with `{}`, one program at the entry and the return of {}",
            self.exit, self.function
        )
    }
}

impl Provider for SessionReturn {
    fn kind(&self) -> &'static str {
        "kretprobe"
    }

    fn prog_type(&self) -> ProgType {
        ProgType::Kprobe
    }

    fn context(&self) -> Context {
        Context { retval: Some(Retval::REGISTER), ..Context::default() }
    }

    fn fires_in_any_process(&self) -> bool {
        true
    }

    fn attach(&self, _: BorrowedFd<'_>, _: &AttachTarget) -> Result<Option<Attachment>, AttachError> {
        Ok(None)
    }

    fn describe(&self) -> String {
        format!("runs in the kprobe session program of `{}`", self.entry)
    }
}
