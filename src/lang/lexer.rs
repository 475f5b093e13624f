//! The lexer: script text to tokens. Probe headers (`uprobe:/bin/bash:readline`) do not follow the
//! token rules of statements, so the parser asks for them separately with [`Lexer::attach_point`].

use super::diag::Diagnostic;
use super::span::Span;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    Int(u64),
    Str(String),
    Ident(String),
    /// `$name`
    Var(String),
    /// `@name`; the anonymous map `@` has an empty name.
    Map(String),
    /// Operators and punctuation, as written.
    Punct(&'static str),
    Eof,
}

impl Tok {
    /// How the token reads in an error message.
    pub fn describe(&self) -> String {
        match self {
            Tok::Int(n) => format!("`{n}`"),
            Tok::Str(_) => "a string".to_string(),
            Tok::Ident(name) => format!("`{name}`"),
            Tok::Var(name) => format!("`${name}`"),
            Tok::Map(name) => format!("`@{name}`"),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::Eof => "the end of the script".to_string(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

// Longest first, so that `<<=` wins over `<<` and `<`.
const PUNCTS: &[&str] = &[
    "<<=", ">>=", "...", "->", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<", ">>", "<=",
    ">=", "==", "!=", "&&", "||", "..", "{", "}", "(", ")", "[", "]", ",", ";", ":", ".", "?", "+", "-", "*",
    "/", "%", "&", "|", "^", "~", "!", "<", ">", "=",
];

/// Positions (`pos`, spans) count from `base`: an imported file's lexer starts where the files before it end,
/// so that a span says which file it is in (see [`super::diag::Sources`]).
#[derive(Clone)]
pub struct Lexer<'a> {
    text: &'a str,
    base: usize,
    pos: usize,
}

impl<'a> Lexer<'a> {
    pub fn new(text: &'a str) -> Lexer<'a> {
        Lexer::at_base(text, 0)
    }

    /// A lexer whose positions start at `base`.
    pub fn at_base(text: &'a str, base: usize) -> Lexer<'a> {
        // A `#!` line makes a script file directly executable; it is not part of the program.
        let skipped = if text.starts_with("#!") { text.find('\n').unwrap_or(text.len()) } else { 0 };
        Lexer { text, base, pos: base + skipped }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    /// The position just past the text.
    pub fn end(&self) -> usize {
        self.base + self.text.len()
    }

    /// The text from the position `pos` on.
    pub fn text_from(&self, pos: usize) -> &'a str {
        &self.text[pos - self.base..]
    }

    fn rest(&self) -> &'a str {
        self.text_from(self.pos)
    }

    /// Skips white space and comments.
    pub fn skip_trivia(&mut self) -> Result<(), Diagnostic> {
        loop {
            let rest = self.rest();
            let trimmed = rest.trim_start();
            self.pos += rest.len() - trimmed.len();
            if trimmed.starts_with("//") {
                self.pos += trimmed.find('\n').unwrap_or(trimmed.len());
            } else if let Some(body) = trimmed.strip_prefix("/*") {
                let end = body.find("*/").ok_or_else(|| {
                    Diagnostic::error(Span::new(self.pos, self.pos + 2), "this comment is never closed")
                        .with_help("end it with `*/`")
                })?;
                self.pos += end + 4;
            } else {
                return Ok(());
            }
        }
    }

    /// The text of one attach point, such as `interval:s:1` or `uprobe:/bin/bash:readline`: everything up
    /// to white space, `,`, `{`, or a `/` that starts a predicate rather than a path. A part in double quotes
    /// (`uprobe:"/opt/my app/bin":main`) is taken whole, quotes included, as bpftrace takes it.
    pub fn attach_point(&mut self) -> Result<Option<(String, Span)>, Diagnostic> {
        self.skip_trivia()?;
        let start = self.pos;
        let mut end = start;
        let mut open_quote: Option<usize> = None;
        let mut escaped = false;
        for (i, c) in self.rest().char_indices() {
            if open_quote.is_some() {
                match c {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '"' => open_quote = None,
                    '\n' => break,
                    _ => {}
                }
                end = start + i + c.len_utf8();
                continue;
            }
            if c == '"' {
                open_quote = Some(start + i);
                end = start + i + 1;
                continue;
            }
            if c.is_whitespace() || c == ',' || c == '{' || c == '}' || c == ';' {
                break;
            }
            if c == '/' {
                let seen = &self.rest()[..i];
                let segment = &seen[seen.rfind(':').map_or(0, |p| p + 1)..];
                // The path of a uprobe (`uprobe:bin/tool:f`, the second part) and the pin of an iterator
                // (`iter:task:../x`, the third) may hold `/` anywhere.
                let provider = seen.split(':').next().unwrap_or("");
                let colons = seen.matches(':').count();
                let in_path = (matches!(provider, "u" | "uprobe" | "ur" | "uretprobe" | "usdt" | "U")
                    && colons == 1)
                    || (matches!(provider, "iter" | "it") && colons == 2);
                if !(in_path || seen.ends_with(':') || segment.starts_with('/')) {
                    break;
                }
            }
            end = start + i + c.len_utf8();
        }
        if let Some(quote) = open_quote {
            return Err(Diagnostic::error(
                Span::new(quote, end),
                "this quote in the attach point is never closed",
            )
            .with_help("end the quoted part with `\"` on the same line"));
        }
        self.pos = end;
        Ok((end > start).then(|| (self.text_from(start)[..end - start].to_string(), Span::new(start, end))))
    }

    /// Whether the next non-trivia text starts with `s`.
    pub fn peek_text(&mut self, s: &str) -> Result<bool, Diagnostic> {
        let saved = self.pos;
        self.skip_trivia()?;
        let found = self.rest().starts_with(s);
        self.pos = saved;
        Ok(found)
    }

    pub fn next_token(&mut self) -> Result<Token, Diagnostic> {
        self.skip_trivia()?;
        let start = self.pos;
        let rest = self.rest();
        let Some(c) = rest.chars().next() else {
            return Ok(Token { tok: Tok::Eof, span: Span::new(start, start) });
        };
        let tok = if c.is_ascii_digit() {
            self.number()?
        } else if c == '"' {
            self.string()?
        } else if c == '$' || c == '@' || c.is_ascii_alphabetic() || c == '_' {
            let sigil = usize::from(c == '$' || c == '@');
            let len = rest[sigil..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len() - sigil);
            let name = rest[sigil..sigil + len].to_string();
            self.pos += sigil + len;
            match c {
                '$' if name.is_empty() && rest[1..].starts_with('#') => {
                    self.pos += 1;
                    Tok::Var("#".to_string())
                }
                '$' if name.is_empty() => {
                    return Err(Diagnostic::error(
                        Span::new(start, start + 1),
                        "`$` must be followed by a variable name",
                    )
                    .with_help("scratch variables look like `$count`"))
                }
                '$' => Tok::Var(name),
                '@' => Tok::Map(name),
                _ => Tok::Ident(name),
            }
        } else if let Some(p) = PUNCTS.iter().find(|p| rest.starts_with(**p)) {
            self.pos += p.len();
            Tok::Punct(p)
        } else {
            let span = Span::new(start, start + c.len_utf8());
            return Err(Diagnostic::error(span, format!("unexpected character `{c}`")));
        };
        Ok(Token { tok, span: Span::new(start, self.pos) })
    }

    fn number(&mut self) -> Result<Tok, Diagnostic> {
        let start = self.pos;
        let rest = self.rest();
        let len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        self.pos += len;
        let word = &rest[..len];
        let span = Span::new(start, self.pos);
        let digits: String = word.chars().filter(|&c| c != '_').collect();
        let (radix, body) = match digits.get(..2) {
            Some("0x") | Some("0X") => (16, &digits[2..]),
            Some("0b") | Some("0B") => (2, &digits[2..]),
            _ => (10, &digits[..]),
        };
        let cut = body.find(|c: char| !c.is_digit(radix)).unwrap_or(body.len());
        let (number, suffix) = body.split_at(cut);
        let value = u64::from_str_radix(number, radix).map_err(|_| {
            let why = if number.is_empty() { "is not a number" } else { "does not fit in 64 bits" };
            Diagnostic::error(span, format!("`{word}` {why}"))
        })?;
        // `1e6` is 1000000 (an integer, as in bpftrace).
        if let Some(exponent) = suffix.strip_prefix(['e', 'E']).filter(|e| radix == 10 && !e.is_empty()) {
            let exponent: u32 =
                exponent.parse().map_err(|_| Diagnostic::error(span, format!("`{word}` is not a number")))?;
            return 10u64
                .checked_pow(exponent)
                .and_then(|scale| value.checked_mul(scale))
                .map(Tok::Int)
                .ok_or_else(|| Diagnostic::error(span, format!("`{word}` does not fit in 64 bits")));
        }
        let value = match suffix.to_ascii_lowercase().as_str() {
            "" | "u" | "l" | "ul" | "lu" | "ll" | "ull" | "llu" => Some(value),
            "ns" => Some(value),
            "us" => value.checked_mul(1_000),
            "ms" => value.checked_mul(1_000_000),
            "s" => value.checked_mul(1_000_000_000),
            "m" => value.checked_mul(60_000_000_000),
            "h" => value.checked_mul(3_600_000_000_000),
            "d" => value.checked_mul(86_400_000_000_000),
            _ => {
                return Err(Diagnostic::error(span, format!("`{word}` has an unknown suffix `{suffix}`"))
                    .with_help(
                        "integer suffixes are u, l, ul, ll, ull and the time units ns, us, ms, s, m, h, d",
                    ))
            }
        };
        value
            .map(Tok::Int)
            .ok_or_else(|| Diagnostic::error(span, format!("`{word}` does not fit in 64 bits")))
    }

    fn string(&mut self) -> Result<Tok, Diagnostic> {
        let start = self.pos;
        let mut out = String::new();
        let mut chars = self.rest()[1..].char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.pos += i + 2;
                    return Ok(Tok::Str(out));
                }
                '\n' => break,
                '\\' => {
                    let Some((j, e)) = chars.next() else { break };
                    let escape_span = Span::new(start + 1 + i, start + 1 + j + e.len_utf8());
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        '\\' => out.push('\\'),
                        '"' => out.push('"'),
                        '\'' => out.push('\''),
                        '0'..='7' => {
                            let mut value = e.to_digit(8).unwrap_or(0);
                            for _ in 0..2 {
                                match chars.clone().next() {
                                    Some((_, d)) if d.is_digit(8) => {
                                        value = value * 8 + d.to_digit(8).unwrap_or(0);
                                        chars.next();
                                    }
                                    _ => break,
                                }
                            }
                            out.push(char::from_u32(value).unwrap_or('\0'));
                        }
                        'x' => {
                            let hex: String = chars
                                .clone()
                                .take(2)
                                .map(|(_, c)| c)
                                .take_while(char::is_ascii_hexdigit)
                                .collect();
                            if hex.is_empty() {
                                return Err(Diagnostic::error(
                                    escape_span,
                                    "`\\x` must be followed by hex digits",
                                ));
                            }
                            for _ in 0..hex.len() {
                                chars.next();
                            }
                            out.push(char::from(u8::from_str_radix(&hex, 16).unwrap_or(0)));
                        }
                        _ => {
                            return Err(Diagnostic::error(escape_span, format!("unknown escape `\\{e}`"))
                                .with_help("escapes are \\n \\t \\r \\\\ \\\" \\NNN (octal) and \\xHH"))
                        }
                    }
                }
                c => out.push(c),
            }
        }
        let line_end = self.rest().find('\n').map_or(self.end(), |i| self.pos + i);
        Err(Diagnostic::error(Span::new(start, line_end), "this string is never closed")
            .with_help("end it with `\"`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<Tok> {
        let mut lexer = Lexer::new(text);
        let mut out = vec![];
        loop {
            let t = lexer.next_token().unwrap().tok;
            if t == Tok::Eof {
                return out;
            }
            out.push(t);
        }
    }

    #[test]
    fn reads_numbers_in_every_notation() {
        assert_eq!(toks("1_000 0x1f 0b101 5ms 7ul 1e3"), [1000, 31, 5, 5_000_000, 7, 1000].map(Tok::Int));
    }

    #[test]
    fn reads_strings_with_escapes() {
        assert_eq!(toks(r#""a\tb\n\x41\101\"""#), [Tok::Str("a\tb\nAA\"".into())]);
    }

    #[test]
    fn longest_operator_wins_and_comments_vanish() {
        assert_eq!(
            toks("a <<= b // c\n/* d */ $x->y"),
            [
                Tok::Ident("a".into()),
                Tok::Punct("<<="),
                Tok::Ident("b".into()),
                Tok::Var("x".into()),
                Tok::Punct("->"),
                Tok::Ident("y".into())
            ]
        );
    }

    #[test]
    fn attach_points_keep_paths_and_stop_at_predicates() {
        let mut lexer = Lexer::new("uprobe:/bin/bash:readline /pid == 1/ {");
        assert_eq!(lexer.attach_point().unwrap().unwrap().0, "uprobe:/bin/bash:readline");
        let mut lexer = Lexer::new("interval:s:1/cpu == 0/{");
        assert_eq!(lexer.attach_point().unwrap().unwrap().0, "interval:s:1");
        let mut lexer = Lexer::new("ur:target/debug/tool:f/retval > 0/ {");
        assert_eq!(lexer.attach_point().unwrap().unwrap().0, "ur:target/debug/tool:f");
        let mut lexer = Lexer::new("iter:task:../pins/x /1/ {");
        assert_eq!(lexer.attach_point().unwrap().unwrap().0, "iter:task:../pins/x");
    }

    #[test]
    fn quoted_parts_of_attach_points_are_taken_whole() {
        let mut lexer = Lexer::new(r#"uprobe:"/opt/my app/a,b{c}":main, k:f {"#);
        assert_eq!(lexer.attach_point().unwrap().unwrap().0, r#"uprobe:"/opt/my app/a,b{c}":main"#);
        let mut lexer = Lexer::new(r#"uprobe:"/x/\"y\"":f {"#);
        assert_eq!(lexer.attach_point().unwrap().unwrap().0, r#"uprobe:"/x/\"y\"":f"#);
        let err = Lexer::new("  uprobe:\"/bin/bash:f {\n}").attach_point().unwrap_err();
        assert_eq!(err.span, Span::new(9, 23));
    }

    #[test]
    fn positions_count_from_the_base() {
        let mut lexer = Lexer::at_base("#!/bin/x\n@a \"b\n", 100);
        assert_eq!(lexer.next_token().unwrap().span, Span::new(109, 111));
        assert_eq!(lexer.text_from(lexer.pos()), " \"b\n");
        assert_eq!(lexer.next_token().unwrap_err().span, Span::new(112, 114));
        assert_eq!(lexer.end(), 115);
    }

    #[test]
    fn an_unclosed_string_is_reported_where_it_starts() {
        let err = Lexer::new("  \"abc\nx").next_token().unwrap_err();
        assert_eq!(err.span, Span::new(2, 6));
    }
}
