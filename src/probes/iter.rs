//! `iter:NAME` (alias `it:`): a BPF iterator, run once over every object of a kind (`task`, `task_file`,
//! `task_vma`, and the kernel's other iterators that need no parameter). steadytrace reads the iterator in a
//! thread of its own once everything is attached; the kernel runs the program for each object meanwhile,
//! and tracing ends when the iteration does. `ctx` is the kernel's `struct bpf_iter__NAME *`: `ctx.task`,
//! `ctx.fd`, `ctx.file`, `ctx.vma`. The program does nothing for the call that ends the iteration, whose
//! object is NULL. What the program prints goes through the ring buffer as any probe's output.
//!
//! `iter:NAME:PIN` pins the iterator at PIN on the BPF filesystem (relative to `/sys/fs/bpf`) instead:
//! each read of that file runs the program again, long after steadytrace has gone, and what it prints with
//! `printf` is the file's text (`bpf_seq_printf`, [`crate::codegen`]'s pinned printf).

use super::Fields;
use super::{AttachPoint, Context, Options, Provider};
use crate::kernel::{KernelTypes, Vmlinux};
use crate::lang::{Diagnostic, Span};
use bpf::{AttachMode, ProgType};
use std::path::{Path, PathBuf};

/// Where a pin named without a leading `/` goes: the BPF filesystem's usual mount.
pub const BPF_FS: &str = "/sys/fs/bpf";

/// The longest file name Linux takes (`NAME_MAX`).
const MOST_NAME_BYTES: usize = 255;

#[derive(Debug)]
pub struct Iterator {
    name: String,
    btf_id: u32,
    pin: Option<PathBuf>,
}

impl Provider for Iterator {
    fn kind(&self) -> &'static str {
        "iter"
    }

    fn prog_type(&self) -> ProgType {
        ProgType::Tracing
    }

    fn elf_section(&self) -> String {
        bpf::elf::section(self.prog_type(), self.attach_mode(), Some(&self.name))
    }

    fn attach_mode(&self) -> AttachMode {
        AttachMode::Iterator { btf_id: self.btf_id }
    }

    fn context(&self) -> Context {
        Context { ctx_record: Some(format!("bpf_iter__{}", self.name)), ..Context::default() }
    }

    /// The program runs in steadytrace's iterator thread; pinned, in whichever process reads the file.
    fn fires_in_steadytrace(&self) -> bool {
        self.pin.is_none()
    }

    fn iterates(&self) -> bool {
        true
    }

    /// The object, after the iteration's `meta`: NULL in the call that ends the iteration.
    fn skips_when_zero(&self) -> Option<i16> {
        Some(8)
    }

    fn pinned_at(&self) -> Option<&Path> {
        self.pin.as_deref()
    }

    fn describe(&self) -> String {
        match &self.pin {
            Some(pin) => format!(
                "pinned at {}: runs over every {} each time that file is read",
                pin.display(),
                self.name
            ),
            None => format!("runs over every {} once, read by steadytrace's iterator thread", self.name),
        }
    }
}

pub fn resolve(
    _: &str,
    rest: &Fields,
    span: Span,
    _: &Options,
    kernel: &KernelTypes,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    let rest: &str = rest;
    let (name, pin) = rest.split_once(':').map_or((rest, None), |(name, pin)| (name, Some(pin)));
    let point_name = format!("iter:{rest}");
    let pin = match pin {
        Some("") => {
            return Err(Diagnostic::error(span, "the iterator's pin is empty")
                .with_help(format!("name the file to pin it at, e.g. `iter:{name}:list` for {BPF_FS}/list")))
        }
        Some(pin) => {
            let named = Path::new(pin).file_name().filter(|_| !pin.ends_with('/') && !pin.ends_with("/."));
            match named {
                None => {
                    return Err(Diagnostic::error(span, format!("the pin `{pin}` names a directory"))
                        .with_help(format!(
                            "a pin is a file: name one in it, e.g. `iter:{name}:{}/list`",
                            pin.trim_end_matches(['/', '.'])
                        )))
                }
                Some(file) if file.len() > MOST_NAME_BYTES => {
                    return Err(Diagnostic::error(
                        span,
                        format!("the pin's file name is {} bytes long", file.len()),
                    )
                    .with_help(format!(
                        "a file name takes at most {MOST_NAME_BYTES} bytes: choose a shorter one"
                    )))
                }
                Some(_) => Some(Path::new(BPF_FS).join(pin)),
            }
        }
        None => None,
    };
    let known = available(&kernel.vmlinux);
    if !known.iter().any(|k| k == name) {
        let help = match crate::lang::suggest::closest(name, known.iter().map(String::as_str)) {
            Some(near) => format!("did you mean `iter:{near}`?"),
            None if known.is_empty() => {
                "this kernel has no BPF iterators (Linux 5.8 brought `task` and `task_file`, 5.12 `task_vma`)"
                    .into()
            }
            None => format!("this kernel's iterators: {}", known.join(", ")),
        };
        return Err(Diagnostic::error(span, format!("there is no iterator `{name}`")).with_help(help));
    }
    let btf_id = bpf::iter::btf_id(name)
        .map_err(|e| Diagnostic::error(span, format!("the kernel's BTF has no `bpf_iter_{name}` ({e})")))?;
    Ok(vec![AttachPoint::new(Iterator { name: name.to_string(), btf_id, pin }, point_name, span)])
}

/// Iterators over one map's elements or one cgroup's tree, which need it named: steadytrace has no way to.
const NEED_A_TARGET: &[&str] = &["bpf_map_elem", "bpf_sk_storage_map", "sockmap", "cgroup"];

/// The kernel's iterators: each `bpf_iter_NAME` function with its `struct bpf_iter__NAME` context.
pub fn available(kernel: &Vmlinux) -> Vec<String> {
    // One pass over the kernel's types for all contexts (a lookup per iterator took 150 ms).
    let contexts = kernel.struct_names_starting("bpf_iter__");
    let mut names: Vec<String> = kernel
        .kernel_function_names()
        .into_iter()
        .filter_map(|f| f.strip_prefix("bpf_iter_").map(str::to_string))
        .filter(|name| !NEED_A_TARGET.contains(&name.as_str()))
        .filter(|name| contexts.contains(name.as_str()))
        .collect();
    names.sort();
    names.dedup();
    names
}
