//! Maps and values in bpftrace's default text format (`print(@m)`, `print(@m, top, div)`,
//! `print(value)`, the map dump at exit): 0.17's layout, with current bpftrace's (0.27.1) changes noted.
//!
//! Output is bytes, not `String`: strings read from the kernel need not be UTF-8, and bpftrace writes them
//! through unchanged.
//!
//! Layout rules (0.17, `TextOutput` in src/output.cpp):
//! - one entry per line, `@name[k1, k2]: value` (`@name: value` for a scalar map); string key parts are
//!   written bare, unquoted and unescaped; entries joined with `\n` and the map ended with `\n` — so a
//!   count/sum/int/avg/stats map has no blank line after it (0.17 ended avg and stats maps with `\n\n`;
//!   0.27.1 does not);
//! - hist/lhist entries are `@name[k]:\n` (0.17 wrote `: \n`, with a space) then one line per bucket, each ending `\n`,
//!   entries joined by `\n` and the map ended by `\n`, so every histogram is followed by a blank line;
//! - a bucket line is the label left-aligned in 16 columns, the count right-aligned in 8, ` |`, a bar of
//!   `@` left-aligned in 52 columns, `|`; the bar is `(float)count / (float)max_count * 52` truncated;
//! - only buckets from the first to the last non-zero one are shown; an all-zero histogram shows none;
//! - stacks as [`Stack`] describes: keys `@[\n    f+1\n    g+2\n]: 3`; a map of stack *values* has no
//!   newline between entries (each stack already ends with one): `@s[1]: \n        f+1\n@s[2]: \n…\n\n`.
//!
//! [`folded`] writes a stack-keyed count map as flame-graph input instead.

use super::value::{divisor, exit_order, Key, KeyPart, MapKind, MapSnapshot, Stack, Value, HIST_BUCKETS};

/// Width of the `@` bar.
const BAR_WIDTH: usize = 52;

/// `print(@m, top, div)`: the map's entries in bpftrace's order and layout (see the module docs).
///
/// `div` divides count/sum/int/min/max values, avg and stats averages (a stats map's count and total stay) and
/// hist bucket counts (but not the hist bar, which is scaled on the undivided counts); it is ignored for lhist
/// maps. As 0.27.1, which warns that top and div are ignored for stats maps and then applies both.
pub fn print_map(map: &MapSnapshot, top: Option<usize>, div: Option<u64>) -> Vec<u8> {
    let div = divisor(div);
    let mut out = Vec::new();
    for (i, (key, value)) in map.print_order(top).into_iter().enumerate() {
        if i > 0 && map.kind != MapKind::Stack {
            out.push(b'\n');
        }
        write_key(&mut out, &map.name, key);
        // Current bpftrace ends a histogram's head with `:` (0.17 wrote `: `).
        match map.kind {
            MapKind::Hist | MapKind::Lhist | MapKind::Tseries => out.extend_from_slice(b":\n"),
            _ => out.extend_from_slice(b": "),
        }
        write_value(&mut out, value, div);
    }
    out.push(b'\n');
    out
}

/// What bpftrace prints when it exits: an empty line pair, then every map (by name) as [`print_map`]
/// prints it. Leave out maps bpftrace would not print (those it never shows, such as internal ones).
pub fn print_maps_at_exit(maps: &[MapSnapshot]) -> Vec<u8> {
    let mut out = b"\n\n".to_vec();
    for map in exit_order(maps) {
        out.extend(print_map(map, None, None));
    }
    out
}

/// `print(value)` for a non-map value: the value and a newline (for a stack: its text, frames indented by 8,
/// then the newline).
pub fn print_value(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_value(&mut out, value, 1);
    out.push(b'\n');
    out
}

/// `printf`, `time`, `cat`, `system` text (`newline` false) or `join` (`newline` true): passed through.
pub fn message(text: &[u8], newline: bool) -> Vec<u8> {
    let mut out = text.to_vec();
    if newline {
        out.push(b'\n');
    }
    out
}

/// `Attaching 1 probe...` / `Attaching N probes...`.
pub fn attached_probes(probes: u64) -> Vec<u8> {
    let plural = if probes == 1 { "" } else { "s" };
    format!("Attaching {probes} probe{plural}...\n").into_bytes()
}

/// `Lost N events`.
pub fn lost_events(lost: u64) -> Vec<u8> {
    format!("Lost {lost} events\n").into_bytes()
}

/// A map keyed by one stack, with count (or sum, or integer) values, as flame-graph "folded" lines: Brendan
/// Gregg's stackcollapse format, what `stackcollapse-bpftrace.pl` makes of bpftrace's text output and
/// `flamegraph.pl` reads.
///
/// One line per entry: the frames outermost first (the reverse of the printed order), joined with `;`,
/// then a space and the value: `common_startup_64+315;…;default_idle+5;pv_native_safe_halt+11 29`. Each frame
/// is written as in the text output without its indent (`func+off`; perf mode `addr func+off (module)`;
/// raw mode `addr`); with `strip_offsets`, a trailing `+<decimal>` is removed from each frame so that
/// samples at different offsets of a function merge (`pv_native_safe_halt`). Lines come in the map's print
/// order (ascending value). Entries with an empty stack (`@[]: 498`) are left out, as
/// `stackcollapse-bpftrace.pl` leaves them out. Frame names are not escaped: a `;` inside a name (possible in
/// demangled C++) splits that frame in the flame graph, as with the Perl script.
///
/// `None` when the key is not exactly one stack or the values are not plain numbers.
pub fn folded(map: &MapSnapshot, strip_offsets: bool) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    for (key, value) in map.print_order(None) {
        let [KeyPart::Stack(stack)] = key.0.as_slice() else { return None };
        let count = match value {
            Value::Count(n) => n.to_string(),
            Value::Int { value, signed: false } | Value::Sum { value, signed: false } => value.to_string(),
            Value::Int { value, signed: true } | Value::Sum { value, signed: true } => {
                (*value as i64).to_string()
            }
            _ => return None,
        };
        if stack.frames.is_empty() {
            continue;
        }
        for (i, frame) in stack.frames.iter().rev().enumerate() {
            if i > 0 {
                out.push(b';');
            }
            let frame = if strip_offsets { strip_offset(frame) } else { frame };
            out.extend_from_slice(frame.as_bytes());
        }
        out.push(b' ');
        out.extend_from_slice(count.as_bytes());
        out.push(b'\n');
    }
    Some(out)
}

/// `func+123` → `func`; a frame without a decimal offset at its end is unchanged.
fn strip_offset(frame: &str) -> &str {
    match frame.rsplit_once('+') {
        Some((name, offset)) if !offset.is_empty() && offset.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => frame,
    }
}

fn write_key(out: &mut Vec<u8>, name: &str, key: &Key) {
    out.extend_from_slice(name.as_bytes());
    if !key.is_scalar() {
        out.push(b'[');
        write_list(out, &key.0, b", ", write_key_part);
        out.push(b']');
    }
}

/// A key part as text writes it (unquoted, unescaped): a string bare, a stack with frames indented by 4,
/// a record `{ .a = 1, .b = x }`.
pub fn write_key_part(out: &mut Vec<u8>, part: &KeyPart) {
    match part {
        KeyPart::Int { value, signed: true } => out.extend_from_slice((*value as i64).to_string().as_bytes()),
        KeyPart::Int { value, signed: false } => out.extend_from_slice(value.to_string().as_bytes()),
        KeyPart::Bool(value) => out.extend_from_slice(if *value { b"true" } else { b"false" }),
        KeyPart::Str(bytes) => out.extend_from_slice(KeyPart::str_bytes(bytes)),
        KeyPart::Stack(stack) => stack.render(out, Stack::KEY_INDENT),
        KeyPart::Tuple(parts) => {
            out.push(b'(');
            write_list(out, parts, b", ", write_key_part);
            out.push(b')');
        }
        KeyPart::Record { names, parts } => {
            out.extend_from_slice(b"{ ");
            for (i, (name, part)) in names.iter().zip(parts).enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                out.extend_from_slice(format!(".{name} = ").as_bytes());
                write_key_part(out, part);
            }
            out.extend_from_slice(b" }");
        }
        KeyPart::Pointer(address) => out.extend_from_slice(format!("{address:#x}").as_bytes()),
        KeyPart::Bytes(bytes) => write_bytes(out, bytes),
        KeyPart::Array(elems) => write_array(out, elems, 1),
    }
}

/// `items` written one after the other, `sep` between them.
pub fn write_list<T>(out: &mut Vec<u8>, items: &[T], sep: &[u8], write: impl Fn(&mut Vec<u8>, &T)) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(sep);
        }
        write(out, item);
    }
}

/// `Output::value_to_str` with `div` applied as 0.17 does (integer division, truncating).
fn write_value(out: &mut Vec<u8>, value: &Value, div: u64) {
    let text = match value {
        Value::Int { value, signed: true } | Value::Sum { value, signed: true } => {
            ((*value as i64).wrapping_div(div as i64)).to_string()
        }
        Value::Int { value, signed: false } | Value::Sum { value, signed: false } => {
            (value / div).to_string()
        }
        Value::Bool(b) => b.to_string(),
        Value::Count(n) => (n / div).to_string(),
        Value::Min(n) | Value::Max(n) => n.wrapping_div(div as i64).to_string(),
        Value::Avg { count, total } => Value::average(*count, *total).wrapping_div(div as i64).to_string(),
        Value::Stats { count, total } => {
            // Current bpftrace's form; 0.17 printed `count 3, average 2, total 6`.
            let average = Value::average(*count, *total).wrapping_div(div as i64);
            format!("{{ .count = {count}, .average = {average}, .total = {total} }}")
        }
        Value::Str(bytes) => {
            out.extend_from_slice(&bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())]);
            return;
        }
        Value::Bytes(bytes) => return write_bytes(out, bytes),
        Value::Tuple(elems) => {
            out.push(b'(');
            for (i, elem) in elems.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                write_value(out, elem, div);
            }
            out.push(b')');
            return;
        }
        Value::Stack(stack) => return stack.render(out, Stack::VALUE_INDENT),
        Value::Record(fields) => {
            out.extend_from_slice(b"{ ");
            for (i, (name, field)) in fields.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                out.extend_from_slice(format!(".{name} = ").as_bytes());
                write_value(out, field, 1);
            }
            out.extend_from_slice(b" }");
            return;
        }
        Value::Pointer(address) => format!("{address:#x}"),
        Value::Array(elems) => return write_array(out, elems, div),
        Value::Hist(counts) => return write_hist(out, counts, div),
        Value::FineHist { bits, counts } => return write_fine_hist(out, counts, *bits, div),
        Value::Tseries { points, signed } => return out.extend(super::tseries::text(points, *signed)),
        Value::Lhist { min, max, step, counts } => return write_lhist(out, counts, *min, *max, *step),
    };
    out.extend_from_slice(text.as_bytes());
}

/// An array as current bpftrace prints it: `[1,2,3]`.
fn write_array(out: &mut Vec<u8>, elems: &[Value], div: u64) {
    out.push(b'[');
    write_list(out, elems, b",", |out, elem| write_value(out, elem, div));
    out.push(b']');
}

/// `1`, `2`, … `512`, `1K`, … `512K`, `1M`, … for a power of two (0.17's `hist_index_label`; past 2^49 it
/// uses the later `P`/`E` suffixes rather than 0.17's `1024T`, a range 0.17 could not reach).
fn hist_label(power: usize) -> String {
    let decade = power / 10;
    let suffix = ["", "K", "M", "G", "T", "P", "E"][decade];
    format!("{}{suffix}", 1u64 << (power - 10 * decade))
}

/// A label of an `lhist` with this `step`, as 0.27.1's `lhist_index_label`: the number, but when `step` is
/// a multiple of 1024, `0`, else `NM` if a multiple of 1Mi, else `NK` if a multiple of 1Ki, else the number
/// (`[1024, 1028)` for step 4, `[2K, 3K)` for step 1024). 0.17 applied the suffixes whatever the step.
fn lhist_label(number: i64, step: i64) -> String {
    const KILO: i64 = 1024;
    const MEGA: i64 = 1024 * 1024;
    if step % KILO != 0 || number == 0 || number % KILO != 0 {
        number.to_string()
    } else if number % MEGA == 0 {
        format!("{}M", number / MEGA)
    } else {
        format!("{}K", number / KILO)
    }
}

fn write_bucket(out: &mut Vec<u8>, label: &str, shown: u64, count: u64, max_count: u64) {
    let bar = ((count as f32 / max_count as f32) * BAR_WIDTH as f32) as usize;
    let line = format!("{label:<16}{shown:>8} |{:<BAR_WIDTH$}|\n", "@".repeat(bar.min(BAR_WIDTH)));
    out.extend_from_slice(line.as_bytes());
}

fn write_hist(out: &mut Vec<u8>, counts: &[u64], div: u64) {
    let counts = &counts[..counts.len().min(HIST_BUCKETS)];
    let Some(first) = counts.iter().position(|&c| c > 0) else { return };
    let last = counts.iter().rposition(|&c| c > 0).unwrap_or(first);
    let max_count = counts.iter().copied().max().unwrap_or(0);
    for (i, &count) in counts.iter().enumerate().take(last + 1).skip(first) {
        let label = match i {
            0 => "(..., 0)".to_string(),
            1 => "[0]".to_string(),
            2 => "[1]".to_string(),
            _ => format!("[{}, {})", hist_label(i - 2), hist_label(i - 1)),
        };
        write_bucket(out, &label, count / div, count, max_count);
    }
}

/// A byte array as current bpftrace prints arrays: `[127,0,0,1]`.
pub(crate) fn write_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    let items: Vec<String> = bytes.iter().map(u8::to_string).collect();
    out.extend_from_slice(format!("[{}]", items.join(",")).as_bytes());
}

fn write_fine_hist(out: &mut Vec<u8>, counts: &[u64], bits: u32, div: u64) {
    let Some(first) = counts.iter().position(|&c| c > 0) else { return };
    let last = counts.iter().rposition(|&c| c > 0).unwrap_or(first);
    let max_count = counts.iter().copied().max().unwrap_or(0);
    for (i, &count) in counts.iter().enumerate().take(last + 1).skip(first) {
        write_bucket(out, &super::finehist::label(i, bits), count / div, count, max_count);
    }
}

/// Bucket labels as 0.27.1 writes them: `(..., min)`, `[lo, hi)`, `[lo]` when the bucket holds one value
/// (step 1), and the overflow bucket `[min + buckets*step, ...)`, which is below `max` when `step` does not
/// divide `max - min` (`lhist(x, 0, 105, 10)`: `[100, ...)`; 0.17 wrote `[105, ...)`).
fn write_lhist(out: &mut Vec<u8>, counts: &[u64], min: i64, max: i64, step: i64) {
    let buckets = super::value::lhist_range_buckets(min, max, step);
    let shown = &counts[..counts.len().min(buckets + 2)];
    let Some(first) = shown.iter().position(|&c| c > 0) else { return };
    let last = shown.iter().rposition(|&c| c > 0).unwrap_or(first);
    let max_count = counts.iter().copied().max().unwrap_or(0);
    let name = |number: i64| lhist_label(number, step);
    for (i, &count) in shown.iter().enumerate().take(last + 1).skip(first) {
        let low = min + (i as i64 - 1) * step;
        let label = if i == 0 {
            format!("(..., {})", name(min))
        } else if i == buckets + 1 {
            format!("[{}, ...)", name(low))
        } else if step == 1 {
            format!("[{}]", name(low))
        } else {
            format!("[{}, {})", name(low), name(low + step))
        };
        write_bucket(out, &label, count, count, max_count);
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_values::{hist, lhist, text};
    use super::super::value::KeyPart;
    use super::*;
    use crate::symbols::StackMode;

    fn count_map(name: &str, entries: &[(i64, u64)]) -> MapSnapshot {
        MapSnapshot::new(name, entries.iter().map(|&(k, n)| (Key::int(k), Value::Count(n))).collect())
    }

    #[test]
    fn scalars_and_keys_at_exit() {
        // bpftrace -e 'BEGIN { @a[1] = count(); @a[2] = count(); @a[2] = count(); @z = 1; @m = 3; exit(); }'
        let expected = "\n\n@a[1]: 1\n@a[2]: 2\n@m: 3\n@z: 1\n";
        let maps = [
            MapSnapshot::new("@z", vec![(Key::scalar(), Value::int(1))]),
            count_map("@a", &[(2, 2), (1, 1)]),
            MapSnapshot::new("@m", vec![(Key::scalar(), Value::int(3))]),
        ];
        assert_eq!(text(print_maps_at_exit(&maps)), expected);
    }

    #[test]
    fn tuple_keys_and_signed_values() {
        // bpftrace -e 'BEGIN { @t[1, "abc"] = count(); @t[2, "x y"] = count(); @t[2, "x y"] = count();
        //   print(@t); @v[1] = -5; @v[2] = 3; @v[3] = -100; print(@v); clear(@t); clear(@v); exit(); }'
        let expected = "@t[1, abc]: 1\n@t[2, x y]: 2\n@v[3]: -100\n@v[1]: -5\n@v[2]: 3\n";
        let key = |n: i64, s: &[u8]| {
            Key(vec![KeyPart::Int { value: n as u64, signed: true }, KeyPart::Str(s.to_vec())])
        };
        let t = MapSnapshot::new(
            "@t",
            vec![(key(2, b"x y\0\0\0"), Value::Count(2)), (key(1, b"abc"), Value::Count(1))],
        );
        let v = MapSnapshot::new(
            "@v",
            vec![
                (Key::int(1), Value::int(-5)),
                (Key::int(2), Value::int(3)),
                (Key::int(3), Value::int(-100)),
            ],
        );
        assert_eq!(text([print_map(&t, None, None), print_map(&v, None, None)].concat()), expected);
    }

    #[test]
    fn string_values_sorted_by_unsigned_key() {
        // bpftrace -e 'BEGIN { @s[-1] = "a"; @s[1] = "b"; @s[-5]="c"; @s[3]="d"; @s[256]="e"; exit(); }'
        let expected = "@s[1]: b\n@s[3]: d\n@s[256]: e\n@s[-5]: c\n@s[-1]: a\n";
        let m = MapSnapshot::new(
            "@s",
            [(-1, "a"), (1, "b"), (-5, "c"), (3, "d"), (256, "e")]
                .iter()
                .map(|&(k, v)| (Key::int(k), Value::str(v.as_bytes())))
                .collect(),
        );
        assert_eq!(text(print_map(&m, None, None)), expected);
        // bpftrace -e 'BEGIN { @s["b"] = "x"; @s["a"] = "y"; @s["a\"b\\c"] = "q\n"; exit(); }'
        let expected = "@s[a]: y\n@s[a\"b\\c]: q\n\n@s[b]: x\n";
        let m = MapSnapshot::new(
            "@s",
            vec![
                (Key::str(b"b"), Value::str(b"x")),
                (Key::str(b"a\"b\\c"), Value::str(b"q\n")),
                (Key::str(b"a"), Value::str(b"y")),
            ],
        );
        assert_eq!(text(print_map(&m, None, None)), expected);
    }

    #[test]
    fn hist_from_brief() {
        // bpftrace -e 'BEGIN { @h = hist(5); @h = hist(1000); print(@h); clear(@h); exit(); }'
        let expected = "@h:\n\
[4, 8)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[8, 16)                0 |                                                    |
[16, 32)               0 |                                                    |
[32, 64)               0 |                                                    |
[64, 128)              0 |                                                    |
[128, 256)             0 |                                                    |
[256, 512)             0 |                                                    |
[512, 1K)              1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

";
        let m = MapSnapshot::new("@h", vec![(Key::scalar(), hist(&[5, 1000]))]);
        assert_eq!(text(print_map(&m, None, None)), expected);
    }

    #[test]
    fn hist_small_and_negative_buckets() {
        // bpftrace -e 'BEGIN { @h = hist(-1); @h = hist(0); @h = hist(1); @h = hist(1); @h = hist(2);
        //   @h = hist(3); @h = hist(4); @h = hist(1024); @h = hist(1048576); exit(); }'
        let expected = "@h:\n\
(..., 0)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |
[0]                    1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |
[1]                    2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[2, 4)                 2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[4, 8)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |
[8, 16)                0 |                                                    |
[16, 32)               0 |                                                    |
[32, 64)               0 |                                                    |
[64, 128)              0 |                                                    |
[128, 256)             0 |                                                    |
[256, 512)             0 |                                                    |
[512, 1K)              0 |                                                    |
[1K, 2K)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |
[2K, 4K)               0 |                                                    |
[4K, 8K)               0 |                                                    |
[8K, 16K)              0 |                                                    |
[16K, 32K)             0 |                                                    |
[32K, 64K)             0 |                                                    |
[64K, 128K)            0 |                                                    |
[128K, 256K)           0 |                                                    |
[256K, 512K)           0 |                                                    |
[512K, 1M)             0 |                                                    |
[1M, 2M)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |

";
        let m = MapSnapshot::new("@h", vec![(Key::scalar(), hist(&[-1, 0, 1, 1, 2, 3, 4, 1024, 1048576]))]);
        assert_eq!(text(print_maps_at_exit(&[m]))[2..], *expected);
    }

    #[test]
    fn hist_top_div_and_bar_rounding() {
        // bpftrace -e 'BEGIN { @h[1] = hist(5); @h[1] = hist(5); @h[1] = hist(5); @h[1] = hist(100);
        //   @h[2] = hist(1); @h[3] = hist(1); @h[3] = hist(2); print(@h, 2, 2); clear(@h); exit(); }'
        // (the count column is divided, the bar is not; 1/3 * 52 truncates to 17)
        let expected = "@h[3]:\n\
[1]                    0 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[2, 4)                 0 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

@h[1]:\n\
[4, 8)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[8, 16)                0 |                                                    |
[16, 32)               0 |                                                    |
[32, 64)               0 |                                                    |
[64, 128)              0 |@@@@@@@@@@@@@@@@@                                   |

";
        let m = MapSnapshot::new(
            "@h",
            vec![
                (Key::int(1), hist(&[5, 5, 5, 100])),
                (Key::int(2), hist(&[1])),
                (Key::int(3), hist(&[1, 2])),
            ],
        );
        assert_eq!(text(print_map(&m, Some(2), Some(2))), expected);
    }

    #[test]
    fn hist_ties_in_key_byte_order() {
        // bpftrace -e 'BEGIN { @h[1] = hist(1); @h[256] = hist(1); @h[-1] = hist(1); @h[2] = hist(1);
        //   @h[2] = hist(1); print(@h); clear(@h); exit(); }'
        let expected = "@h[256]:\n\
[1]                    1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

@h[1]:\n\
[1]                    1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

@h[-1]:\n\
[1]                    1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

@h[2]:\n\
[1]                    2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

";
        let m = MapSnapshot::new(
            "@h",
            vec![
                (Key::int(-1), hist(&[1])),
                (Key::int(2), hist(&[1, 1])),
                (Key::int(1), hist(&[1])),
                (Key::int(256), hist(&[1])),
            ],
        );
        assert_eq!(text(print_map(&m, None, None)), expected);
    }

    #[test]
    fn hist_large_values() {
        // bpftrace -e 'BEGIN { @h = hist(2147483648); @h = hist(1073741824); exit(); }'
        // (values below 2^32; 0.17 would lump anything >= 2^32 into [2G, 4G) too, see hist_bucket_index)
        let expected = "@h:\n\
[1G, 2G)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[2G, 4G)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

";
        let m = MapSnapshot::new("@h", vec![(Key::scalar(), hist(&[2147483648, 1073741824]))]);
        assert_eq!(text(print_map(&m, None, None)), expected);
        // Beyond 0.17's reach (v0.20+ labels): 10G and 2^62.
        let m = MapSnapshot::new("@h", vec![(Key::scalar(), hist(&[10 << 30]))]);
        assert_eq!(
            text(print_map(&m, None, None)).lines().nth(1).unwrap(),
            "[8G, 16G)              1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|"
        );
        let m = MapSnapshot::new("@h", vec![(Key::scalar(), hist(&[i64::MAX]))]);
        assert!(text(print_map(&m, None, None)).contains("[4E, 8E)"));
    }

    #[test]
    fn lhist_with_under_and_overflow() {
        // bpftrace -e 'BEGIN { @l = lhist(-5, 0, 100, 10); @l = lhist(0, 0, 100, 10); @l = lhist(9, 0, 100, 10);
        //   @l = lhist(10, 0, 100, 10); @l = lhist(55, 0, 100, 10); @l = lhist(55, 0, 100, 10);
        //   @l = lhist(100, 0, 100, 10); @l = lhist(1000, 0, 100, 10); exit(); }'
        let expected = "@l:\n\
(..., 0)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |
[0, 10)                2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[10, 20)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |
[20, 30)               0 |                                                    |
[30, 40)               0 |                                                    |
[40, 50)               0 |                                                    |
[50, 60)               2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[60, 70)               0 |                                                    |
[70, 80)               0 |                                                    |
[80, 90)               0 |                                                    |
[90, 100)              0 |                                                    |
[100, ...)             2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

";
        let m = MapSnapshot::new(
            "@l",
            vec![(Key::scalar(), lhist(&[-5, 0, 9, 10, 55, 55, 100, 1000], 0, 100, 10))],
        );
        assert_eq!(text(print_map(&m, None, None)), expected);
    }

    #[test]
    fn lhist_labels_and_uneven_range() {
        // bpftrace -e 'BEGIN { @l = lhist(3000, 1024, 10240, 1024); @l = lhist(10240, 1024, 10240, 1024);
        //   @l = lhist(5, 1024, 10240, 1024); exit(); }'
        let expected = "@l:\n\
(..., 1K)              1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[1K, 2K)               0 |                                                    |
[2K, 3K)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[3K, 4K)               0 |                                                    |
[4K, 5K)               0 |                                                    |
[5K, 6K)               0 |                                                    |
[6K, 7K)               0 |                                                    |
[7K, 8K)               0 |                                                    |
[8K, 9K)               0 |                                                    |
[9K, 10K)              0 |                                                    |
[10K, ...)             1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

";
        let m = MapSnapshot::new("@l", vec![(Key::scalar(), lhist(&[3000, 10240, 5], 1024, 10240, 1024))]);
        assert_eq!(text(print_map(&m, None, None)), expected);
        // bpftrace -e 'BEGIN { @l = lhist(104, 0, 105, 10); @l = lhist(99, 0, 105, 10);
        //   @l = lhist(106, 0, 105, 10); exit(); }'   (0.27.1; 0.17 wrote `[105, ...)`)
        let expected = "@l:\n\
[90, 100)              1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |
[100, ...)             2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

";
        let m = MapSnapshot::new("@l", vec![(Key::scalar(), lhist(&[104, 99, 106], 0, 105, 10))]);
        assert_eq!(text(print_map(&m, None, None)), expected);
        // bpftrace -e 'BEGIN { @l = lhist(1048575, 0, 2097152, 524288); @l = lhist(1, 0, 2097152, 524288);
        //   exit(); }'
        let expected = "@l:\n\
[0, 512K)              1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[512K, 1M)             1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

";
        let m = MapSnapshot::new("@l", vec![(Key::scalar(), lhist(&[1048575, 1], 0, 2097152, 524288))]);
        assert_eq!(text(print_map(&m, None, None)), expected);
    }

    #[test]
    fn lhist_step_one_suffixes_and_overflow_label() {
        // bpftrace 0.27.1 -e 'BEGIN { @a = lhist(5, 1024, 1040, 4); @a = lhist(1025, 1024, 1040, 4);
        //   @b = lhist(5, 1024, 1026, 1); @b = lhist(1024, 1024, 1026, 1); @b = lhist(1030, 1024, 1026, 1);
        //   @c = lhist(2048, 0, 4096, 1024); @c = lhist(5000, 0, 4096, 1024); @d = lhist(5000, 0, 4096, 1024);
        //   @m = lhist(1, 0, 10, 3); @m = lhist(9, 0, 10, 3); exit(); }'
        // (K and M only for a step that is a multiple of 1024; `[N]` for a bucket of one value; the overflow
        // bucket from the end of the last full bucket)
        let expected = "\n\n@a:
(..., 1024)            1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[1024, 1028)           1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

@b:
(..., 1024)            1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[1024]                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[1025]                 0 |                                                    |
[1026, ...)            1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

@c:
[2K, 3K)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[3K, 4K)               0 |                                                    |
[4K, ...)              1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

@d:
[4K, ...)              1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

@m:
[0, 3)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[3, 6)                 0 |                                                    |
[6, 9)                 0 |                                                    |
[9, ...)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

";
        let maps = [
            MapSnapshot::new("@a", vec![(Key::scalar(), lhist(&[5, 1025], 1024, 1040, 4))]),
            MapSnapshot::new("@b", vec![(Key::scalar(), lhist(&[5, 1024, 1030], 1024, 1026, 1))]),
            MapSnapshot::new("@c", vec![(Key::scalar(), lhist(&[2048, 5000], 0, 4096, 1024))]),
            MapSnapshot::new("@d", vec![(Key::scalar(), lhist(&[5000], 0, 4096, 1024))]),
            MapSnapshot::new("@m", vec![(Key::scalar(), lhist(&[1, 9], 0, 10, 3))]),
        ];
        assert_eq!(text(print_maps_at_exit(&maps)), expected);
    }

    #[test]
    fn lhist_top_ignores_div() {
        // bpftrace -e 'BEGIN { @l[1] = lhist(5, 0, 10, 1); @l[1] = lhist(5, 0, 10, 1); @l[1] = lhist(5, 0, 10, 1);
        //   @l[2] = lhist(1, 0, 10, 1); print(@l, 1, 2); clear(@l); exit(); }'   (0.27.1; 0.17 wrote `[5, 6)`)
        let expected = "@l[1]:\n\
[5]                    3 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

";
        let m = MapSnapshot::new(
            "@l",
            vec![(Key::int(2), lhist(&[1], 0, 10, 1)), (Key::int(1), lhist(&[5, 5, 5], 0, 10, 1))],
        );
        assert_eq!(text(print_map(&m, Some(1), Some(2))), expected);
    }

    #[test]
    fn stats_and_avg() {
        // bpftrace -e 'BEGIN { @s[1] = stats(-3); @s[2] = stats(10); @s[2] = stats(-3); @a[1] = avg(-7);
        //   @a[1] = avg(2); @a[2] = avg(100); exit(); }'   (0.27.1: no blank line after an avg or stats map)
        let expected = "\n\n@a[1]: -2\n@a[2]: 100\n@s[1]: { .count = 1, .average = -3, .total = -3 }\n\
@s[2]: { .count = 2, .average = 3, .total = 7 }\n";
        let maps = [
            MapSnapshot::new(
                "@s",
                vec![
                    (Key::int(2), Value::Stats { count: 2, total: 7 }),
                    (Key::int(1), Value::Stats { count: 1, total: -3 }),
                ],
            ),
            MapSnapshot::new(
                "@a",
                vec![
                    (Key::int(2), Value::Avg { count: 1, total: 100 }),
                    (Key::int(1), Value::Avg { count: 2, total: -5 }),
                ],
            ),
        ];
        assert_eq!(text(print_maps_at_exit(&maps)), expected);
        // bpftrace -e 'BEGIN { @s[1] = stats(10); @s[2] = stats(20); @s[3] = stats(30); print(@s, 1, 3);
        //   @a[1] = avg(10); @a[2] = avg(20); @a[3] = avg(-30); print(@a, 2, 3); clear(@a); clear(@s); exit(); }'
        // (0.27.1 warns that top and div are ignored for stats maps, then applies both, div to the average)
        let expected = "@s[3]: { .count = 1, .average = 10, .total = 30 }\n@a[1]: 3\n@a[2]: 6\n";
        let s = MapSnapshot::new(
            "@s",
            (1..=3).map(|k| (Key::int(k), Value::Stats { count: 1, total: k * 10 })).collect(),
        );
        let a = MapSnapshot::new(
            "@a",
            [(1, 10), (2, 20), (3, -30)]
                .iter()
                .map(|&(k, t)| (Key::int(k), Value::Avg { count: 1, total: t }))
                .collect(),
        );
        assert_eq!(
            text([print_map(&s, Some(1), Some(3)), print_map(&a, Some(2), Some(3))].concat()),
            expected
        );
    }

    #[test]
    fn min_max_sum_with_top_and_div() {
        // bpftrace -e 'BEGIN { @m[1] = min(10); @m[2] = min(-20); print(@m, 1, 3); @x[1] = max(10);
        //   @x[2] = max(21); print(@x, 1, 2); @s[1] = sum(-7); @s[2] = sum(3); print(@s, 5, 2); @v[1] = -7;
        //   print(@v, 0, 2); @c = count(); print(@c, 0, 2); clear(@m); clear(@x); clear(@s); clear(@v);
        //   clear(@c); exit(); }'
        let expected = "@m[1]: 3\n@x[2]: 10\n@s[1]: -3\n@s[2]: 1\n@v[1]: -3\n@c: 0\n";
        let m = MapSnapshot::new("@m", vec![(Key::int(1), Value::Min(10)), (Key::int(2), Value::Min(-20))]);
        let x = MapSnapshot::new("@x", vec![(Key::int(2), Value::Max(21)), (Key::int(1), Value::Max(10))]);
        let sum = |v: i64| Value::Sum { value: v as u64, signed: true };
        let s = MapSnapshot::new("@s", vec![(Key::int(2), sum(3)), (Key::int(1), sum(-7))]);
        let v = MapSnapshot::new("@v", vec![(Key::int(1), Value::int(-7))]);
        let c = MapSnapshot::new("@c", vec![(Key::scalar(), Value::Count(1))]);
        let out = [
            print_map(&m, Some(1), Some(3)),
            print_map(&x, Some(1), Some(2)),
            print_map(&s, Some(5), Some(2)),
            print_map(&v, Some(0), Some(2)),
            print_map(&c, None, Some(2)),
        ];
        assert_eq!(text(out.concat()), expected);
    }

    #[test]
    fn empty_and_zeroed_maps_at_exit() {
        // bpftrace -e 'BEGIN { @a[1] = 1; delete(@a[1]); @b = count(); clear(@b); @c = hist(1); clear(@c);
        //   @d = stats(1); clear(@d); @e[1] = lhist(1, 0, 10, 1); delete(@e[1]); exit(); }'
        // (clear() of a scalar count map zeroes it rather than deleting; 0.27.1 fails to load this script, and
        // the runtime leaves maps without entries out, as 0.27.1 does: here each prints a lone newline)
        let expected = "\n\n\n@b: 0\n\n\n\n";
        let empty = |name: &str, kind| MapSnapshot { name: name.into(), kind, entries: vec![] };
        let maps = [
            empty("@a", MapKind::Int),
            MapSnapshot::new("@b", vec![(Key::scalar(), Value::Count(0))]),
            empty("@c", MapKind::Hist),
            empty("@d", MapKind::Stats),
            empty("@e", MapKind::Lhist),
        ];
        assert_eq!(text(print_maps_at_exit(&maps)), expected);
        // bpftrace -e 'BEGIN { @h[1] = hist(5); @l = lhist(5, 0, 10, 1); @s[2] = stats(5); @a = avg(3);
        //   @c[3] = count(); zero(@h); zero(@l); zero(@s); zero(@a); zero(@c); exit(); }'   (0.27.1)
        let expected =
            "\n\n@a: 0\n@c[3]: 0\n@h[1]:\n\n@l:\n\n@s[2]: { .count = 0, .average = 0, .total = 0 }\n";
        let maps = [
            MapSnapshot::new("@h", vec![(Key::int(1), Value::Hist(vec![0; 65]))]),
            MapSnapshot::new("@l", vec![(Key::scalar(), lhist(&[], 0, 10, 1))]),
            MapSnapshot::new("@s", vec![(Key::int(2), Value::Stats { count: 0, total: 0 })]),
            MapSnapshot::new("@a", vec![(Key::scalar(), Value::Avg { count: 0, total: 0 })]),
            MapSnapshot::new("@c", vec![(Key::int(3), Value::Count(0))]),
        ];
        assert_eq!(text(print_maps_at_exit(&maps)), expected);
    }

    #[test]
    fn exit_order_is_bytewise_by_name() {
        // bpftrace -e 'BEGIN { @b = 1; @ = 2; @B = 3; @_x = 4; @a1 = 5; @a = 6; @ab = 7; exit(); }'
        let expected = "\n\n@: 2\n@B: 3\n@_x: 4\n@a: 6\n@a1: 5\n@ab: 7\n@b: 1\n";
        let maps: Vec<_> = [("@b", 1), ("@", 2), ("@B", 3), ("@_x", 4), ("@a1", 5), ("@a", 6), ("@ab", 7)]
            .iter()
            .map(|&(n, v)| MapSnapshot::new(n, vec![(Key::scalar(), Value::int(v))]))
            .collect();
        assert_eq!(text(print_maps_at_exit(&maps)), expected);
    }

    #[test]
    fn unsigned_and_narrow_integers() {
        // bpftrace -e 'BEGIN { @a[(uint64)18446744073709551615] = 1; @u = (uint64)18446744073709551615;
        //   @w = (int32)-1; @y = (uint8)255; exit(); }', except that the key is unsigned as current bpftrace
        //   prints it (0.17: `@a[-1]`)
        let expected = "\n\n@a[18446744073709551615]: 1\n@u: 18446744073709551615\n@w: -1\n@y: 255\n";
        let maps = [
            MapSnapshot::new(
                "@a",
                vec![(Key(vec![KeyPart::Int { value: u64::MAX, signed: false }]), Value::int(1))],
            ),
            MapSnapshot::new("@u", vec![(Key::scalar(), Value::uint(u64::MAX))]),
            MapSnapshot::new("@w", vec![(Key::scalar(), Value::int(-1))]),
            MapSnapshot::new("@y", vec![(Key::scalar(), Value::uint(255))]),
        ];
        assert_eq!(text(print_maps_at_exit(&maps)), expected);
    }

    #[test]
    fn values_and_tuples() {
        // bpftrace -e 'BEGIN { print(5); print(-5); print("hi \"x\"\n"); print((1, "a", -2));
        //   print((1, (2, "b"))); $x = (uint64)18446744073709551615; print($x); exit(); }'
        let expected = "5\n-5\nhi \"x\"\n\n(1, a, -2)\n(1, (2, b))\n18446744073709551615\n";
        let values = [
            Value::int(5),
            Value::int(-5),
            Value::str(b"hi \"x\"\n\0\0garbage"),
            Value::Tuple(vec![Value::int(1), Value::str(b"a"), Value::int(-2)]),
            Value::Tuple(vec![Value::int(1), Value::Tuple(vec![Value::int(2), Value::str(b"b")])]),
            Value::uint(u64::MAX),
        ];
        let out: Vec<u8> = values.iter().flat_map(print_value).collect();
        assert_eq!(text(out), expected);
        // bpftrace -e 'BEGIN { @t = (1, "abc"); @u[1] = (2, "x"); exit(); }'
        let expected = "\n\n@t: (1, abc)\n@u[1]: (2, x)\n";
        let maps = [
            MapSnapshot::new(
                "@t",
                vec![(Key::scalar(), Value::Tuple(vec![Value::int(1), Value::str(b"abc")]))],
            ),
            MapSnapshot::new("@u", vec![(Key::int(1), Value::Tuple(vec![Value::int(2), Value::str(b"x")]))]),
        ];
        assert_eq!(text(print_maps_at_exit(&maps)), expected);
    }

    fn stack(mode: StackMode, frames: &[&str]) -> Stack {
        Stack::new(mode, frames.iter().map(|f| f.to_string()).collect())
    }

    fn bt(frames: &[&str]) -> Stack {
        stack(StackMode::Bpftrace, frames)
    }

    #[test]
    fn stack_keyed_maps_at_exit() {
        // With ./spin (a C loop: main -> leaf, built with -fno-omit-frame-pointer) running as pid 15362:
        // bpftrace -e 'profile:hz:999 /pid == 15362/ { @[ustack] = count(); @k[kstack] = count(); }
        //   interval:ms:500 { exit(); }'
        // (kstack sampled in user mode has no stack: `@k[]`)
        let expected = "\n\n@[\n    leaf+15\n    main+29\n    __libc_start_call_main+122\n]: 32\n\
@[\n    leaf+8\n    main+29\n    __libc_start_call_main+122\n]: 468\n\
@k[\n    finish_task_switch.isra.0+147\n    __schedule+996\n    schedule+35\n    irqentry_exit_to_user_mode+287\n    \
asm_sysvec_apic_timer_interrupt+22\n]: 1\n\
@k[\n    irqentry_exit_to_user_mode+276\n    asm_sysvec_apic_timer_interrupt+22\n]: 1\n\
@k[]: 498\n";
        let main = ["main+29", "__libc_start_call_main+122"];
        let u = MapSnapshot::new(
            "@",
            vec![
                (Key::stack(bt(&[&["leaf+8"], &main[..]].concat())), Value::Count(468)),
                (Key::stack(bt(&[&["leaf+15"], &main[..]].concat())), Value::Count(32)),
            ],
        );
        let k = MapSnapshot::new(
            "@k",
            vec![
                (Key::stack(bt(&[])), Value::Count(498)),
                (
                    Key::stack(bt(&[
                        "finish_task_switch.isra.0+147",
                        "__schedule+996",
                        "schedule+35",
                        "irqentry_exit_to_user_mode+287",
                        "asm_sysvec_apic_timer_interrupt+22",
                    ])),
                    Value::Count(1),
                ),
                (
                    Key::stack(bt(&["irqentry_exit_to_user_mode+276", "asm_sysvec_apic_timer_interrupt+22"])),
                    Value::Count(1),
                ),
            ],
        );
        assert_eq!(text(print_maps_at_exit(&[k, u])), expected);
    }

    /// The idle stack of cpu 0, in the modes and places bpftrace 0.17 prints stacks.
    const IDLE: [&str; 10] = [
        "pv_native_safe_halt+11",
        "default_idle+5",
        "default_idle_call+36",
        "do_idle+532",
        "cpu_startup_entry+37",
        "rest_init+204",
        "start_kernel+1860",
        "__pfx_clear_bss+0",
        "x86_64_start_kernel+209",
        "common_startup_64+315",
    ];
    const IDLE_ADDRS: [&str; 10] = [
        "ffffffff8225fe6b",
        "ffffffff82261975",
        "ffffffff82261c34",
        "ffffffff813cff74",
        "ffffffff813d01d5",
        "ffffffff822627ec",
        "ffffffff83781254",
        "ffffffff8378d8c0",
        "ffffffff8378da21",
        "ffffffff81301533",
    ];

    fn idle_perf(n: usize) -> Stack {
        let frames: Vec<String> =
            IDLE_ADDRS.iter().zip(IDLE).take(n).map(|(a, f)| format!("{a} {f}")).collect();
        Stack::new(StackMode::Perf, frames)
    }

    #[test]
    fn stack_limits_and_perf_mode() {
        // bpftrace -e 'profile:hz:99 { @a[kstack(3)] = count(); @b[kstack(perf, 2)] = count();
        //   @c[kstack(perf)] = count(); } interval:ms:300 { exit(); }'   (an idle machine)
        let expected = "\n\n@a[\n    pv_native_safe_halt+11\n    default_idle+5\n    default_idle_call+36\n]: 29\n\
@b[\n\tffffffff8225fe6b pv_native_safe_halt+11\n\tffffffff82261975 default_idle+5\n]: 29\n\
@c[\n\tffffffff8225fe6b pv_native_safe_halt+11\n\tffffffff82261975 default_idle+5\n\
\tffffffff82261c34 default_idle_call+36\n\tffffffff813cff74 do_idle+532\n\tffffffff813d01d5 cpu_startup_entry+37\n\
\tffffffff822627ec rest_init+204\n\tffffffff83781254 start_kernel+1860\n\tffffffff8378d8c0 __pfx_clear_bss+0\n\
\tffffffff8378da21 x86_64_start_kernel+209\n\tffffffff81301533 common_startup_64+315\n]: 29\n";
        let maps = [
            MapSnapshot::new("@a", vec![(Key::stack(bt(&IDLE[..3])), Value::Count(29))]),
            MapSnapshot::new("@b", vec![(Key::stack(idle_perf(2)), Value::Count(29))]),
            MapSnapshot::new("@c", vec![(Key::stack(idle_perf(10)), Value::Count(29))]),
        ];
        assert_eq!(text(print_maps_at_exit(&maps)), expected);
        // bpftrace -e 'profile:hz:999 /pid == 15362/ { @[ustack(perf)] = count(); } interval:ms:300 { exit(); }'
        // and the same binary stripped (its own frames do not resolve; libc's do):
        let expected =
            "@[\n\t555b1ff13131 0x555b1ff13131 ([unknown])\n\t555b1ff13166 0x555b1ff13166 ([unknown])\n\
\t7f0128a2d24a __libc_start_call_main+122 (/usr/lib/x86_64-linux-gnu/libc.so.6)\n]: 25\n\
@[\n\t559e1b52f131 leaf+8 (/tmp/st/spin)\n\t559e1b52f166 main+29 (/tmp/st/spin)\n\
\t7f37d4d9724a __libc_start_call_main+122 (/usr/lib/x86_64-linux-gnu/libc.so.6)\n]: 27\n";
        let libc = "__libc_start_call_main+122 (/usr/lib/x86_64-linux-gnu/libc.so.6)";
        let m = MapSnapshot::new(
            "@",
            vec![
                (
                    Key::stack(stack(
                        StackMode::Perf,
                        &[
                            "559e1b52f131 leaf+8 (/tmp/st/spin)",
                            "559e1b52f166 main+29 (/tmp/st/spin)",
                            &format!("7f37d4d9724a {libc}"),
                        ],
                    )),
                    Value::Count(27),
                ),
                (
                    Key::stack(stack(
                        StackMode::Perf,
                        &[
                            "555b1ff13131 0x555b1ff13131 ([unknown])",
                            "555b1ff13166 0x555b1ff13166 ([unknown])",
                            &format!("7f0128a2d24a {libc}"),
                        ],
                    )),
                    Value::Count(25),
                ),
            ],
        );
        assert_eq!(text(print_map(&m, None, None)), expected);
        // Raw mode (bpftrace 0.18+, `ustack(raw)`): addresses alone, not indented.
        let m = MapSnapshot::new(
            "@",
            vec![(Key::stack(stack(StackMode::Raw, &["559e1b52f131", "559e1b52f166"])), Value::Count(3))],
        );
        assert_eq!(text(print_map(&m, None, None)), "@[\n559e1b52f131\n559e1b52f166\n]: 3\n");
    }

    #[test]
    fn stack_values() {
        // bpftrace -e 'profile:hz:99 /cpu == 0/ { @v[1] = kstack; @v[2] = kstack; @w = kstack(perf);
        //   @u = ustack; exit(); }'   (cpu 0 idle: kernel stack only, no user stack)
        let expected = "\n\n@u: \n@v[1]: \n        pv_native_safe_halt+11\n        default_idle+5\n        \
default_idle_call+36\n        do_idle+532\n        cpu_startup_entry+37\n        rest_init+204\n        \
start_kernel+1860\n        __pfx_clear_bss+0\n        x86_64_start_kernel+209\n        common_startup_64+315\n\
@v[2]: \n        pv_native_safe_halt+11\n        default_idle+5\n        default_idle_call+36\n        do_idle+532\n        \
cpu_startup_entry+37\n        rest_init+204\n        start_kernel+1860\n        __pfx_clear_bss+0\n        \
x86_64_start_kernel+209\n        common_startup_64+315\n\n\
@w: \n\tffffffff8225fe6b pv_native_safe_halt+11\n\tffffffff82261975 default_idle+5\n\
\tffffffff82261c34 default_idle_call+36\n\tffffffff813cff74 do_idle+532\n\tffffffff813d01d5 cpu_startup_entry+37\n\
\tffffffff822627ec rest_init+204\n\tffffffff83781254 start_kernel+1860\n\tffffffff8378d8c0 __pfx_clear_bss+0\n\
\tffffffff8378da21 x86_64_start_kernel+209\n\tffffffff81301533 common_startup_64+315\n\n";
        let maps = [
            MapSnapshot::new(
                "@v",
                vec![(Key::int(2), Value::Stack(bt(&IDLE))), (Key::int(1), Value::Stack(bt(&IDLE)))],
            ),
            MapSnapshot::new("@w", vec![(Key::scalar(), Value::Stack(idle_perf(10)))]),
            MapSnapshot::new("@u", vec![(Key::scalar(), Value::Stack(bt(&[])))]),
        ];
        assert_eq!(text(print_maps_at_exit(&maps)), expected);
        // bpftrace -e 'profile:hz:99 /cpu == 0/ { printf("%s|\n", kstack(2)); print(kstack(2)); exit(); }'
        let two = bt(&IDLE[..2]);
        let mut printf = two.value_text();
        printf.extend_from_slice(b"|\n");
        assert_eq!(text(printf), "\n        pv_native_safe_halt+11\n        default_idle+5\n|\n");
        assert_eq!(
            text(print_value(&Value::Stack(two))),
            "\n        pv_native_safe_halt+11\n        default_idle+5\n\n"
        );
    }

    #[test]
    fn folded_lines() {
        // The maps of stack_keyed_maps_at_exit, as stackcollapse-bpftrace.pl folds bpftrace's text of them.
        let m = MapSnapshot::new(
            "@",
            vec![
                (Key::stack(bt(&["leaf+8", "main+29", "__libc_start_call_main+122"])), Value::Count(468)),
                (Key::stack(bt(&[])), Value::Count(498)),
                (Key::stack(bt(&["leaf+15", "main+29", "__libc_start_call_main+122"])), Value::Count(32)),
            ],
        );
        assert_eq!(
            text(folded(&m, false).unwrap()),
            "__libc_start_call_main+122;main+29;leaf+15 32\n__libc_start_call_main+122;main+29;leaf+8 468\n"
        );
        assert_eq!(
            text(folded(&m, true).unwrap()),
            "__libc_start_call_main;main;leaf 32\n__libc_start_call_main;main;leaf 468\n"
        );
        // Frames that do not resolve have no offset to strip.
        let m = MapSnapshot::new("@", vec![(Key::stack(bt(&["0x555b1ff13131", "f+1"])), Value::Count(2))]);
        assert_eq!(text(folded(&m, true).unwrap()), "f;0x555b1ff13131 2\n");
        // Not a single stack key, or not a count: no folded form.
        assert_eq!(folded(&count_map("@c", &[(1, 2)]), false), None);
        let two_parts = Key(vec![KeyPart::Stack(bt(&["f+1"])), KeyPart::Int { value: 1, signed: true }]);
        assert_eq!(folded(&MapSnapshot::new("@", vec![(two_parts, Value::Count(1))]), false), None);
        let hist = MapSnapshot::new("@", vec![(Key::stack(bt(&["f+1"])), Value::Hist(vec![0, 1]))]);
        assert_eq!(folded(&hist, false), None);
    }

    #[test]
    fn messages() {
        // bpftrace -e 'BEGIN { exit(); }'  =>  "Attaching 1 probe...\n"
        assert_eq!(text(attached_probes(1)), "Attaching 1 probe...\n");
        assert_eq!(text(attached_probes(2)), "Attaching 2 probes...\n");
        assert_eq!(text(lost_events(3)), "Lost 3 events\n");
        assert_eq!(text(message(b"no newline", false)), "no newline");
        assert_eq!(text(message(b"a b", true)), "a b\n");
    }
}
