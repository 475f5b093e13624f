//! Numbers in attach points, written as bpftrace's lexer takes them: `1000`, `1_000`, `1e6`, `0x10`.

/// The whole number `text` spells; `None` for anything else (a fraction, a sign, an overflow).
pub fn attach_number(text: &str) -> Option<u64> {
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        return u64::from_str_radix(&digits(hex, 16)?, 16).ok();
    }
    match text.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => {
            let mantissa: u64 = digits(mantissa, 10)?.parse().ok()?;
            let exponent: u32 = digits(exponent, 10)?.parse().ok()?;
            mantissa.checked_mul(10u64.checked_pow(exponent)?)
        }
        None => digits(text, 10)?.parse().ok(),
    }
}

/// `text` without the `_` that separate its digits; `None` unless it is digits of `radix` so separated (no
/// leading, trailing or doubled `_`).
fn digits(text: &str, radix: u32) -> Option<String> {
    let groups: Vec<&str> = text.split('_').collect();
    let well_formed = groups.iter().all(|g| !g.is_empty() && g.chars().all(|c| c.is_digit(radix)));
    well_formed.then(|| groups.concat())
}

#[cfg(test)]
mod tests {
    use super::attach_number;

    #[test]
    fn numbers_are_read_as_bpftrace_reads_them() {
        assert_eq!(attach_number("1000"), Some(1000));
        assert_eq!(attach_number("1_000"), Some(1000));
        assert_eq!(attach_number("1e6"), Some(1_000_000));
        assert_eq!(attach_number("25E3"), Some(25_000));
        assert_eq!(attach_number("0x10"), Some(16));
        assert_eq!(attach_number("0xff_ff"), Some(0xffff));
        for bad in
            ["", "_1", "1_", "1__0", "1.5", "-1", "1e", "e6", "1e99", "0x", "0xg", "18446744073709551616"]
        {
            assert_eq!(attach_number(bad), None, "{bad}");
        }
    }
}
