//! For unit tests, here and in steadytrace's crate: a test that cannot run on this machine says so
//! through [`skip`], as the integration tests do (tests/common: `skip`), so that `scripts/test` lists it.

/// Prints `SKIPPED: test: reason` and appends `test: reason` to the file named by `STEADYTRACE_SKIP_LOG`,
/// where the test command collects the skips of the whole run.
pub fn skip(test: &str, reason: &str) {
    use std::io::Write;
    let line = format!("{test}: {reason}");
    println!("SKIPPED: {line}");
    if let Some(path) = std::env::var_os("STEADYTRACE_SKIP_LOG") {
        // One O_APPEND write of the whole line: lines of concurrent tests never interleave.
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| file.write_all(format!("{}\n", line.replace('\n', " ")).as_bytes()));
        if let Err(error) = written {
            panic!("cannot record the skip of {test} in {}: {error}", std::path::Path::new(&path).display());
        }
    }
}
