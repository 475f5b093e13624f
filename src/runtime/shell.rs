//! `system()`: a command run through `sh -c` when its record arrives, its standard output and error
//! captured together so that they land in the trace's output in order (as bpftrace does).

use std::io::Read;
use std::process::{Command, Stdio};

/// Runs `command` to its end; what it printed, or why it could not run.
pub fn run(command: &str) -> std::io::Result<Vec<u8>> {
    let (reader, writer) = nix::unistd::pipe()?;
    let mut reader = std::fs::File::from(reader);
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(writer.try_clone()?)
        .stderr(writer)
        .spawn()?;
    let mut output = vec![];
    // The command's copies of the pipe are its only writers now: EOF comes when it (and anything it
    // left running with them) is done.
    let read = reader.read_to_end(&mut output);
    child.wait()?;
    read.map(|_| output)
}
