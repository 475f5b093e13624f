//! Diagnostics: an error at a place in the script, rendered as `file:line:col: ERROR: ...` (or `WARNING:`, as bpftrace writes them), the line,
//! and the offending text underlined. A script's imported files have spans of their own ([`Sources`]).

use super::span::Span;
use std::fmt::Write;

/// One problem found in a script: an error stops it, a warning is said and the script runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub span: Span,
    pub message: String,
    /// What to do instead, when there is something to say.
    pub help: Option<String>,
    /// Another place the problem involves, and what it is there (the variable a `let` would hide); boxed, as
    /// diagnostics travel in `Err`s.
    pub note: Option<Box<(Span, String)>>,
    pub is_warning: bool,
}

impl Diagnostic {
    pub fn error(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic { span, message: message.into(), help: None, note: None, is_warning: false }
    }
    pub fn warning(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic { span, message: message.into(), help: None, note: None, is_warning: true }
    }
    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }
    pub fn with_note(mut self, span: Span, note: impl Into<String>) -> Diagnostic {
        self.note = Some(Box::new((span, note.into())));
        self
    }
}

/// A script's text and the name to show for it (a file name, or `stdin` for `-e` as bpftrace does).
pub struct Source<'a> {
    pub name: &'a str,
    pub text: &'a str,
}

impl Source<'_> {
    /// `offset` moved back onto a character boundary of the text (and into it).
    fn boundary(&self, offset: usize) -> usize {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        offset
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = self.boundary(offset);
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        (line, before[line_start..].chars().count() + 1)
    }

    /// The line holding the start of `span`, and under it `mark` under the span's part of that line.
    fn marked(&self, span: Span, mark: char) -> String {
        let start = self.boundary(span.start);
        let (_, col) = self.line_col(start);
        let line_start = self.text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = self.text[line_start..].find('\n').map_or(self.text.len(), |i| line_start + i);
        let text = &self.text[line_start..line_end];
        let end = self.boundary(span.end.clamp(start, line_end));
        let width = self.text[start.min(line_end)..end.max(start.min(line_end))].chars().count().max(1);
        // Tabs stay tabs under the line so the marks line up with the text above.
        let pad: String = text.chars().take(col - 1).map(|c| if c == '\t' { '\t' } else { ' ' }).collect();
        format!("{text}\n{pad}{}\n", mark.to_string().repeat(width))
    }

    /// `name:line:col: LABEL: message`, the line and the span marked.
    fn located(&self, span: Span, label: &str, message: &str) -> String {
        // Spans come from the lexer, on character boundaries; a span from anywhere else is rendered too.
        let (line, col) = self.line_col(self.boundary(span.start));
        format!("{}:{line}:{col}: {label}: {message}\n{}", self.name, self.marked(span, '^'))
    }

    /// Renders a diagnostic for a terminal; its note, if any, is in this text too.
    pub fn render(&self, diag: &Diagnostic) -> String {
        // Warnings as bpftrace (0.17 and current) words them.
        let severity = if diag.is_warning { "WARNING" } else { "ERROR" };
        let mut out = self.located(diag.span, severity, &diag.message);
        if let Some(help) = &diag.help {
            let _ = writeln!(out, "help: {help}");
        }
        if let Some((span, note)) = diag.note.as_deref() {
            out.push_str(&self.located(*span, "NOTE", note));
        }
        out
    }
}

/// The script and the files it imports. Each file's positions start at its own base, one past the end of the
/// file before it (the end of a file is where an error at its end points), so a span alone names its file.
pub struct Sources {
    /// By base, ascending.
    files: Vec<File>,
}

struct File {
    base: usize,
    name: String,
    text: String,
}

impl Sources {
    /// The script alone, at base 0.
    pub fn new(script: &Source<'_>) -> Sources {
        Sources {
            files: vec![File { base: 0, name: script.name.to_string(), text: script.text.to_string() }],
        }
    }

    /// Adds an imported file, and gives the base its positions start at.
    pub fn add(&mut self, name: String, text: String) -> usize {
        let last = self.files.last().expect("the script is always there");
        let base = last.base + last.text.len() + 1;
        self.files.push(File { base, name, text });
        base
    }

    /// The file holding the position `offset`, and its base.
    pub fn get(&self, offset: usize) -> (Source<'_>, usize) {
        let file = self.files.iter().rev().find(|f| f.base <= offset).expect("the script's base is 0");
        (Source { name: &file.name, text: &file.text }, file.base)
    }

    /// The line of its file holding the start of `span`, with `mark` under the span (`~` as bpftrace marks the
    /// macro calls a run-time message was expanded from).
    pub fn marked_line(&self, span: Span, mark: char) -> String {
        let (source, base) = self.get(span.start);
        source.marked(Span::new(span.start - base, span.end.saturating_sub(base)), mark)
    }

    /// Renders a diagnostic for a terminal, in the file its span is in (and its note in the note's file).
    pub fn render(&self, diag: &Diagnostic) -> String {
        let (source, base) = self.get(diag.span.start);
        let span = Span::new(diag.span.start - base, diag.span.end.saturating_sub(base));
        let mut out = source.render(&Diagnostic { span, note: None, ..diag.clone() });
        if let Some((span, note)) = diag.note.as_deref() {
            let (source, base) = self.get(span.start);
            let span = Span::new(span.start - base, span.end.saturating_sub(base));
            out.push_str(&source.located(span, "NOTE", note));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn underlines_the_offending_text_on_its_line() {
        let source = Source { name: "t.bt", text: "BEGIN {\n  prinf(\"x\");\n}\n" };
        let diag = Diagnostic::error(Span::new(10, 15), "unknown function `prinf`")
            .with_help("did you mean `printf`?");
        assert_eq!(
            source.render(&diag),
            "t.bt:2:3: ERROR: unknown function `prinf`\n  prinf(\"x\");\n  ^^^^^\nhelp: did you mean `printf`?\n"
        );
    }

    #[test]
    fn spans_inside_a_character_are_rendered_at_its_start() {
        let source = Source { name: "stdin", text: "BEGIN { é }" };
        let diag = Diagnostic::error(Span::new(9, 10), "unexpected character");
        assert_eq!(source.render(&diag), "stdin:1:9: ERROR: unexpected character\nBEGIN { é }\n        ^\n");
    }

    #[test]
    fn an_error_at_the_end_of_the_text_gets_one_caret() {
        let source = Source { name: "stdin", text: "BEGIN {" };
        let diag = Diagnostic::error(Span::new(7, 7), "expected `}`");
        assert_eq!(source.render(&diag), "stdin:1:8: ERROR: expected `}`\nBEGIN {\n       ^\n");
    }

    #[test]
    fn a_note_follows_with_its_own_place() {
        let sources =
            Sources::new(&Source { name: "t.bt", text: "BEGIN {\n  let $x = 1;\n  let $x = 2;\n}\n" });
        let diag = Diagnostic::error(Span::new(24, 30), "shadowed")
            .with_help("rename it")
            .with_note(Span::new(10, 16), "This is the initial declaration.");
        assert_eq!(
            sources.render(&diag),
            "t.bt:3:3: ERROR: shadowed\n  let $x = 2;\n  ^^^^^^\nhelp: rename it\n\
             t.bt:2:3: NOTE: This is the initial declaration.\n  let $x = 1;\n  ^^^^^^\n"
        );
    }

    #[test]
    fn an_imported_file_renders_its_own_name_line_and_text() {
        let mut sources = Sources::new(&Source { name: "main.bt", text: "import \"lib.bt\";\n" });
        let base = sources.add("lib.bt".into(), "macro m() {\n  nope\n}\n".into());
        assert_eq!(base, 18);
        let diag = Diagnostic::error(Span::new(base + 14, base + 18), "unknown identifier `nope`");
        assert_eq!(sources.render(&diag), "lib.bt:2:3: ERROR: unknown identifier `nope`\n  nope\n  ^^^^\n");
        // The end of the script is the script's, not the next file's.
        let at_end = Diagnostic::error(Span::new(17, 17), "expected a probe");
        assert!(sources.render(&at_end).starts_with("main.bt:2:1: "));
    }
}
