//! printf format strings, parsed once at compile time: only an id and the arguments travel from BPF.

use crate::lang::{Diagnostic, Span};

/// A piece of a format string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Conv(Conversion),
}

/// One `%...` conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Conversion {
    pub left: bool,
    pub zero: bool,
    pub plus: bool,
    pub space: bool,
    pub alt: bool,
    pub width: Option<usize>,
    pub precision: Option<usize>,
    /// Bytes of the integer: 4 without a length modifier (C's `int`, as bpftrace prints it), 8 with
    /// `l`/`ll`, 2 with `h`, 1 with `hh`.
    pub int_bytes: u8,
    pub kind: ConvKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ConvKind {
    #[default]
    Signed,
    Unsigned,
    Octal,
    HexLower,
    HexUpper,
    Char,
    Str,
    /// `%p`
    Pointer,
    /// `%r` (printable ASCII kept, other bytes `\xNN`), `%rx` (every byte `\xNN`), `%rh` (every byte
    /// `NN`, separated by spaces): a `buf()` value; strings print as with `%s`.
    Buffer {
        ascii: bool,
        escape: bool,
    },
    /// `%gr`: an integer of GFP allocation flags, printed by name (`GFP_KERNEL|__GFP_ZERO`).
    GfpFlags,
}

impl ConvKind {
    pub fn takes_string(self) -> bool {
        matches!(self, ConvKind::Str | ConvKind::Buffer { .. })
    }
}

/// Parses `format`; `span` is the string literal's, for errors.
pub fn parse(format: &str, span: Span) -> Result<Vec<Piece>, Diagnostic> {
    let mut pieces = vec![];
    let mut text = String::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            text.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            text.push('%');
            continue;
        }
        // A `%` that ends the format or a line starts no conversion: bpftrace prints it (`"100%\n"`).
        if chars.peek().is_none_or(|&c| c == '\n' || c == '\r' || c == '\t') {
            text.push('%');
            continue;
        }
        let mut conv = Conversion { int_bytes: 8, ..Default::default() };
        while let Some(&flag) = chars.peek() {
            match flag {
                '-' => conv.left = true,
                '0' => conv.zero = true,
                '+' => conv.plus = true,
                ' ' => conv.space = true,
                '#' => conv.alt = true,
                _ => break,
            }
            chars.next();
        }
        conv.width = number(&mut chars);
        if chars.peek() == Some(&'.') {
            chars.next();
            conv.precision = Some(number(&mut chars).unwrap_or(0));
        }
        if conv.width.max(conv.precision).is_some_and(|n| n > MAX_WIDTH) {
            return Err(bad(span, &format!("a width or precision above {MAX_WIDTH}")));
        }
        let mut length = String::new();
        while let Some(&l) = chars.peek() {
            if !"hljzt".contains(l) {
                break;
            }
            length.push(l);
            chars.next();
        }
        conv.int_bytes = match length.as_str() {
            "hh" => 1,
            "h" => 2,
            "" => 4,
            "l" | "ll" | "j" | "z" | "t" => 8,
            other => return Err(bad(span, &format!("unknown length modifier `{other}`"))),
        };
        conv.kind = match chars.next() {
            Some('d') | Some('i') => ConvKind::Signed,
            Some('u') => ConvKind::Unsigned,
            Some('o') => ConvKind::Octal,
            Some('x') => ConvKind::HexLower,
            Some('X') => ConvKind::HexUpper,
            Some('c') => ConvKind::Char,
            Some('s') => ConvKind::Str,
            Some('r') => match chars.peek() {
                Some('x') => {
                    chars.next();
                    ConvKind::Buffer { ascii: false, escape: true }
                }
                Some('h') => {
                    chars.next();
                    ConvKind::Buffer { ascii: false, escape: false }
                }
                _ => ConvKind::Buffer { ascii: true, escape: true },
            },
            Some('g') if chars.peek() == Some(&'r') => {
                chars.next();
                ConvKind::GfpFlags
            }
            Some('p') => {
                // An address is printed whole, whatever the length modifier (as bpftrace does).
                conv.int_bytes = 8;
                ConvKind::Pointer
            }
            Some(other) => return Err(bad(span, &format!("unknown conversion `%{}`", other.escape_debug()))),
            None => return Err(bad(span, "the format ends in the middle of a `%` conversion")),
        };
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(&mut text)));
        }
        pieces.push(Piece::Conv(conv));
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

/// The widest field a conversion may ask for: more is a mistake, not output.
const MAX_WIDTH: usize = 4096;

/// A run of digits (saturating: anything huge is rejected as too wide).
fn number(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<usize> {
    let mut value = None;
    while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
        value = Some(value.unwrap_or(0usize).saturating_mul(10).saturating_add(d as usize));
        chars.next();
    }
    value
}

fn bad(span: Span, what: &str) -> Diagnostic {
    Diagnostic::error(span, format!("invalid format string: {what}")).with_help(
        "conversions are %d %i %u %x %X %o %c %s %p %r %rx %rh %gr and %%, with flags - 0 + space #, a width and l/ll/h/hh",
    )
}

pub fn conversions(pieces: &[Piece]) -> impl Iterator<Item = &Conversion> {
    pieces.iter().filter_map(|p| match p {
        Piece::Conv(c) => Some(c),
        Piece::Text(_) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_flags_width_and_length() {
        let pieces = parse("x=%-08lld%%", Span::default()).unwrap();
        assert_eq!(pieces[0], Piece::Text("x=".into()));
        let Piece::Conv(c) = pieces[1] else { panic!() };
        assert!(c.left && c.zero);
        assert_eq!((c.width, c.kind), (Some(8), ConvKind::Signed));
        assert_eq!(pieces[2], Piece::Text("%".into()));
    }

    #[test]
    fn rejects_unknown_conversions() {
        assert!(parse("%q", Span::default()).unwrap_err().message.contains("`%q`"));
    }
}
