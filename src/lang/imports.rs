//! Current bpftrace's `import "path";`: the probes, macros, map declarations and C definitions of other `.bt`
//! files, merged into the script. A path is relative to the directory of the file that imports it (the
//! current directory for `-e`); a directory imports the files in it, in name order, not those of its
//! subdirectories. Each file is read once, so an import cycle ends. Each file's spans start at its own base
//! in [`Sources`], so its errors name it. What bpftrace compiles with clang or links (`.h`, `.bpf.c`, `.bpf.o`)
//! is refused, steadytrace having no C compiler, and so is bpftrace's own `stdlib`.

use super::ast::{Import, Program};
use super::cdecl::CTypes;
use super::diag::{Diagnostic, Sources};
use super::macros::MacroDef;
use super::parser::{parse_file, Parsed};
use super::span::Span;
use super::surroundings::Surroundings;
use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Parses the script of `sources` and the files it imports (added to `sources`), merged into one program
/// with its macros expanded; what they read from outside their files comes from `around`.
pub fn load(sources: &mut Sources, around: &Surroundings<'_>) -> Result<Program, Diagnostic> {
    let (script, _) = sources.get(0);
    let (name, end) = (script.name.to_string(), script.text.len());
    let Parsed { mut program, macros, imports, .. } = parse_file(script.text, 0, CTypes::default(), around)?;
    let c_types = std::mem::take(Arc::make_mut(&mut program.c_types));
    let mut loader = Loader { sources, around, seen: HashSet::new(), c_types, program, macros };
    // The script itself, when it is a file: importing it again is a cycle.
    loader.seen.extend(std::fs::canonicalize(&name));
    loader.import_all(imports, directory_of(Path::new(&name)))?;
    let Loader { mut program, macros, c_types, .. } = loader;
    program.c_types = Arc::new(c_types);
    if program.probes.is_empty() {
        return Err(Diagnostic::error(Span::new(end, end), "the program has no probes")
            .with_help("a probe looks like `BEGIN { printf(\"hello\\n\"); }`"));
    }
    super::macros::expand(&mut program, &macros)?;
    Ok(program)
}

struct Loader<'s, 'a> {
    sources: &'s mut Sources,
    around: &'s Surroundings<'a>,
    /// The files read so far, by canonical path.
    seen: HashSet<PathBuf>,
    /// The C definitions of the files read so far: each file may use those of the files before it.
    c_types: CTypes,
    /// The script's program, with the probes and map declarations of the files read so far after its own.
    program: Program,
    macros: Vec<MacroDef>,
}

/// What an import names, by its file name.
enum Kind {
    Script,
    /// Something bpftrace imports that steadytrace cannot: why, and what to do instead.
    Refused(&'static str, &'static str),
    Unknown,
}

fn kind(path: &Path) -> Kind {
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    if name.ends_with(".bt") {
        Kind::Script
    } else if name.ends_with(".bpf.c") {
        Kind::Refused(
            "BPF C source is compiled by clang in bpftrace, and steadytrace does without a C compiler",
            "write the code in bpftrace's language, as a probe or a macro",
        )
    } else if name.ends_with(".h") {
        Kind::Refused(
            "bpftrace reads a C header with clang, and steadytrace does without a C compiler",
            "define the types the script needs in the script (`struct NAME { ... };`), or `#include` a system header, whose integer constants steadytrace reads",
        )
    } else if name.ends_with(".bpf.o") {
        Kind::Refused(
            "steadytrace generates its BPF programs itself and cannot link a compiled BPF object into them",
            "write the code in bpftrace's language, as a probe or a macro",
        )
    } else {
        Kind::Unknown
    }
}

/// The directory a file's imports are relative to: its own, empty (the current directory) for a bare name
/// or `stdin`, so that an imported file's name reads as the import wrote it.
fn directory_of(file: &Path) -> PathBuf {
    file.parent().unwrap_or(Path::new("")).to_path_buf()
}

/// Refuses `path` when it, or the directory it is in, is writable by every user: anyone could change what the
/// script runs (as bpftrace refuses).
fn refuse_world_writable(path: &Path, span: Span) -> Result<(), Diagnostic> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    for place in [path, dir] {
        let writable = std::fs::metadata(place).is_ok_and(|m| m.permissions().mode() & 0o002 != 0);
        if writable {
            return Err(Diagnostic::error(
                span,
                format!(
                    "refusing to import `{}`: `{}` is writable by every user",
                    path.display(),
                    place.display()
                ),
            )
            .with_help(format!(
                "anyone could change what the script runs: `chmod o-w {}`, or move the file",
                place.display()
            )));
        }
    }
    Ok(())
}

impl Loader<'_, '_> {
    fn import_all(&mut self, imports: Vec<Import>, dir: PathBuf) -> Result<(), Diagnostic> {
        for import in imports {
            self.import(&import, &dir)?;
        }
        Ok(())
    }

    fn import(&mut self, import: &Import, dir: &Path) -> Result<(), Diagnostic> {
        let path = dir.join(&import.path);
        let error = |message: String| Diagnostic::error(import.span, message);
        let metadata = match std::fs::metadata(&path) {
            Ok(metadata) => metadata,
            Err(_) if import.path == "stdlib" || import.path.starts_with("stdlib/") => {
                return Err(error(format!(
                    "`{}` is part of bpftrace's own standard library, which steadytrace does not have",
                    import.path
                ))
                .with_help(
                    "what steadytrace supports of it is built in (docs/LANGUAGE.md lists the builtins)",
                ));
            }
            Err(e) => return Err(error(format!("cannot import `{}`: {e}", path.display()))),
        };
        refuse_world_writable(&path, import.span)?;
        if !metadata.is_dir() {
            return match kind(&path) {
                Kind::Script => self.script(&path, import.span),
                Kind::Refused(why, help) => {
                    Err(error(format!("cannot import `{}`: {why}", path.display())).with_help(help))
                }
                Kind::Unknown => Err(error(format!("cannot import `{}`: not a `.bt` file", path.display()))
                    .with_help("steadytrace imports bpftrace scripts (`.bt`) and directories of them")),
            };
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(&path)
            .map_err(|e| error(format!("cannot read the directory `{}`: {e}", path.display())))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|file| file.is_file())
            .collect();
        files.sort();
        for file in files {
            match kind(&file) {
                Kind::Script => {
                    refuse_world_writable(&file, import.span)?;
                    self.script(&file, import.span)?;
                }
                Kind::Refused(why, help) => {
                    return Err(error(format!(
                        "cannot import `{}` from this directory: {why}",
                        file.display()
                    ))
                    .with_help(help))
                }
                Kind::Unknown => {}
            }
        }
        Ok(())
    }

    /// Reads, parses and merges the `.bt` file at `path` (imported at `span`), then its own imports.
    fn script(&mut self, path: &Path, span: Span) -> Result<(), Diagnostic> {
        let canonical = std::fs::canonicalize(path)
            .map_err(|e| Diagnostic::error(span, format!("cannot import `{}`: {e}", path.display())))?;
        if !self.seen.insert(canonical) {
            return Ok(());
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| Diagnostic::error(span, format!("cannot read `{}`: {e}", path.display())))?;
        let base = self.sources.add(path.display().to_string(), text);
        let (file, _) = self.sources.get(base);
        let parsed = parse_file(file.text, base, std::mem::take(&mut self.c_types), self.around)?;
        if let Some(config) = parsed.config {
            return Err(Diagnostic::error(config, "an imported file cannot have a config block")
                .with_help("move its settings into the config block of the script that imports it"));
        }
        let Parsed { program, macros, imports, .. } = parsed;
        self.c_types = Arc::unwrap_or_clone(program.c_types);
        self.program.map_decls.extend(program.map_decls);
        self.program.probes.extend(program.probes);
        self.program.missing_headers.extend(program.missing_headers);
        self.program.built_in_headers.extend(program.built_in_headers);
        self.macros.extend(macros);
        self.import_all(imports, directory_of(path))
    }
}
