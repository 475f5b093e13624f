//! `-c COMMAND`: the command is started before the probes are compiled (so that `cpid` is known),
//! held just before `exec` until every probe is attached, then released; tracing ends when it exits.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

pub struct Child {
    pub pid: u32,
    /// Writing to it (or closing it) lets the child `exec`.
    release: Option<OwnedFd>,
    /// Readable once the child has exited.
    pidfd: OwnedFd,
}

/// Splits a command line into words as a shell would for simple commands: white space separates,
/// single and double quotes group, a backslash escapes the next character.
pub fn split_words(line: &str) -> Result<Vec<String>, String> {
    let (mut words, mut word, mut in_word) = (vec![], String::new(), false);
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') | (None, '\\') => {
                word.push(chars.next().ok_or("the command ends with a lone backslash")?);
                in_word = true;
            }
            (Some(_), c) => word.push(c),
            (None, '\'') | (None, '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err("the command has an unclosed quote".into());
    }
    if in_word {
        words.push(word);
    }
    if words.is_empty() {
        return Err("the command is empty".into());
    }
    Ok(words)
}

impl Child {
    /// Starts `line`, held before `exec` until [`Child::release`]. (`std::process::Command` cannot do
    /// this: its `spawn` waits for the `exec`.)
    pub fn spawn_held(line: &str) -> Result<Child, String> {
        let words = split_words(line)?;
        let program = find_program(&words[0])?;
        let argv: Vec<CString> = words
            .iter()
            .map(|w| CString::new(w.as_bytes()).map_err(|_| "the command has a NUL byte".to_string()))
            .collect::<Result<_, _>>()?;
        let path = CString::new(program.as_os_str().as_bytes())
            .map_err(|_| "the path has a NUL byte".to_string())?;
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| format!("cannot make a pipe: {e}"))?;
        // Only the tracer holds the write end, so its death closes the pipe; and should the tracer
        // die, so does the held command. A closed pipe (the tracer gave up) means exit without running.
        let child = crate::sys::fork_held_exec(&path, &argv, read, &write)
            .map_err(|e| format!("cannot fork: {e}"))?;
        let pidfd = crate::sys::pidfd_open(child).map_err(|e| format!("cannot watch the command: {e}"))?;
        Ok(Child { pid: child.as_raw() as u32, release: Some(write), pidfd })
    }

    /// Lets the command run.
    pub fn release(&mut self) {
        if let Some(fd) = self.release.take() {
            let _ = nix::unistd::write(&fd, b"g");
        }
    }

    /// Readable once the command has exited.
    pub fn exit_fd(&self) -> RawFd {
        self.pidfd.as_raw_fd()
    }

    /// Ends the command if it still runs (tracing stopped first: a signal, or `exit()`).
    pub fn terminate(&self) {
        let pid = nix::unistd::Pid::from_raw(self.pid as i32);
        let exited = matches!(
            nix::sys::wait::waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WNOHANG)),
            Ok(status) if status != nix::sys::wait::WaitStatus::StillAlive
        );
        if !exited {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        }
    }

    /// Reaps the command if it has exited (so that no zombie is left).
    pub fn reap(&self) {
        let _ = nix::sys::wait::waitpid(
            nix::unistd::Pid::from_raw(self.pid as i32),
            Some(nix::sys::wait::WaitPidFlag::WNOHANG),
        );
    }
}

impl Drop for Child {
    /// A command never released (the script failed to compile or attach) is killed, not let run.
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.pid as i32);
        if self.release.is_some() {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = nix::sys::wait::waitpid(pid, None);
        } else {
            self.reap();
        }
    }
}

/// The file a command name runs: itself when it has a `/`, else the first match in `$PATH`.
fn find_program(name: &str) -> Result<PathBuf, String> {
    if name.contains('/') {
        let path = PathBuf::from(name);
        return if crate::executable::runnable(&path) {
            Ok(path)
        } else {
            Err(format!("`{name}` is not an executable file"))
        };
    }
    crate::executable::find_in_path(name).ok_or_else(|| format!("`{name}` is not a command in $PATH"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_a_shell() {
        assert_eq!(split_words("ls -l  /tmp").unwrap(), ["ls", "-l", "/tmp"]);
        assert_eq!(split_words(r#"sh -c 'echo "a b"' x\ y"#).unwrap(), ["sh", "-c", "echo \"a b\"", "x y"]);
        assert!(split_words("echo 'open").is_err());
    }
}
