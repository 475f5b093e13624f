//! Source lines of a binary, `FILE:LINE[:COLUMN]`, turned into the address of their code through the
//! DWARF line table (`.debug_line`), for `uprobe:BINARY@FILE:LINE`. Chosen as bpftrace 0.27.1 chooses
//! (compared on the same binaries): FILE names a compilation unit, by its whole path or by its last path
//! components; only rows of the unit's own file count (not of the headers it includes); of the rows of
//! that line (and column), statement or not, the lowest address, so one probe, where the line's code
//! first starts: a line that a loop runs through several times, or that was inlined into several
//! functions, is still one address.

use crate::symbols::DebugDirs;
use gimli::{ColumnType, EndianSlice, RunTimeEndian};
use object::{Object, ObjectSection};
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// `FILE:LINE[:COLUMN]` as written after a uprobe's `@`.
#[derive(Debug, PartialEq, Eq)]
pub struct SourceLine<'a> {
    pub file: &'a str,
    pub line: u64,
    pub column: Option<u64>,
}

impl<'a> SourceLine<'a> {
    /// `FILE:LINE` or `FILE:LINE:COLUMN`; an error says what is wrong in it.
    pub fn parse(text: &'a str) -> Result<SourceLine<'a>, String> {
        let number = |what: &str, n: &str| {
            n.parse::<u64>().map_err(|_| format!("`{n}` is not a {what} number (write FILE:LINE[:COLUMN])"))
        };
        let Some((head, last)) = text.rsplit_once(':') else {
            return Err(format!("`{text}` has no line number (write FILE:LINE[:COLUMN])"));
        };
        let source = match head.rsplit_once(':') {
            Some((file, line)) if line.bytes().all(|b| b.is_ascii_digit()) && !line.is_empty() => {
                SourceLine { file, line: number("line", line)?, column: Some(number("column", last)?) }
            }
            _ => SourceLine { file: head, line: number("line", last)?, column: None },
        };
        match source.file.is_empty() {
            true => Err(format!("`{text}` names no source file (write FILE:LINE[:COLUMN])")),
            false => Ok(source),
        }
    }
}

impl std::fmt::Display for SourceLine<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)?;
        match self.column {
            Some(column) => write!(f, ":{column}"),
            None => Ok(()),
        }
    }
}

/// Whether the compilation unit at `unit_path` is the file the user wrote: the same path, or its last
/// components (`b.c` and `a/b.c` name `/src/a/b.c`; `c.c` and `./b.c` do not, as in 0.27.1).
fn names_unit(file: &str, unit_path: &Path) -> bool {
    let file = Path::new(file);
    unit_path == file || (file.is_relative() && unit_path.ends_with(file))
}

type Reader<'a> = EndianSlice<'a, RunTimeEndian>;

/// The virtual address of the code of `source` in the binary at `path` (or in its separate debug
/// file, as `debug_dirs` finds it). Errors name what is missing: a line table at all, the file, the line
/// (with the nearest lines that have code), the column.
pub fn address(path: &Path, source: &SourceLine, debug_dirs: &DebugDirs) -> Result<u64, String> {
    let data = std::fs::read(path).map_err(|err| format!("could not read {}: {err}", path.display()))?;
    let file = object::File::parse(&*data)
        .map_err(|err| format!("{} is not an ELF file steadytrace can read: {err}", path.display()))?;
    let debug_data = match file.section_by_name(".debug_line") {
        Some(_) => None,
        None => debug_dirs.find(path, &file).and_then(|debug| std::fs::read(debug).ok()),
    };
    let debug_file = debug_data.as_deref().and_then(|data| object::File::parse(data).ok());
    let dwarf_file = debug_file.as_ref().unwrap_or(&file);
    let no_lines = || {
        format!(
            "{} has no DWARF line table, so its source lines cannot be found: build it with -g (or install \
             its debug file, or name where it is with --debuginfo DIR)",
            path.display()
        )
    };
    if dwarf_file.section_by_name(".debug_line").is_none() {
        return Err(no_lines());
    }
    let endian = match dwarf_file.is_little_endian() {
        true => RunTimeEndian::Little,
        false => RunTimeEndian::Big,
    };
    let sections = gimli::DwarfSections::load(|id| -> Result<Cow<[u8]>, String> {
        Ok(match dwarf_file.section_by_name(id.name()) {
            Some(section) => section
                .uncompressed_data()
                .map_err(|err| format!("could not read {} of {}: {err}", id.name(), path.display()))?,
            None => Cow::Borrowed(&[]),
        })
    })?;
    let dwarf = sections.borrow(|section| EndianSlice::new(section, endian));
    let found = search(&dwarf, source)
        .map_err(|err| format!("could not read the DWARF line table of {}: {err}", path.display()))?;
    let place = format!("{} in {}", source.file, path.display());
    match found {
        Found { units: 0, .. } => Err(format!(
            "{} was not compiled from a source file `{}` (FILE is the path of a compiled file, or its last \
             components)",
            path.display(),
            source.file
        )),
        Found { address: Some(address), .. } => Ok(address),
        Found { columns, .. } if !columns.is_empty() => Err(format!(
            "line {} of {place} has no code at column {}; it has code at column{} {}",
            source.line,
            source.column.unwrap_or_default(),
            if columns.len() == 1 { "" } else { "s" },
            join(&columns)
        )),
        Found { lines, .. } if lines.is_empty() => Err(no_lines()),
        Found { lines, .. } => {
            let before = lines.range(..source.line).next_back();
            let after = lines.range(source.line..).next();
            let nearest: Vec<u64> = before.into_iter().chain(after).copied().collect();
            Err(format!(
                "line {} of {place} has no code; the nearest line{} with code: {}",
                source.line,
                if nearest.len() == 1 { "" } else { "s" },
                join(&nearest)
            ))
        }
    }
}

fn join<'a>(numbers: impl IntoIterator<Item = &'a u64>) -> String {
    numbers.into_iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
}

/// What the line tables of the units `source.file` names hold.
#[derive(Default)]
struct Found {
    /// How many units the file named.
    units: usize,
    /// The lowest address of the line (and column).
    address: Option<u64>,
    /// The lines of the file that have code.
    lines: BTreeSet<u64>,
    /// The columns of the line that have code, when a column was asked for.
    columns: BTreeSet<u64>,
}

fn search(dwarf: &gimli::Dwarf<Reader>, source: &SourceLine) -> gimli::Result<Found> {
    let mut found = Found::default();
    let mut headers = dwarf.units();
    while let Some(header) = headers.next()? {
        let unit = dwarf.unit(header)?;
        let (Some(program), Some(name)) = (unit.line_program.clone(), unit.name) else { continue };
        let comp_dir = unit.comp_dir.map(|dir| PathBuf::from(dir.to_string_lossy().as_ref()));
        let comp_dir = comp_dir.unwrap_or_default();
        let unit_path = comp_dir.join(name.to_string_lossy().as_ref());
        if !names_unit(source.file, &unit_path) {
            continue;
        }
        found.units += 1;
        let mut rows = program.rows();
        // Which file index is the unit's own file, decided once per index.
        let mut own_files: Vec<Option<bool>> = vec![];
        while let Some((header, row)) = rows.next_row()? {
            let Some(line) = row.line().filter(|_| !row.end_sequence()) else { continue };
            let index = row.file_index() as usize;
            if own_files.len() <= index {
                own_files.resize(index + 1, None);
            }
            let own = match own_files[index] {
                Some(own) => own,
                None => {
                    let own = row.file(header).is_some_and(|entry| {
                        let name = dwarf.attr_string(&unit, entry.path_name()).ok();
                        let dir = entry.directory(header).and_then(|dir| dwarf.attr_string(&unit, dir).ok());
                        let dir =
                            comp_dir.join(dir.map(|d| d.to_string_lossy().into_owned()).unwrap_or_default());
                        name.is_some_and(|name| dir.join(name.to_string_lossy().as_ref()) == unit_path)
                    });
                    own_files[index] = Some(own);
                    own
                }
            };
            if !own {
                continue;
            }
            found.lines.insert(line.get());
            if line.get() != source.line {
                continue;
            }
            if let Some(column) = source.column {
                let ColumnType::Column(at) = row.column() else { continue };
                found.columns.insert(at.get());
                if at.get() != column {
                    continue;
                }
            }
            found.address = Some(found.address.map_or(row.address(), |lowest| lowest.min(row.address())));
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_file_line_and_column() {
        let parse = SourceLine::parse;
        assert_eq!(parse("a.c:12"), Ok(SourceLine { file: "a.c", line: 12, column: None }));
        assert_eq!(parse("src/a.c:12:5"), Ok(SourceLine { file: "src/a.c", line: 12, column: Some(5) }));
        assert!(parse("a.c").unwrap_err().contains("no line number"));
        assert!(parse("a.c:x").unwrap_err().contains("`x` is not a line number"));
        assert!(parse(":3").unwrap_err().contains("names no source file"));
    }

    #[test]
    fn a_file_is_a_whole_path_or_its_last_components() {
        let unit = Path::new("/src/lib/b.c");
        assert!(names_unit("/src/lib/b.c", unit));
        assert!(names_unit("lib/b.c", unit));
        assert!(names_unit("b.c", unit));
        assert!(!names_unit("ib/b.c", unit));
        assert!(!names_unit("./b.c", unit));
        assert!(!names_unit("/lib/b.c", unit));
    }
}
