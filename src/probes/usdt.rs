//! `usdt:PATH:[PROVIDER:]NAME`: the statically defined probes of a binary (`DTRACE_PROBE`, `STAP_PROBE` of
//! `<sys/sdt.h>`), read from its `.note.stapsdt` ELF notes and attached as uprobes at their addresses.
//! `arg0`.. are read where each probe's note says (`usdt_args`). A probe guarded by a semaphore
//! (`if (PROVIDER_NAME_ENABLED())`) has it counted up by the kernel while the uprobe is attached.

use super::Fields;
use super::{elf, missing, wildcard, AttachError, AttachPoint, AttachTarget, Attachment, Context};
use super::{usdt_args, Arguments, Options, Provider, UserBinary};
use crate::kernel::KernelTypes;
use crate::lang::{Diagnostic, Span};
use bpf::{AttachMode, ProgType, UprobeTarget};
use object::{Object, ObjectSection};
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One probe of a `.note.stapsdt` note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub provider: String,
    pub name: String,
    /// Its address, moved by how far the file was prelinked from where the note says (`.stapsdt.base`).
    pub address: u64,
    /// The address of its semaphore, 0 for none.
    pub semaphore: u64,
    /// Its arguments as the assembler wrote them (`-4@%eax 8@-16(%rbp)`).
    pub arguments: String,
}

/// The probes of the ELF file at `path`.
pub fn notes(path: &Path) -> Result<Vec<Note>, String> {
    let (data, range) = super::elf::read_elf(path)?;
    let file = object::File::parse(&data[range])
        .map_err(|e| format!("{} is not an ELF file: {e}", path.display()))?;
    let Some(section) = file.section_by_name(".note.stapsdt") else { return Ok(vec![]) };
    let bytes = section.data().map_err(|e| format!("{}: .note.stapsdt: {e}", path.display()))?;
    let base = file.section_by_name(".stapsdt.base").map(|s| s.address());
    let little = file.is_little_endian();
    parse_notes(bytes, base, little)
        .ok_or_else(|| format!("{}: a .note.stapsdt note is malformed", path.display()))
}

/// Parses the notes of a `.note.stapsdt` section (64-bit): `namesz`, `descsz`, `type` (3), the name
/// `stapsdt` and the description `pc, base, semaphore, provider\0name\0arguments\0`, each padded to 4.
fn parse_notes(mut bytes: &[u8], actual_base: Option<u64>, little: bool) -> Option<Vec<Note>> {
    let word = |b: &[u8]| -> Option<u32> {
        let b: [u8; 4] = b.get(..4)?.try_into().ok()?;
        Some(if little { u32::from_le_bytes(b) } else { u32::from_be_bytes(b) })
    };
    let quad = |b: &[u8]| -> Option<u64> {
        let b: [u8; 8] = b.get(..8)?.try_into().ok()?;
        Some(if little { u64::from_le_bytes(b) } else { u64::from_be_bytes(b) })
    };
    let padded = |n: usize| n.div_ceil(4) * 4;
    let mut notes = vec![];
    while bytes.len() >= 12 {
        let (namesz, descsz, kind) = (word(bytes)? as usize, word(&bytes[4..])? as usize, word(&bytes[8..])?);
        let name = bytes.get(12..12 + namesz)?;
        let desc_start = 12 + padded(namesz);
        let desc = bytes.get(desc_start..desc_start + descsz)?;
        bytes = bytes.get((desc_start + padded(descsz)).min(bytes.len())..)?;
        if kind != 3 || name != b"stapsdt\0" {
            continue;
        }
        let (pc, base, semaphore) = (quad(desc)?, quad(&desc[8..])?, quad(desc.get(16..)?)?);
        let mut strings = desc.get(24..)?.split(|&b| b == 0).map(|s| String::from_utf8_lossy(s).into_owned());
        let (provider, name, arguments) =
            (strings.next()?, strings.next()?, strings.next().unwrap_or_default());
        let address = match actual_base {
            Some(actual) => pc.wrapping_add(actual.wrapping_sub(base)),
            None => pc,
        };
        notes.push(Note { provider, name, address, semaphore, arguments });
    }
    Some(notes)
}

/// A USDT probe at `offset` in the file `path`.
#[derive(Debug)]
pub struct Usdt {
    path: PathBuf,
    offset: u64,
    /// The file offset of its semaphore, 0 for none.
    semaphore: u64,
    /// `provider:name`.
    probe: String,
    arguments: Arc<[usdt_args::Argument]>,
    /// A uprobe_multi link or a perf uprobe event, as the kernel allows (`trigger::attach_mode`).
    mode: AttachMode,
}

pub fn resolve(
    _: &str,
    rest: &Fields,
    span: Span,
    options: &Options,
    kernel: &KernelTypes,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    let help = "write `usdt:PATH:PROVIDER:NAME` or `usdt:PATH:NAME`, e.g. `usdt:/usr/bin/python3:python:function__entry`";
    let parts = rest.fields();
    let (path, provider, name) = match parts[..] {
        [path, provider, name] => (path, provider, name),
        [path, name] => (path, "*", name),
        _ => return Err(Diagnostic::error(span, "`usdt` needs a binary and a probe name").with_help(help)),
    };
    let path = match elf::resolve_library(path) {
        Ok(path) => path,
        Err(e) => return missing::skip_or_fail(Diagnostic::error(span, e).with_help(help), options),
    };
    let notes = notes(&path).map_err(|e| Diagnostic::error(span, e))?;
    let mut points = vec![];
    for note in
        notes.iter().filter(|n| wildcard::matches(provider, &n.provider) && wildcard::matches(name, &n.name))
    {
        let offset = elf::file_offset(&path, note.address).map_err(|e| Diagnostic::error(span, e))?;
        let semaphore = match note.semaphore {
            0 => 0,
            address => elf::file_offset(&path, address).map_err(|e| Diagnostic::error(span, e))?,
        };
        let probe = format!("{}:{}", note.provider, note.name);
        let arguments = usdt_args::parse(&note.arguments, bpf::arch::HOST)
            .map_err(|e| Diagnostic::error(span, format!("{e} (USDT probe `{probe}`)")))?
            .into();
        let written = format!("usdt:{}:{probe}", path.display());
        let mode = super::trigger::attach_mode(&kernel.features);
        let usdt = Usdt { path: path.clone(), offset, semaphore, probe, arguments, mode };
        points.push(AttachPoint::new(usdt, written, span));
    }
    if points.is_empty() {
        let problem =
            Diagnostic::error(span, format!("{} has no USDT probe `{provider}:{name}`", path.display()))
                .with_help(format!("list them with `steadytrace -l 'usdt:{}:*'`", path.display()));
        return missing::skip_or_fail(problem, options);
    }
    Ok(points)
}

impl Provider for Usdt {
    fn user_binary(&self) -> Option<UserBinary<'_>> {
        Some(UserBinary { path: &self.path, function: None })
    }

    fn kind(&self) -> &'static str {
        "usdt"
    }

    fn prog_type(&self) -> ProgType {
        ProgType::Kprobe
    }

    fn attach_mode(&self) -> AttachMode {
        self.mode
    }

    fn context(&self) -> Context {
        Context {
            arguments: Some(Arguments::Located(self.arguments.clone())),
            user_addresses: true,
            ..Context::default()
        }
    }

    fn attach(
        &self,
        program: BorrowedFd<'_>,
        target: &AttachTarget,
    ) -> Result<Option<Attachment>, AttachError> {
        let uprobe = UprobeTarget {
            path: crate::apk::file_on_disk(&self.path),
            offset: self.offset,
            retprobe: false,
            pid: target.pid,
            cpu: target.cpu,
            ref_ctr_offset: self.semaphore,
        };
        bpf::Uprobe::attach(program, self.mode, &uprobe).map(|a| Some(Attachment::new(a))).map_err(|error| {
            AttachError::Os {
                what: format!("cannot attach the USDT probe `{}` in {}", self.probe, self.path.display()),
                error,
            }
        })
    }

    fn describe(&self) -> String {
        format!(
            "a uprobe on the USDT probe {} at offset {:#x} of {}",
            self.probe,
            self.offset,
            self.path.display()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One note as `<sys/sdt.h>` writes it on x86-64.
    fn note(pc: u64, base: u64, semaphore: u64, strings: &[u8]) -> Vec<u8> {
        let mut desc = [pc.to_le_bytes(), base.to_le_bytes(), semaphore.to_le_bytes()].concat();
        desc.extend_from_slice(strings);
        let mut out = [8u32.to_le_bytes(), (desc.len() as u32).to_le_bytes(), 3u32.to_le_bytes()].concat();
        out.extend_from_slice(b"stapsdt\0");
        out.extend_from_slice(&desc);
        out.resize(out.len().div_ceil(4) * 4, 0);
        out
    }

    #[test]
    fn notes_give_provider_name_arguments_and_the_moved_address() {
        let mut bytes = note(0x1130, 0x2004, 0, b"app\0start\0-4@%edi 8@-16(%rbp)\0");
        bytes.extend(note(0x1150, 0x2004, 0x4010, b"app\0stop\0\0"));
        let notes = parse_notes(&bytes, Some(0x3004), true).expect("parses");
        assert_eq!(notes.len(), 2);
        assert_eq!((notes[0].provider.as_str(), notes[0].name.as_str()), ("app", "start"));
        assert_eq!(notes[0].address, 0x2130);
        assert_eq!(notes[0].arguments, "-4@%edi 8@-16(%rbp)");
        assert_eq!((notes[1].name.as_str(), notes[1].semaphore), ("stop", 0x4010));
    }

    #[test]
    fn a_truncated_note_is_malformed() {
        let bytes = note(0x1130, 0x2004, 0, b"app\0start\0\0");
        assert!(parse_notes(&bytes[..30], None, true).is_none());
    }
}
