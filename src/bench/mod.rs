//! `steadytrace bench ...`: measurements a user runs on their own machine. Kept apart from the tracer's
//! pipeline: the benchmarks build their own small BPF programs and use the runtime only for its
//! building blocks (the trigger's uprobe, the online-CPU watcher).

pub mod cli;
pub mod interval;

/// Runs `steadytrace bench ...` (the arguments from `bench` on) on a kernel offering `features`; the exit
/// code, or the message to print.
pub fn main(
    args: impl IntoIterator<Item = std::ffi::OsString>,
    features: &bpf::features::Features,
) -> Result<i32, String> {
    use clap::Parser;
    let cli = cli::BenchCli::parse_from(args);
    match cli.command {
        cli::BenchCommand::Interval(args) => interval::run(&args, features),
    }
}
