//! `--fmt` (`--mode format`): a script printed again as bpftrace 0.27.1's formatter prints it. The script
//! is first parsed by the real parser (so that a script with an error fails as it would when run, with the
//! same message); then [`tree`] reads it again keeping what the syntax tree does not (comments, blank lines,
//! numbers and strings as spelt, macros and C definitions as written) and [`print`] lays it out.

mod print;
mod tree;

use super::diag::{Source, Sources};

/// The script formatted, or its first error rendered.
pub fn format(source: &Source<'_>) -> Result<String, String> {
    let mut sources = Sources::new(source);
    // Formatting needs no kernel: every struct the script only names is taken to have some size.
    static NO_HEADERS: super::headers::CommandLine =
        super::headers::CommandLine { dirs: vec![], includes: vec![] };
    let around =
        super::Surroundings { headers: &NO_HEADERS, kernel_btf: true, record_sizes: &|_, _| Some((8, 8)) };
    if let Err(d) = super::load(&mut sources, &around) {
        return Err(sources.render(&d));
    }
    let items = tree::Reader::new(source.text).program().map_err(|d| sources.render(&d))?;
    Ok(print::program(&items))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(text: &str) -> String {
        format(&Source { name: "stdin", text }).expect("formats")
    }

    #[test]
    fn the_example_of_the_docs() {
        let text = "kprobe:do_nanosleep /pid==1/ { @x[comm,pid]=count(); if (pid > 3) { $a = 1+2*3; \
                    printf(\"%d\\n\", $a); } else { print(@x) } }";
        let want = "kprobe:do_nanosleep\n/pid == 1/\n{\n  @x[comm, pid] = count();\n  if (pid > 3) {\n    \
                    $a = 1 + (2 * 3);\n    printf(\"%d\\n\", $a);\n  } else {\n    print(@x);\n  }\n}\n";
        assert_eq!(fmt(text), want);
    }

    #[test]
    fn operands_that_are_operations_get_parentheses() {
        let out = fmt("BEGIN { $a = a && b || c; $b = a == b && c < d; $c = $x > 1 ? -1 : $y - 1; }");
        assert!(out.contains("$a = (a && b) || c;"), "{out}");
        assert!(out.contains("$b = a == b && c < d;"), "{out}");
        assert!(out.contains("$c = ($x > 1) ? (-1) : ($y - 1);"), "{out}");
    }

    #[test]
    fn comments_and_numbers_stay_as_written() {
        let out = fmt("// top\nBEGIN { $x = 0x10 + 1_000; // why\n /* a\n * b */ $y = \"a\\tb\"; }");
        assert_eq!(
            out,
            "// top\nBEGIN\n{\n  $x = 0x10 + 1_000; // why\n  // a\n  // b\n  $y = \"a\\tb\";\n}\n"
        );
    }

    #[test]
    fn long_calls_break_from_the_end() {
        let out =
            fmt("BEGIN { printf(\"%-12u %-5d %-8d %-16s %-6d %7d\\n\", elapsed / 1e6, $major, $minor, \
                       @iocomm[$key], @iopid[$key], ($now - @start[$key]) / 1e6); }");
        assert!(out.contains("%7d\\n\", elapsed / 1e6,\n         $major, $minor"), "{out}");
    }
}
