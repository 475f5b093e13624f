//! Where a binary's separate debug file is (its DWARF and full symbol table when the binary was stripped):
//! the directories of `--debuginfo DIR[:DIR]` first, then `/usr/lib/debug`, as gdb and bpftrace 0.27.1 look.
//!
//! In each directory, by build id (`DIR/.build-id/xx/rest.debug`), then by the name the binary's
//! `.gnu_debuglink` gives (`DIR/<the binary's directory>/NAME` and `DIR/NAME`); and, before
//! `/usr/lib/debug`'s debuglink places, beside the binary and in `.debug/` beside it. A file found by its
//! debuglink is taken only if its build id, when both files have one, is the binary's (the link's CRC is not
//! checked). Every reader of debug information (source-line uprobes, the functions of a stripped binary,
//! `ustack`/`usym`, `dw_ustack`'s `.debug_frame`) asks the one [`DebugDirs`] the command line gave.

use std::path::{Path, PathBuf};

/// Where distributions install detached debug information.
pub const DEFAULT_DIR: &str = "/usr/lib/debug";

/// The directories searched for separate debug files, `--debuginfo`'s first; [`DebugDirs::default`] is
/// `/usr/lib/debug` alone.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DebugDirs {
    /// `--debuginfo`'s directories, in the order given.
    extra: Vec<PathBuf>,
}

impl DebugDirs {
    /// `--debuginfo DIR[:DIR]`: the directories, `:`-separated (empty parts ignored), searched before the
    /// default.
    pub fn parse(written: &str) -> DebugDirs {
        DebugDirs { extra: written.split(':').filter(|dir| !dir.is_empty()).map(PathBuf::from).collect() }
    }

    /// The directories given on the command line (the default not among them).
    pub fn extra(&self) -> &[PathBuf] {
        &self.extra
    }

    fn all(&self) -> impl Iterator<Item = &Path> {
        self.extra.iter().map(PathBuf::as_path).chain(std::iter::once(Path::new(DEFAULT_DIR)))
    }

    /// The debug file of the build id `id`, `DIR/.build-id/xx/rest.debug`, in the first directory that
    /// has it.
    pub fn by_build_id(&self, id: &[u8]) -> Option<PathBuf> {
        if id.len() < 2 {
            return None;
        }
        let hex: String = id.iter().map(|byte| format!("{byte:02x}")).collect();
        self.all()
            .map(|dir| dir.join(".build-id").join(&hex[..2]).join(format!("{}.debug", &hex[2..])))
            .find(|path| path.is_file())
    }

    /// The separate debug file of the binary at `path`, parsed as `file`: by build id, else by its
    /// `.gnu_debuglink` (see the module's docs).
    pub fn find(&self, path: &Path, file: &object::File<'_>) -> Option<PathBuf> {
        use object::Object as _;
        let build_id = file.build_id().ok().flatten().filter(|id| id.len() > 1);
        if let Some(found) = build_id.and_then(|id| self.by_build_id(id)) {
            return Some(found);
        }
        let (name, _crc) = file.gnu_debuglink().ok().flatten()?;
        let name = std::str::from_utf8(name).ok()?;
        let real = path.canonicalize().ok()?;
        let dir = real.parent()?;
        let relative = dir.strip_prefix("/").ok()?;
        let mut candidates = Vec::new();
        for extra in &self.extra {
            candidates.push(extra.join(relative).join(name));
            candidates.push(extra.join(name));
        }
        candidates.push(dir.join(name));
        candidates.push(dir.join(".debug").join(name));
        candidates.push(Path::new(DEFAULT_DIR).join(relative).join(name));
        candidates.into_iter().filter(|candidate| *candidate != real && candidate.is_file()).find(
            |candidate| {
                let Ok(data) = crate::sys::map_file(&candidate.to_string_lossy()) else { return false };
                let Ok(debug) = object::File::parse(&*data) else { return false };
                match (build_id, debug.build_id().ok().flatten()) {
                    (Some(ours), Some(theirs)) => ours == theirs,
                    _ => true,
                }
            },
        )
    }

    /// [`DebugDirs::find`] for a file not parsed yet (`None` also when it is no ELF file).
    pub fn find_for_path(&self, path: &Path) -> Option<PathBuf> {
        let data = crate::sys::map_file(&path.to_string_lossy()).ok()?;
        let file = object::File::parse(&*data).ok()?;
        self.find(path, &file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directories_are_split_at_colons_and_come_before_the_default() {
        let dirs = DebugDirs::parse("/a::/b/c:");
        assert_eq!(dirs.extra(), [PathBuf::from("/a"), PathBuf::from("/b/c")]);
        let all: Vec<&Path> = dirs.all().collect();
        assert_eq!(all, [Path::new("/a"), Path::new("/b/c"), Path::new(DEFAULT_DIR)]);
        assert_eq!(DebugDirs::default().all().collect::<Vec<_>>(), [Path::new(DEFAULT_DIR)]);
    }

    #[test]
    fn a_build_id_is_looked_up_as_xx_slash_rest_dot_debug() {
        let root = std::env::temp_dir().join(format!("steadytrace-debug-dirs-{}", std::process::id()));
        let place = root.join(".build-id/ab");
        std::fs::create_dir_all(&place).unwrap();
        std::fs::write(place.join("cdef.debug"), b"").unwrap();
        let dirs = DebugDirs::parse(&format!("/nonexistent:{}", root.display()));
        assert_eq!(dirs.by_build_id(&[0xab, 0xcd, 0xef]), Some(place.join("cdef.debug")));
        assert_eq!(dirs.by_build_id(&[0xab, 0xcd]), None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
