//! `steadytrace completions SHELL`: a completion script for the tracer's command line. clap_complete
//! writes it from `cli::Cli` (options, their values, `-o`'s files); added here is what clap cannot
//! express: a script FILE is completed from `*.bt` files first, and the words `bench`, `completions`,
//! `manpage` that `main.rs` recognises as the first argument.

use crate::cli::Cli;
use clap::{CommandFactory, Parser, ValueEnum};
use std::io::Write;

#[derive(Parser, Debug)]
#[command(
    name = "steadytrace completions",
    bin_name = "steadytrace completions",
    about = "Print a completion script for the tracer's command line",
    arg_required_else_help = true,
    after_help = "Examples:\n  steadytrace completions bash > /usr/share/bash-completion/completions/steadytrace\n  steadytrace completions zsh > /usr/local/share/zsh/site-functions/_steadytrace\n  steadytrace completions fish > ~/.config/fish/completions/steadytrace.fish"
)]
struct CompletionsCli {
    /// The shell that reads the script
    #[arg(value_name = "SHELL")]
    shell: Shell,
}

/// The shells whose scripts are tested (tests/install.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// The first arguments that `main.rs` takes as commands of their own rather than as a script FILE.
pub const COMMANDS: &str = "bench completions manpage";

/// Runs `steadytrace completions ...` (`args` starts with `completions`); a bad argument is clap's
/// error, exit status 2.
pub fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<i32, String> {
    let cli = CompletionsCli::parse_from(args);
    std::io::stdout()
        .lock()
        .write_all(script(cli.shell).as_bytes())
        .map_err(|e| format!("steadytrace completions: cannot write the script: {e}\n"))?;
    Ok(0)
}

/// The completion script for `shell`.
pub fn script(shell: Shell) -> String {
    let generated = |target| {
        let mut out = Vec::new();
        clap_complete::generate(target, &mut Cli::command(), "steadytrace", &mut out);
        String::from_utf8_lossy(&out).into_owned()
    };
    match shell {
        Shell::Bash => bash(&generated(clap_complete::Shell::Bash)),
        Shell::Zsh => zsh(&generated(clap_complete::Shell::Zsh)),
        Shell::Fish => fish(&generated(clap_complete::Shell::Fish)),
    }
}

/// clap's function completes options and their values; a wrapper registered in its place completes
/// the other words: `*.bt` files and directories (bash's `-o default`, which clap sets, falls back to
/// every file when there are none), and the commands as the first word.
fn bash(generated: &str) -> String {
    let wrapper = r#"
# Added by steadytrace: a word that is no option nor an option's value is a script FILE (or PARAM):
# *.bt files and directories; the first word may also be one of steadytrace's commands.
_steadytrace_words() {
    _steadytrace "$@"
    local cur="$2" prev="$3"
    if ((COMP_CWORD == 2)) && [[ $prev == completions ]]; then
        COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur"))
        return 0
    fi
    case "$prev" in
        @VALUE_OPTIONS@) return 0 ;;
    esac
    [[ $cur == -* ]] && return 0
    local IFS=$'\n'
    COMPREPLY=($(compgen -d -- "$cur") $(compgen -f -X '!*.bt' -- "$cur"))
    if ((COMP_CWORD == 1)); then
        COMPREPLY+=($(IFS=' ' compgen -W "@COMMANDS@" -- "$cur"))
    fi
    compopt -o filenames 2>/dev/null
    return 0
}
"#;
    let wrapper = wrapper
        .replace("@VALUE_OPTIONS@", &options_taking_values().join("|"))
        .replace("@COMMANDS@", COMMANDS);
    let registered = generated.replace("complete -F _steadytrace ", "complete -F _steadytrace_words ");
    format!("{wrapper}\n{registered}")
}

/// zsh: the FILE operand is `_files -g '*.bt'` (directories are still offered) instead of any file.
fn zsh(generated: &str) -> String {
    generated
        .lines()
        .map(|line| match line.strip_prefix("'::file").and_then(|rest| rest.strip_suffix(":_files' \\")) {
            Some(description) => format!("'::file{description}:_files -g \"*.bt\"' \\"),
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// fish completes any file for an operand by itself; `*.bt` files are offered first, with the commands as
/// the first word and the shells after `completions`.
fn fish(generated: &str) -> String {
    format!(
        "{generated}\n# Added by steadytrace: script files, and the commands of the first word.\n\
         complete -c steadytrace -n 'not __fish_seen_subcommand_from completions' -k -a '(__fish_complete_suffix .bt)'\n\
         complete -c steadytrace -n '__fish_is_nth_token 1' -a '{COMMANDS}'\n\
         complete -c steadytrace -n '__fish_seen_subcommand_from completions' -f -a 'bash zsh fish'\n"
    )
}

/// `-c|-e|...|--format|...`: the options whose next word is their value.
fn options_taking_values() -> Vec<String> {
    let command = Cli::command();
    let mut names = Vec::new();
    for arg in command.get_arguments().filter(|a| !a.is_positional() && a.get_action().takes_values()) {
        names.extend(arg.get_short().map(|c| format!("-{c}")));
        names.extend(arg.get_long().map(|l| format!("--{l}")));
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_registers_the_wrapper_and_knows_every_option_with_a_value() {
        let script = script(Shell::Bash);
        assert!(!script.contains("complete -F _steadytrace "), "clap's function is still registered");
        assert!(script.contains("complete -F _steadytrace_words "));
        assert!(script.contains(
            "-c|-I|--include|--bpf-token|--scope|--kallsyms|--unwind|--dwarf-pid|-e|-f|--format|-o|-p|--interval-engine|--interval-cpu|-d|--debug|--probe-filter|--no-feature|-B|--mode|--traceable-functions|--debuginfo|--emit-elf|--timer-priority|--metrics|--metrics-max-keys|--metrics-web-config)"
        ));
    }

    #[test]
    fn zsh_offers_bt_files_for_the_script() {
        assert!(script(Shell::Zsh).contains(":_files -g \"*.bt\"' \\"));
    }
}
