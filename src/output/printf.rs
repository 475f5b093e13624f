//! printf as bpftrace does it, for the conversions the language has (integers as C formats them, `%s` and
//! `%r` as bpftrace's C++ stream does); run in userspace on record arguments.

use super::value::Value as Shown;
use crate::sema::format::{ConvKind, Conversion, Piece};

/// An argument value read back from a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    Int {
        value: u64,
        signed: bool,
    },
    Str(&'a [u8]),
    /// The bytes of a `buf()` value.
    Buf(&'a [u8]),
    /// Any other value for `%s`, printed as `print()` prints it.
    Shown(Shown),
}

pub fn format(pieces: &[Piece], args: &[Value<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut args = args.iter();
    for piece in pieces {
        match piece {
            Piece::Text(text) => out.extend_from_slice(text.as_bytes()),
            Piece::Conv(conv) => {
                if let Some(arg) = args.next() {
                    convert(&mut out, conv, arg);
                }
            }
        }
    }
    out
}

/// Truncates to the bytes a `h`/`hh` modifier asks for, keeping the sign for signed conversions.
fn narrow(value: u64, bytes: u8, signed: bool) -> u64 {
    if bytes >= 8 {
        return value;
    }
    let bits = bytes as u32 * 8;
    let masked = value & ((1u64 << bits) - 1);
    if signed && masked >> (bits - 1) == 1 {
        masked | !((1u64 << bits) - 1)
    } else {
        masked
    }
}

fn convert(out: &mut Vec<u8>, conv: &Conversion, arg: &Value<'_>) {
    let whole = |body: Vec<u8>| {
        let len = body.len();
        (body, len)
    };
    let streamed = match (conv.kind, arg) {
        (ConvKind::Buffer { ascii, escape }, Value::Buf(bytes)) => Some(whole(buffer(bytes, ascii, escape))),
        (ConvKind::Str, Value::Buf(bytes)) => Some(whole(buffer(bytes, true, true))),
        (ConvKind::Str | ConvKind::Buffer { .. }, Value::Str(bytes)) => {
            Some(whole(bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())].to_vec()))
        }
        (ConvKind::Str, Value::Int { value, signed }) => {
            Some(shown(&Shown::Int { value: *value, signed: *signed }, conv.plus))
        }
        (ConvKind::Str, Value::Shown(value)) => Some(shown(value, conv.plus)),
        _ => None,
    };
    if let Some(text) = streamed {
        return stream(out, conv, text);
    }
    // Integers too go through bpftrace's stream (found by running 0.27.1): the text of the number, its sign
    // and `#`'s prefix included, is padded as a whole with `0` or spaces, on the right with `-` (`%05d` of
    // -42 is `00-42`, `%-05d` is `-4200`); the precision and the space flag change nothing, `+` signs `%d`
    // and `%i` only, `#` prefixes no zero, and `%p` is `%#lx` (0 is `0`).
    let body: Vec<u8> = match (conv.kind, arg) {
        (ConvKind::Char, Value::Int { value, .. }) => vec![*value as u8],
        (ConvKind::GfpFlags, Value::Int { value, .. }) => super::gfp::names(*value).into_bytes(),
        (kind, Value::Int { value, .. }) => {
            let signed_conv = kind == ConvKind::Signed;
            let value = narrow(*value, conv.int_bytes, signed_conv);
            let text = match kind {
                ConvKind::Signed if conv.plus && (value as i64) >= 0 => format!("+{}", value as i64),
                ConvKind::Signed => (value as i64).to_string(),
                ConvKind::Octal if conv.alt && value != 0 => format!("0{value:o}"),
                ConvKind::Octal => format!("{value:o}"),
                ConvKind::HexLower if conv.alt && value != 0 => format!("0x{value:x}"),
                ConvKind::HexLower => format!("{value:x}"),
                ConvKind::HexUpper if conv.alt && value != 0 => format!("0X{value:X}"),
                ConvKind::HexUpper => format!("{value:X}"),
                ConvKind::Pointer if value != 0 => format!("0x{value:x}"),
                _ => value.to_string(),
            };
            text.into_bytes()
        }
        // Types were checked at compile time; a mismatch cannot reach here, print nothing.
        (_, Value::Str(_) | Value::Buf(_) | Value::Shown(_)) => return,
    };
    let len = body.len();
    stream(out, conv, (body, len));
}

/// `%s` (and `%r`) as bpftrace formats them, through a C++ stream: the precision is ignored, `0` fills
/// on either side, and the width pads only the first `first` bytes of `body`, the first piece the
/// stream was given (`(` of a tuple, `[` of an array: `[%-4s]` of `(int8[2])5` is `[[   5,0]]`).
fn stream(out: &mut Vec<u8>, conv: &Conversion, (body, first): (Vec<u8>, usize)) {
    let (head, tail) = body.split_at(first);
    let fill = std::iter::repeat_n(
        if conv.zero { b'0' } else { b' ' },
        conv.width.unwrap_or(0).saturating_sub(first),
    );
    if conv.left {
        out.extend_from_slice(head);
        out.extend(fill);
    } else {
        out.extend(fill);
        out.extend_from_slice(head);
    }
    out.extend_from_slice(tail);
}

/// A value's text as `print()` shows it, and the bytes of its first piece (see [`stream`]); with `plus`
/// (`%+s`) every signed integer in it shows its sign, as bpftrace's stream does.
fn shown(value: &Shown, plus: bool) -> (Vec<u8>, usize) {
    fn signed(value: &Shown) -> Shown {
        match value {
            Shown::Int { value, signed: true } if (*value as i64) >= 0 => {
                Shown::Str(format!("+{value}").into_bytes())
            }
            Shown::Tuple(elems) => Shown::Tuple(elems.iter().map(signed).collect()),
            Shown::Array(elems) => Shown::Array(elems.iter().map(signed).collect()),
            Shown::Record(fields) => {
                Shown::Record(fields.iter().map(|(name, field)| (name.clone(), signed(field))).collect())
            }
            other => other.clone(),
        }
    }
    let first = match value {
        Shown::Tuple(_) | Shown::Array(_) | Shown::Bytes(_) => Some(1),
        Shown::Record(fields) if !fields.is_empty() => Some(2),
        _ => None,
    };
    let mut text = match plus {
        true => super::text::print_value(&signed(value)),
        false => super::text::print_value(value),
    };
    text.pop();
    let first = first.unwrap_or(text.len());
    (text, first)
}

/// A buffer as bpftrace prints it: with `ascii`, bytes 32 to 126 as themselves; the others as `\xNN`
/// with `escape`, else as `NN` separated by spaces.
pub fn buffer(bytes: &[u8], ascii: bool, escape: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() * 4);
    for (i, &byte) in bytes.iter().enumerate() {
        if ascii && (32..=126).contains(&byte) {
            out.push(byte);
        } else if escape {
            out.extend_from_slice(format!("\\x{byte:02x}").as_bytes());
        } else {
            let separator = if i + 1 == bytes.len() { "" } else { " " };
            out.extend_from_slice(format!("{byte:02x}{separator}").as_bytes());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::Span;
    use crate::sema::format::parse;

    fn printf(format: &str, args: &[Value<'_>]) -> String {
        String::from_utf8(super::format(&parse(format, Span::default()).unwrap(), args)).unwrap()
    }

    fn int(value: i64) -> Value<'static> {
        Value::Int { value: value as u64, signed: true }
    }

    #[test]
    fn integers_as_bpftrace_streams_them() {
        assert_eq!(
            printf("%d|%5d|%-5d|%05d|%+d", &[int(-3), int(42), int(42), int(-42), int(7)]),
            "-3|   42|42   |00-42|+7"
        );
        // bpftrace 0.27.1: the sign and prefix are padded with the digits, `-` pads `0` on the right, the
        // space flag and the precision change nothing, `%p` of 0 is `0`.
        assert_eq!(
            printf(
                "%-05d|%+05i|% d|%.3d|%08.3d|%05c|%#05x|%#x|%p",
                &[int(-42), int(42), int(42), int(-42), int(-42), int(65), int(42), int(0), int(0)]
            ),
            "-4200|00+42|42|-42|00000-42|0000A|00x2a|0|0"
        );
        assert_eq!(
            printf("%lu %x %X %o %#x %#o", &[int(-1), int(255), int(255), int(8), int(255), int(8)]),
            "18446744073709551615 ff FF 10 0xff 010"
        );
        assert_eq!(printf("%hhd %hu %c %%", &[int(255), int(-1), int(65)]), "-1 65535 A %");
        assert_eq!(printf("%.3d|%8.3x", &[int(5), int(10)]), "5|       a");
    }

    #[test]
    fn without_a_length_modifier_integers_are_32_bit_as_in_c() {
        assert_eq!(
            printf("%d %u %x %ld", &[int(5_000_000_000), int(-1), int(-1), int(5_000_000_000)]),
            "705032704 4294967295 ffffffff 5000000000"
        );
    }

    #[test]
    fn strings_as_bpftrace_streams_them() {
        assert_eq!(
            printf(
                "[%s][%6s][%-6s][%.2s][%06s][%-06s]",
                &[
                    Value::Str(b"abc\0\0"),
                    Value::Str(b"ab"),
                    Value::Str(b"ab"),
                    Value::Str(b"abc"),
                    Value::Str(b"ab"),
                    Value::Str(b"ab")
                ]
            ),
            "[abc][    ab][ab    ][abc][0000ab][ab0000]"
        );
    }

    #[test]
    fn any_value_prints_with_percent_s_as_print_shows_it() {
        use crate::output::value::Value as V;
        let shown = |format: &str, value: V| printf(format, &[Value::Shown(value)]);
        assert_eq!(shown("[%s]", V::int(-3)), "[-3]");
        assert_eq!(shown("[%s]", V::uint(u64::MAX)), "[18446744073709551615]");
        assert_eq!(shown("[%5s]", V::Bool(true)), "[ true]");
        assert_eq!(shown("[%-5s|]", V::Pointer(0)), "[0x0  |]");
        assert_eq!(shown("[%s]", V::Tuple(vec![V::int(1), V::Str(b"a\0".to_vec())])), "[(1, a)]");
        // The width pads only the first piece bpftrace's stream is given: `(`, `[`, `{ `.
        assert_eq!(shown("[%8s]", V::Tuple(vec![V::int(1), V::int(2)])), "[       (1, 2)]");
        assert_eq!(shown("[%-6s|]", V::Array(vec![V::int(5), V::int(0)])), "[[     5,0]|]");
        assert_eq!(shown("[%4s]", V::Record(vec![("a".into(), V::int(1))])), "[  { .a = 1 }]");
        // `+` signs every signed integer, `0` fills, a precision is ignored.
        assert_eq!(shown("[%+s]", V::Tuple(vec![V::int(1), V::uint(2), V::int(-3)])), "[(+1, 2, -3)]");
        assert_eq!(shown("[%05s]", V::int(-3)), "[000-3]");
        assert_eq!(shown("[%.1s]", V::Tuple(vec![V::int(1), V::int(2)])), "[(1, 2)]");
        assert_eq!(printf("[%.1s]", &[Value::Int { value: 12345, signed: true }]), "[12345]");
    }

    #[test]
    fn percent_s_of_a_buffer_prints_it_as_percent_r() {
        assert_eq!(printf("[%s] [%6s]", &[Value::Buf(b"a\x01"), Value::Buf(b"ab")]), "[a\\x01] [    ab]");
    }

    #[test]
    fn buffers_as_bpftrace_prints_them() {
        let args = [Value::Buf(b"Hi\0\t\xff"), Value::Buf(b"Hi\0"), Value::Buf(b"Hi\0"), Value::Str(b"s\0")];
        assert_eq!(printf("%r|%rx|%rh|%r", &args), "Hi\\x00\\x09\\xff|\\x48\\x69\\x00|48 69 00|s");
    }
}
