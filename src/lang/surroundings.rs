//! What the language reads from outside the script's files, handed down by its caller: the command line's
//! header options, whether the kernel has BTF (`BPFTRACE_HAVE_BTF`), and the sizes of the structs a script
//! only names (the kernel's, held by value in a script's struct). The language knows nothing of kernels:
//! whoever knows the kernel fills this in.

use super::headers::CommandLine;

/// The size and alignment of `struct NAME` (`union NAME` with `true`) that the script does not define.
pub type RecordSizes<'a> = &'a dyn Fn(bool, &str) -> Option<(u32, u32)>;

pub struct Surroundings<'a> {
    pub headers: &'a CommandLine,
    pub kernel_btf: bool,
    pub record_sizes: RecordSizes<'a>,
}

impl Surroundings<'static> {
    /// No `-I` nor `--include`, no BTF, no struct but the script's: what the language's unit tests read in.
    pub fn nothing() -> Self {
        static EMPTY: CommandLine = CommandLine { dirs: Vec::new(), includes: Vec::new() };
        Surroundings { headers: &EMPTY, kernel_btf: false, record_sizes: &|_, _| None }
    }
}
