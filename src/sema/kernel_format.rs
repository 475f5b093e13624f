//! printf formats in the kernel's terms, for the helpers that format in the kernel (`bpf_trace_printk`
//! for `debugf`, `bpf_seq_printf` for `printf` in a pinned iterator): Linux's `bpf_bprintf_prepare`
//! takes flags `-0+ `, a width, `l`/`ll`, and `%d %i %u %x %X %c %s %p`; no `#`, no precision, no `%o`,
//! and none of steadytrace's own conversions (`%r`, `%gr`). It refuses a whole format (the helper fails,
//! nothing is printed) for any byte that is not printable ASCII or white space, but in kernels with the
//! 2026 change that lets UTF-8 text through (upstream b960430ea886, also in stable updates): refused here.

use super::format::{ConvKind, Conversion, Piece};

/// What the kernel's formats have, for help texts.
pub const CONVERSIONS: &str = "%d %i %u %x %X %c %s %p, with flags - 0 + space and a width (none on %p)";

/// The conversion as the kernel spells it, or why the kernel cannot print it. An integer of 8 bytes gets
/// `ll`; narrower ones are printed as C's `int` (the kernel has no `h`: callers pass them cut to their
/// width); a character is a `%s` of a one-character string.
pub fn conversion(conv: &Conversion) -> Result<String, String> {
    if conv.alt {
        return Err("the kernel's formats have no `#` flag".into());
    }
    if conv.precision.is_some() {
        return Err("the kernel's formats have no precision (`.N`)".into());
    }
    let long = if conv.int_bytes == 8 { "ll" } else { "" };
    let letter = match conv.kind {
        ConvKind::Signed => format!("{long}d"),
        ConvKind::Unsigned => format!("{long}u"),
        ConvKind::HexLower => format!("{long}x"),
        ConvKind::HexUpper => format!("{long}X"),
        // Passed as a one-character string: Linux before 5.13 has no `%c`.
        ConvKind::Char => "s".into(),
        ConvKind::Str => "s".into(),
        // The kernel hashes a plain `%p`; steadytrace prints the address itself.
        ConvKind::Pointer if conv.width.is_none() && !(conv.left || conv.zero || conv.plus || conv.space) => {
            return Ok("0x%llx".into())
        }
        ConvKind::Pointer => return Err("the kernel's `%p` takes no width or flags here".into()),
        ConvKind::Octal => return Err("the kernel's formats have no `%o`".into()),
        ConvKind::Buffer { .. } | ConvKind::GfpFlags => {
            return Err("the kernel's formats have no `%r`, `%rx`, `%rh` or `%gr`".into())
        }
    };
    let mut text = String::from("%");
    for (set, flag) in [(conv.left, '-'), (conv.zero, '0'), (conv.plus, '+'), (conv.space, ' ')] {
        if set {
            text.push(flag);
        }
    }
    if let Some(width) = conv.width {
        text += &width.to_string();
    }
    Ok(text + &letter)
}

/// The whole format in the kernel's terms: text with `%` doubled, each conversion spelt by
/// [`conversion`]; the first reason it cannot be, if any.
pub fn format(pieces: &[Piece]) -> Result<String, String> {
    let mut text = String::new();
    for piece in pieces {
        match piece {
            Piece::Text(t) => {
                if let Some(c) =
                    t.chars().find(|c| !(c.is_ascii_graphic() || c.is_ascii_whitespace() || *c == ' '))
                {
                    return Err(format!("the kernel prints only ASCII text and white space here, not {c:?}"));
                }
                text += &t.replace('%', "%%")
            }
            Piece::Conv(conv) => text += &conversion(conv)?,
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::Span;

    fn kernel(text: &str) -> Result<String, String> {
        format(&super::super::format::parse(text, Span::default()).unwrap())
    }

    #[test]
    fn keeps_flags_and_widths_and_widens_long_integers() {
        assert_eq!(
            kernel("%-8s|%05d|%ld|%lu|%llx|%X|100%%\n").unwrap(),
            "%-8s|%05d|%lld|%llu|%llx|%X|100%%\n"
        );
        assert_eq!(kernel("%p").unwrap(), "0x%llx");
    }

    #[test]
    fn refuses_what_the_kernel_cannot_print() {
        for bad in ["%#x", "%.3s", "%o", "%r", "%gr", "%8p", "é"] {
            assert!(kernel(bad).is_err(), "{bad}");
        }
    }
}
