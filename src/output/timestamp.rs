//! `strftime(format, nsecs)` values: nanoseconds since boot printed as the wall-clock time.

use std::ffi::CString;

/// The wall-clock time of `boot_nanos` (CLOCK_BOOTTIME nanoseconds) formatted with strftime(3), where
/// `%f` (bpftrace's extension) is the microseconds, zero-padded to 6 digits.
pub fn format(format: &str, boot_nanos: u64) -> Vec<u8> {
    let wall = boot_time() + boot_nanos as i128;
    let (seconds, nanos) = (wall.div_euclid(1_000_000_000), wall.rem_euclid(1_000_000_000));
    let format = with_microseconds(format, (nanos / 1000) as u32);
    match CString::new(format) {
        Ok(format) => crate::sys::format_local_time(&format, seconds as i64),
        Err(_) => vec![],
    }
}

/// When the machine booted, in wall-clock nanoseconds: taken once, so that two timestamps print exactly
/// as far apart as they are.
pub fn boot_time() -> i128 {
    static BOOT: std::sync::OnceLock<i128> = std::sync::OnceLock::new();
    *BOOT.get_or_init(|| {
        let now = |clock| {
            nix::time::clock_gettime(clock)
                .map_or(0, |t| t.tv_sec() as i128 * 1_000_000_000 + t.tv_nsec() as i128)
        };
        now(nix::time::ClockId::CLOCK_REALTIME) - now(nix::time::ClockId::CLOCK_BOOTTIME)
    })
}

/// `format` with each `%f` replaced by `micros` (`%%f` is a literal `%f` and stays for strftime).
fn with_microseconds(format: &str, micros: u32) -> String {
    let mut out = String::with_capacity(format.len());
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        match (c, c == '%') {
            (_, true) => match chars.next() {
                Some('f') => out.push_str(&format!("{micros:06}")),
                Some(next) => {
                    out.push('%');
                    out.push(next);
                }
                None => out.push('%'),
            },
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_f_is_microseconds_and_percent_percent_stays() {
        assert_eq!(with_microseconds("%s.%f %%f %H", 123), "%s.000123 %%f %H");
    }
}
