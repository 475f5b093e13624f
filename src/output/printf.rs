//! printf as C does it, for the conversions the language has; run in userspace on record arguments.

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
    let (body, sign, numeric): (Vec<u8>, &str, bool) = match (conv.kind, arg) {
        (ConvKind::Buffer { ascii, escape }, Value::Buf(bytes)) => (buffer(bytes, ascii, escape), "", false),
        (ConvKind::Str | ConvKind::Buffer { .. }, Value::Str(bytes)) => {
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            let end = conv.precision.map_or(end, |p| end.min(p));
            (bytes[..end].to_vec(), "", false)
        }
        (ConvKind::Char, Value::Int { value, .. }) => (vec![*value as u8], "", false),
        (ConvKind::GfpFlags, Value::Int { value, .. }) => (super::gfp::names(*value).into_bytes(), "", false),
        (kind, Value::Int { value, .. }) => {
            let signed_conv = kind == ConvKind::Signed;
            let value = narrow(*value, conv.int_bytes, signed_conv);
            let (magnitude, negative) = if signed_conv && (value as i64) < 0 {
                ((value as i64).unsigned_abs(), true)
            } else {
                (value, false)
            };
            let mut digits = match kind {
                ConvKind::Octal => format!("{magnitude:o}"),
                ConvKind::HexLower => format!("{magnitude:x}"),
                ConvKind::HexUpper => format!("{magnitude:X}"),
                ConvKind::Pointer => format!("0x{magnitude:x}"),
                _ => magnitude.to_string(),
            };
            if let Some(precision) = conv.precision {
                if digits.len() < precision {
                    digits.insert_str(0, &"0".repeat(precision - digits.len()));
                }
            }
            if conv.alt && magnitude != 0 {
                match kind {
                    ConvKind::HexLower => digits.insert_str(0, "0x"),
                    ConvKind::HexUpper => digits.insert_str(0, "0X"),
                    ConvKind::Octal => digits.insert(0, '0'),
                    _ => {}
                }
            }
            let sign = match (negative, conv.plus && signed_conv, conv.space && signed_conv) {
                (true, _, _) => "-",
                (false, true, _) => "+",
                (false, false, true) => " ",
                _ => "",
            };
            (digits.into_bytes(), sign, true)
        }
        // Types were checked at compile time; a mismatch cannot reach here, print nothing.
        (_, Value::Str(_) | Value::Buf(_)) => return,
    };
    let len = sign.len() + body.len();
    let pad = conv.width.unwrap_or(0).saturating_sub(len);
    if conv.left {
        out.extend_from_slice(sign.as_bytes());
        out.extend_from_slice(&body);
        out.extend(std::iter::repeat_n(b' ', pad));
    } else if conv.zero && numeric && conv.precision.is_none() {
        out.extend_from_slice(sign.as_bytes());
        out.extend(std::iter::repeat_n(b'0', pad));
        out.extend_from_slice(&body);
    } else {
        out.extend(std::iter::repeat_n(b' ', pad));
        out.extend_from_slice(sign.as_bytes());
        out.extend_from_slice(&body);
    }
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
    fn matches_c_for_integers() {
        assert_eq!(
            printf("%d|%5d|%-5d|%05d|%+d", &[int(-3), int(42), int(42), int(-42), int(7)]),
            "-3|   42|42   |-0042|+7"
        );
        assert_eq!(
            printf("%lu %x %X %o %#x %#o", &[int(-1), int(255), int(255), int(8), int(255), int(8)]),
            "18446744073709551615 ff FF 10 0xff 010"
        );
        assert_eq!(printf("%hhd %hu %c %%", &[int(255), int(-1), int(65)]), "-1 65535 A %");
        assert_eq!(printf("%.3d|%8.3x", &[int(5), int(10)]), "005|     00a");
    }

    #[test]
    fn without_a_length_modifier_integers_are_32_bit_as_in_c() {
        assert_eq!(
            printf("%d %u %x %ld", &[int(5_000_000_000), int(-1), int(-1), int(5_000_000_000)]),
            "705032704 4294967295 ffffffff 5000000000"
        );
    }

    #[test]
    fn matches_c_for_strings() {
        assert_eq!(
            printf(
                "[%s][%6s][%-6s][%.2s]",
                &[Value::Str(b"abc\0\0"), Value::Str(b"ab"), Value::Str(b"ab"), Value::Str(b"abc")]
            ),
            "[abc][    ab][ab    ][ab]"
        );
    }

    #[test]
    fn buffers_as_bpftrace_prints_them() {
        let args = [Value::Buf(b"Hi\0\t\xff"), Value::Buf(b"Hi\0"), Value::Buf(b"Hi\0"), Value::Str(b"s\0")];
        assert_eq!(printf("%r|%rx|%rh|%r", &args), "Hi\\x00\\x09\\xff|\\x48\\x69\\x00|48 69 00|s");
    }
}
