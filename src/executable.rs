//! Finding a program the way a shell does: an executable regular file in one of `$PATH`'s directories.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Whether `path` is a regular file someone may execute.
pub fn runnable(path: &Path) -> bool {
    path.metadata().is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The first executable file called `name` in `$PATH`'s directories.
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| runnable(candidate))
}
