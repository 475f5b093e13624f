//! Maps, values and messages in bpftrace 0.17's `-f json` format: one JSON object per line, written
//! exactly as 0.17 writes them (spacing included: `{"type": "map", "data": {"@a": {"1": 1, "2": 2}}}`).
//!
//! Rules (0.17, `JsonOutput` in src/output.cpp):
//! - `type` is `map` for int/str/tuple/count/sum/min/max maps, `hist` for hist and lhist, `stats` for avg
//!   and stats; an empty map prints nothing at all (not even a newline);
//! - a keyed map's data is an object keyed by the key parts joined with `,` (no space) as one string
//!   (`"1,abc"`); a scalar map's data is the bare value;
//! - integers are bare numbers (unsigned ones as such, `18446744073709551615`), strings quoted and escaped,
//!   tuples `[1,"a"]` (no spaces), avg a bare number, stats `{"count": 2, "average": 3, "total": 7}`;
//! - a histogram is `[{"min": 4, "max": 7, "count": 1},{"min": 8, ...}]` (0.27.1: no space between buckets;
//!   0.17 wrote `}, {`) over the buckets from the first to the last non-zero one, the underflow bucket without
//!   `min`, the overflow one without `max`; `[]` when all zero;
//! - sorting, `top` and `div` as in text mode (div also divides hist counts and stats averages; ignored for
//!   lhist);
//! - a stack is the string of its text-mode rendering, newlines and all: as a key with frames indented by
//!   4 (`{"@a": {"\n    pv_native_safe_halt+11\n    default_idle+5\n": 29, "": 4}}`, the empty key being
//!   an absent stack; `"\n    f+1\n,5"` for `@b[kstack, 5]`), as a value (`print(kstack)`, `@v[1] = kstack`)
//!   indented by 8; a perf-mode frame starts with an escaped tab (`"\n\tffffffff8225fe6b pv_nat…"`).
//!
//! Strings are escaped by hand rather than with serde_json: 0.17 writes `\"`, `\\`, `\n`, `\r`, `\t` and
//! every other byte below 0x20 as `\u00XX` (lowercase hex, so `\b` and `\f` too, where serde_json would
//! write the short forms), and DEL as is; and our strings are bytes that need not be UTF-8.
//! One deliberate difference: 0.17 escapes bytes >= 0x80 through a signed `char` as `\uffffffc3`, which
//! is not valid JSON (bpftrace bug, still present upstream); we pass them through unchanged, so UTF-8
//! text stays valid JSON.

use super::text::write_list;
use super::value::{
    divisor, exit_order, hist_bucket_range, lhist_bucket_range, KeyPart, MapKind, MapSnapshot, Stack, Value,
    HIST_BUCKETS,
};

/// The kinds of text message bpftrace emits as `{"type": "<kind>", "data": "<text>"}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageKind {
    Printf,
    Time,
    Cat,
    Join,
    /// `system()` output.
    Syscall,
}

impl MessageKind {
    fn name(self) -> &'static str {
        match self {
            MessageKind::Printf => "printf",
            MessageKind::Time => "time",
            MessageKind::Cat => "cat",
            MessageKind::Join => "join",
            MessageKind::Syscall => "syscall",
        }
    }
}

/// `errorf()`/`warnf()` as current bpftrace writes them: `{"type": "errorf", "msg": ..., "filename": ...,
/// "line": N, "col": N}`.
pub fn log(log: &crate::codegen::record::Log, message: &[u8]) -> Vec<u8> {
    let kind = if log.error { "errorf" } else { "warnf" };
    let mut out = format!("{{\"type\": \"{kind}\", \"msg\": \"").into_bytes();
    escape(&mut out, message);
    out.extend_from_slice(b"\", \"filename\": \"");
    escape(&mut out, log.location.file.as_bytes());
    out.extend_from_slice(
        format!("\", \"line\": {}, \"col\": {}}}\n", log.location.line, log.location.column).as_bytes(),
    );
    out
}

/// A probe read that failed (`-k`) as bpftrace 0.27.1 writes it: `{"type": "helper_error", "msg": ...,
/// "helper": ..., "retcode": N, "filename": ..., "line": N, "col": N}`.
pub fn helper_error(read: &crate::codegen::record::ReadFailure, reason: &str, ret: i64) -> Vec<u8> {
    let mut out = b"{\"type\": \"helper_error\", \"msg\": \"".to_vec();
    escape(&mut out, reason.as_bytes());
    out.extend_from_slice(
        format!("\", \"helper\": \"{}\", \"retcode\": {ret}, \"filename\": \"", read.helper).as_bytes(),
    );
    escape(&mut out, read.location.file.as_bytes());
    out.extend_from_slice(
        format!("\", \"line\": {}, \"col\": {}}}\n", read.location.line, read.location.column).as_bytes(),
    );
    out
}

/// Appends `bytes` JSON-escaped as 0.17 does (without the surrounding quotes); see the module docs.
pub fn escape(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..=0x1f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
}

fn quoted(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    escape(out, bytes);
    out.push(b'"');
}

/// `print(@m, top, div)` in JSON: one line, or nothing for an empty map.
pub fn print_map(map: &MapSnapshot, top: Option<usize>, div: Option<u64>) -> Vec<u8> {
    let mut out = Vec::new();
    if map.entries.is_empty() {
        return out;
    }
    let div = divisor(div);
    let kind = match map.kind {
        MapKind::Hist | MapKind::Lhist => "hist",
        MapKind::Tseries => "tseries",
        MapKind::Avg | MapKind::Stats => "stats",
        _ => "map",
    };
    out.extend_from_slice(format!("{{\"type\": \"{kind}\", \"data\": {{").as_bytes());
    quoted(&mut out, map.name.as_bytes());
    out.extend_from_slice(b": ");
    let keyed = map.is_keyed();
    if keyed {
        out.push(b'{');
    }
    for (i, (key, value)) in map.print_order(top).into_iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        if !key.is_scalar() {
            let mut joined = Vec::new();
            write_list(&mut joined, &key.0, b",", write_key_part);
            quoted(&mut out, &joined);
            out.extend_from_slice(b": ");
        }
        write_value(&mut out, value, div);
    }
    if keyed {
        out.push(b'}');
    }
    out.extend_from_slice(b"}}\n");
    out
}

/// A key part inside a JSON key's string: as text writes it, but a record compact, as current bpftrace writes
/// it there (`{.a=1,.b=x}`).
fn write_key_part(out: &mut Vec<u8>, part: &KeyPart) {
    match part {
        KeyPart::Tuple(parts) => {
            out.push(b'(');
            write_list(out, parts, b", ", write_key_part);
            out.push(b')');
        }
        KeyPart::Record { names, parts } => {
            out.push(b'{');
            write_list(out, &names.iter().zip(parts).collect::<Vec<_>>(), b",", |out, (name, part)| {
                out.extend_from_slice(format!(".{name}=").as_bytes());
                write_key_part(out, part);
            });
            out.push(b'}');
        }
        _ => super::text::write_key_part(out, part),
    }
}

/// What `bpftrace -f json` prints when it exits: every map, by name, as [`print_map`] prints it (bpftrace 0.17
/// wrote an empty line pair first, as in text; current bpftrace does not).
pub fn print_maps_at_exit(maps: &[MapSnapshot]) -> Vec<u8> {
    let mut out = vec![];
    for map in exit_order(maps) {
        out.extend(print_map(map, None, None));
    }
    out
}

/// `print(value)` for a non-map value: `{"type": "value", "data": 5}`.
pub fn print_value(value: &Value) -> Vec<u8> {
    let mut out = b"{\"type\": \"value\", \"data\": ".to_vec();
    write_value(&mut out, value, 1);
    out.extend_from_slice(b"}\n");
    out
}

/// `printf`/`time`/`cat`/`join`/`system` output: `{"type": "printf", "data": "text\n"}`.
pub fn message(kind: MessageKind, text: &[u8]) -> Vec<u8> {
    let mut out = format!("{{\"type\": \"{}\", \"data\": ", kind.name()).into_bytes();
    quoted(&mut out, text);
    out.extend_from_slice(b"}\n");
    out
}

/// `{"type": "attached_probes", "count": 2, "data": {"probes": 2}}` (current bpftrace's; 0.17 had no `count`).
pub fn attached_probes(probes: u64) -> Vec<u8> {
    format!("{{\"type\": \"attached_probes\", \"count\": {probes}, \"data\": {{\"probes\": {probes}}}}}\n")
        .into_bytes()
}

/// What CPU hotplug made steadytrace do: `{"type": "revivals", "data": {"reopened": 2, ...}}`.
pub fn revivals(reopened: u64, reenabled: u64, new_cpu: u64, moved: u64) -> Vec<u8> {
    format!(
        "{{\"type\": \"revivals\", \"data\": {{\"reopened\": {reopened}, \"reenabled\": {reenabled}, \"new_cpu\": {new_cpu}, \"moved\": {moved}}}}}\n"
    )
    .into_bytes()
}

/// `{"type": "lost_events", "count": 3, "data": {"events": 3}}`, as current bpftrace writes it (0.17 wrote
/// nothing in JSON mode).
pub fn lost_events(lost: u64) -> Vec<u8> {
    format!("{{\"type\": \"lost_events\", \"count\": {lost}, \"data\": {{\"events\": {lost}}}}}\n")
        .into_bytes()
}

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
        Value::Stats { count, total } => format!(
            "{{\"count\": {count}, \"average\": {}, \"total\": {total}}}",
            Value::average(*count, *total).wrapping_div(div as i64)
        ),
        Value::Str(bytes) => {
            return quoted(out, &bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())]);
        }
        Value::Bytes(bytes) => return super::text::write_bytes(out, bytes),
        Value::Tuple(elems) | Value::Array(elems) => {
            out.push(b'[');
            for (i, elem) in elems.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, elem, div);
            }
            out.push(b']');
            return;
        }
        Value::Record(fields) => {
            out.push(b'{');
            for (i, (name, field)) in fields.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                quoted(out, name.as_bytes());
                out.extend_from_slice(b": ");
                write_value(out, field, 1);
            }
            out.push(b'}');
            return;
        }
        Value::Pointer(address) => address.to_string(),
        Value::Stack(stack) => {
            let mut text = Vec::new();
            stack.render(&mut text, Stack::VALUE_INDENT);
            return quoted(out, &text);
        }
        Value::Tseries { points, .. } => return out.extend(super::tseries::json(points)),
        Value::FineHist { bits, counts } => {
            return write_buckets(out, counts, div, |i| super::finehist::range(i, *bits));
        }
        Value::Hist(counts) => {
            return write_buckets(out, &counts[..counts.len().min(HIST_BUCKETS)], div, hist_bucket_range);
        }
        Value::Lhist { min, max, step, counts } => {
            let slots = super::value::lhist_slots(*min, *max, *step);
            let counts = &counts[..counts.len().min(slots)];
            return write_buckets(out, counts, 1, |i| lhist_bucket_range(i, *min, *max, *step));
        }
    };
    out.extend_from_slice(text.as_bytes());
}

fn write_buckets(
    out: &mut Vec<u8>,
    counts: &[u64],
    div: u64,
    range: impl Fn(usize) -> (Option<i64>, Option<i64>),
) {
    out.push(b'[');
    if let Some(first) = counts.iter().position(|&c| c > 0) {
        let last = counts.iter().rposition(|&c| c > 0).unwrap_or(first);
        for (i, &count) in counts.iter().enumerate().take(last + 1).skip(first) {
            if i > first {
                // 0.27.1 writes no space between buckets, though it does inside them.
                out.push(b',');
            }
            out.push(b'{');
            let (min, max) = range(i);
            if let Some(min) = min {
                out.extend_from_slice(format!("\"min\": {min}, ").as_bytes());
            }
            if let Some(max) = max {
                out.extend_from_slice(format!("\"max\": {max}, ").as_bytes());
            }
            out.extend_from_slice(format!("\"count\": {}}}", count / div).as_bytes());
        }
    }
    out.push(b']');
}

#[cfg(test)]
mod tests {
    use super::super::test_values::{hist, lhist, text};
    use super::super::value::Key;
    use super::*;

    #[test]
    fn scalar_and_keyed_maps_at_exit() {
        // bpftrace -f json -e 'BEGIN { @a = count(); @b = count(); @c[1] = sum(5); @d = 7; exit(); }'
        let expected =
            "{\"type\": \"map\", \"data\": {\"@a\": 1}}\n{\"type\": \"map\", \"data\": {\"@b\": 1}}\n\
{\"type\": \"map\", \"data\": {\"@c\": {\"1\": 5}}}\n{\"type\": \"map\", \"data\": {\"@d\": 7}}\n";
        let maps = [
            MapSnapshot::new("@d", vec![(Key::scalar(), Value::int(7))]),
            MapSnapshot::new("@c", vec![(Key::int(1), Value::Sum { value: 5, signed: true })]),
            MapSnapshot::new("@b", vec![(Key::scalar(), Value::Count(1))]),
            MapSnapshot::new("@a", vec![(Key::scalar(), Value::Count(1))]),
        ];
        assert_eq!(text(print_maps_at_exit(&maps)), expected);
    }

    #[test]
    fn pointer_byte_and_array_keys_read_and_sort_as_their_text() {
        // steadytrace -e 'BEGIN { @p[(uint8*)16] = "a"; @p[(uint8*)8] = "b"; @b[pton("10.0.0.1")] = "q";
        //   @b[pton("9.0.0.1")] = "r"; @a[(int8[2])2561] = "x"; @a[(int8[2])9] = "y"; exit(); }'
        let one = |part: KeyPart, value: &[u8]| (Key(vec![part]), Value::str(value));
        let maps = [
            MapSnapshot::new("@p", vec![one(KeyPart::Pointer(8), b"b"), one(KeyPart::Pointer(16), b"a")]),
            MapSnapshot::new(
                "@b",
                vec![
                    one(KeyPart::Bytes(vec![9, 0, 0, 1]), b"r"),
                    one(KeyPart::Bytes(vec![10, 0, 0, 1]), b"q"),
                ],
            ),
            MapSnapshot::new(
                "@a",
                vec![
                    one(KeyPart::Array(vec![Value::int(9), Value::int(0)]), b"y"),
                    one(KeyPart::Array(vec![Value::int(1), Value::int(10)]), b"x"),
                ],
            ),
        ];
        assert_eq!(
            text(print_maps_at_exit(&maps)),
            "{\"type\": \"map\", \"data\": {\"@a\": {\"[1,10]\": \"x\", \"[9,0]\": \"y\"}}}\n\
{\"type\": \"map\", \"data\": {\"@b\": {\"[10,0,0,1]\": \"q\", \"[9,0,0,1]\": \"r\"}}}\n\
{\"type\": \"map\", \"data\": {\"@p\": {\"0x10\": \"a\", \"0x8\": \"b\"}}}\n"
        );
        assert_eq!(
            text(super::super::text::print_maps_at_exit(&maps)),
            "\n\n@a[[1,10]]: x\n@a[[9,0]]: y\n@b[[10,0,0,1]]: q\n@b[[9,0,0,1]]: r\n@p[0x10]: a\n@p[0x8]: b\n"
        );
    }

    #[test]
    fn keys_strings_and_escaping() {
        // bpftrace -f json -e 'BEGIN { @s["b"] = "x"; @s["a"] = "y"; @s["a\"b\\c"] = "q\n"; exit(); }'
        let expected = r#"{"type": "map", "data": {"@s": {"a": "y", "a\"b\\c": "q\n", "b": "x"}}}
"#;
        let m = MapSnapshot::new(
            "@s",
            vec![
                (Key::str(b"b"), Value::str(b"x")),
                (Key::str(b"a\"b\\c"), Value::str(b"q\n")),
                (Key::str(b"a"), Value::str(b"y")),
            ],
        );
        assert_eq!(text(print_map(&m, None, None)), expected);
        // bpftrace -f json -e 'BEGIN { @t[1, "abc"] = count(); @t[2, "x y"] = count(); @t[2, "x y"] = count();
        //   exit(); }'
        let expected = r#"{"type": "map", "data": {"@t": {"1,abc": 1, "2,x y": 2}}}
"#;
        let key = |n: i64, s: &[u8]| {
            Key(vec![KeyPart::Int { value: n as u64, signed: true }, KeyPart::Str(s.to_vec())])
        };
        let m = MapSnapshot::new(
            "@t",
            vec![(key(2, b"x y"), Value::Count(2)), (key(1, b"abc"), Value::Count(1))],
        );
        assert_eq!(text(print_map(&m, None, None)), expected);
        // bpftrace 0.27.1 -f json -e 'begin { @n[1, (a=2, b="y")] = 3; exit(); }': a record in a key is compact.
        let expected = r#"{"type": "map", "data": {"@n": {"1,{.a=2,.b=y}": 3}}}
"#;
        let record = KeyPart::Record {
            names: vec!["a".to_string(), "b".to_string()].into(),
            parts: vec![KeyPart::Int { value: 2, signed: true }, KeyPart::Str(b"y".to_vec())],
        };
        let m = MapSnapshot::new(
            "@n",
            vec![(Key(vec![KeyPart::Int { value: 1, signed: true }, record]), Value::Count(3))],
        );
        assert_eq!(text(print_map(&m, None, None)), expected);
        // bpftrace -f json -e 'BEGIN { @a[(uint64)18446744073709551615] = 1; @u = (uint64)18446744073709551615;
        //   exit(); }', except that the key is unsigned as current bpftrace prints it (0.17: "-1")
        let expected = "{\"type\": \"map\", \"data\": {\"@a\": {\"18446744073709551615\": 1}}}\n\
{\"type\": \"map\", \"data\": {\"@u\": 18446744073709551615}}\n";
        let maps = [
            MapSnapshot::new(
                "@a",
                vec![(Key(vec![KeyPart::Int { value: u64::MAX, signed: false }]), Value::int(1))],
            ),
            MapSnapshot::new("@u", vec![(Key::scalar(), Value::uint(u64::MAX))]),
        ];
        assert_eq!(text(print_maps_at_exit(&maps)), expected);
    }

    #[test]
    fn printf_messages() {
        // bpftrace -f json -e 'BEGIN { printf("a \"b\" \\ %d\n", 5); printf("no newline");
        //   printf("\ttab\x01\n"); exit(); }'
        let expected = r#"{"type": "printf", "data": "a \"b\" \\ 5\n"}
{"type": "printf", "data": "no newline"}
{"type": "printf", "data": "\ttab\u0001\n"}
"#;
        let out = [
            message(MessageKind::Printf, b"a \"b\" \\ 5\n"),
            message(MessageKind::Printf, b"no newline"),
            message(MessageKind::Printf, b"\ttab\x01\n"),
        ];
        assert_eq!(text(out.concat()), expected);
        // bpftrace -f json --unsafe -e 'BEGIN { time("%Y!\n"); cat("/tmp/bt/f.txt"); system("echo hi"); exit(); }'
        // (f.txt holding `file"line\n`; the year is whatever it is)
        let expected = r#"{"type": "time", "data": "2026!\n"}
{"type": "cat", "data": "file\"line\n"}
{"type": "syscall", "data": "hi\n"}
"#;
        let out = [
            message(MessageKind::Time, b"2026!\n"),
            message(MessageKind::Cat, b"file\"line\n"),
            message(MessageKind::Syscall, b"hi\n"),
        ];
        assert_eq!(text(out.concat()), expected);
        // bpftrace -f json -e 'tracepoint:syscalls:sys_enter_execve { join(args->argv, ","); exit(); }'
        //   -c '/bin/echo a "b c"'
        assert_eq!(
            text(message(MessageKind::Join, b"/bin/echo,a,\"b,c\"")),
            "{\"type\": \"join\", \"data\": \"/bin/echo,a,\\\"b,c\\\"\"}\n"
        );
        // Control bytes as \u00XX (lowercase), DEL raw, UTF-8 passed through (0.17: "\uffffffc3\uffffffa9").
        let mut out = Vec::new();
        escape(&mut out, "\x08\x0c\x1b\x7f/é".as_bytes());
        assert_eq!(text(out), "\\u0008\\u000c\\u001b\x7f/é");
    }

    #[test]
    fn probes_and_lost_events() {
        // bpftrace -f json -e 'BEGIN { exit(); }'
        assert_eq!(
            text(attached_probes(1)),
            "{\"type\": \"attached_probes\", \"count\": 1, \"data\": {\"probes\": 1}}\n"
        );
        // From JsonOutput::lost_events in current bpftrace's source.
        assert_eq!(
            text(lost_events(3)),
            "{\"type\": \"lost_events\", \"count\": 3, \"data\": {\"events\": 3}}\n"
        );
    }

    #[test]
    fn values() {
        // bpftrace -f json -e 'BEGIN { print(5); print(-5); print("hi \"x\"\n"); print((1, "a", -2));
        //   print((1, (2, "b"))); $x = (uint64)18446744073709551615; print($x); exit(); }'
        let expected = r#"{"type": "value", "data": 5}
{"type": "value", "data": -5}
{"type": "value", "data": "hi \"x\"\n"}
{"type": "value", "data": [1,"a",-2]}
{"type": "value", "data": [1,[2,"b"]]}
{"type": "value", "data": 18446744073709551615}
"#;
        let values = [
            Value::int(5),
            Value::int(-5),
            Value::str(b"hi \"x\"\n"),
            Value::Tuple(vec![Value::int(1), Value::str(b"a"), Value::int(-2)]),
            Value::Tuple(vec![Value::int(1), Value::Tuple(vec![Value::int(2), Value::str(b"b")])]),
            Value::uint(u64::MAX),
        ];
        let out: Vec<u8> = values.iter().flat_map(print_value).collect();
        assert_eq!(text(out), expected);
        // bpftrace -f json -e 'BEGIN { @t = (1, "abc"); @u[1] = (2, "x"); exit(); }'
        let expected = "{\"type\": \"map\", \"data\": {\"@t\": [1,\"abc\"]}}\n\
{\"type\": \"map\", \"data\": {\"@u\": {\"1\": [2,\"x\"]}}}\n";
        let maps = [
            MapSnapshot::new(
                "@t",
                vec![(Key::scalar(), Value::Tuple(vec![Value::int(1), Value::str(b"abc")]))],
            ),
            MapSnapshot::new("@u", vec![(Key::int(1), Value::Tuple(vec![Value::int(2), Value::str(b"x")]))]),
        ];
        assert_eq!(text(print_maps_at_exit(&maps)), expected);
    }

    #[test]
    fn hist_buckets() {
        // bpftrace -f json -e 'BEGIN { @h = hist(-1); @h = hist(0); @h = hist(1); @h = hist(1); @h = hist(2);
        //   @h = hist(3); @h = hist(4); @h = hist(1024); @h = hist(1048576); exit(); }'
        let expected = r#"{"type": "hist", "data": {"@h": [{"max": -1, "count": 1},{"min": 0, "max": 0, "count": 1},{"min": 1, "max": 1, "count": 2},{"min": 2, "max": 3, "count": 2},{"min": 4, "max": 7, "count": 1},{"min": 8, "max": 15, "count": 0},{"min": 16, "max": 31, "count": 0},{"min": 32, "max": 63, "count": 0},{"min": 64, "max": 127, "count": 0},{"min": 128, "max": 255, "count": 0},{"min": 256, "max": 511, "count": 0},{"min": 512, "max": 1023, "count": 0},{"min": 1024, "max": 2047, "count": 1},{"min": 2048, "max": 4095, "count": 0},{"min": 4096, "max": 8191, "count": 0},{"min": 8192, "max": 16383, "count": 0},{"min": 16384, "max": 32767, "count": 0},{"min": 32768, "max": 65535, "count": 0},{"min": 65536, "max": 131071, "count": 0},{"min": 131072, "max": 262143, "count": 0},{"min": 262144, "max": 524287, "count": 0},{"min": 524288, "max": 1048575, "count": 0},{"min": 1048576, "max": 2097151, "count": 1}]}}
"#;
        let m = MapSnapshot::new("@h", vec![(Key::scalar(), hist(&[-1, 0, 1, 1, 2, 3, 4, 1024, 1048576]))]);
        assert_eq!(text(print_map(&m, None, None)), expected);
        // bpftrace -f json -e 'BEGIN { @h = hist(1073741824); exit(); }'
        let expected = r#"{"type": "hist", "data": {"@h": [{"min": 1073741824, "max": 2147483647, "count": 1}]}}
"#;
        let m = MapSnapshot::new("@h", vec![(Key::scalar(), hist(&[1073741824]))]);
        assert_eq!(text(print_map(&m, None, None)), expected);
        // 0.17 prints [2G, 4G) as {"min": -2147483648, "max": 0} (int shift overflow) and lumps larger
        // values in with it; we print the true bounds (as v0.20's tests/runtime/outputs/hist_10g.json).
        let m = MapSnapshot::new("@h", vec![(Key::scalar(), hist(&[10 << 30]))]);
        assert_eq!(
            text(print_map(&m, None, None)),
            "{\"type\": \"hist\", \"data\": {\"@h\": [{\"min\": 8589934592, \"max\": 17179869183, \"count\": 1}]}}\n"
        );
    }

    #[test]
    fn keyed_hist_and_lhist_with_top_and_div() {
        // bpftrace -f json -e 'BEGIN { @h[1] = hist(5); @h[1] = hist(5); @h[1] = hist(5); @h[1] = hist(100);
        //   @h[2] = hist(1); @h[3] = hist(1); @h[3] = hist(2); print(@h, 2, 2); @l[1] = lhist(5, 0, 10, 1);
        //   @l[1] = lhist(5, 0, 10, 1); @l[1] = lhist(5, 0, 10, 1); @l[2] = lhist(1, 0, 10, 1); print(@l, 1, 2);
        //   clear(@h); clear(@l); exit(); }'
        let expected = r#"{"type": "hist", "data": {"@h": {"3": [{"min": 1, "max": 1, "count": 0},{"min": 2, "max": 3, "count": 0}], "1": [{"min": 4, "max": 7, "count": 1},{"min": 8, "max": 15, "count": 0},{"min": 16, "max": 31, "count": 0},{"min": 32, "max": 63, "count": 0},{"min": 64, "max": 127, "count": 0}]}}}
{"type": "hist", "data": {"@l": {"1": [{"min": 5, "max": 5, "count": 3}]}}}
"#;
        let h = MapSnapshot::new(
            "@h",
            vec![
                (Key::int(3), hist(&[1, 2])),
                (Key::int(1), hist(&[5, 5, 5, 100])),
                (Key::int(2), hist(&[1])),
            ],
        );
        let l = MapSnapshot::new(
            "@l",
            vec![(Key::int(1), lhist(&[5, 5, 5], 0, 10, 1)), (Key::int(2), lhist(&[1], 0, 10, 1))],
        );
        assert_eq!(
            text([print_map(&h, Some(2), Some(2)), print_map(&l, Some(1), Some(2))].concat()),
            expected
        );
    }

    #[test]
    fn lhist_under_and_overflow() {
        // bpftrace -f json -e 'BEGIN { @l = lhist(-5, 0, 100, 10); @l = lhist(0, 0, 100, 10);
        //   @l = lhist(9, 0, 100, 10); @l = lhist(10, 0, 100, 10); @l = lhist(55, 0, 100, 10);
        //   @l = lhist(55, 0, 100, 10); @l = lhist(100, 0, 100, 10); @l = lhist(1000, 0, 100, 10); exit(); }'
        let expected = r#"{"type": "hist", "data": {"@l": [{"max": -1, "count": 1},{"min": 0, "max": 9, "count": 2},{"min": 10, "max": 19, "count": 1},{"min": 20, "max": 29, "count": 0},{"min": 30, "max": 39, "count": 0},{"min": 40, "max": 49, "count": 0},{"min": 50, "max": 59, "count": 2},{"min": 60, "max": 69, "count": 0},{"min": 70, "max": 79, "count": 0},{"min": 80, "max": 89, "count": 0},{"min": 90, "max": 99, "count": 0},{"min": 100, "count": 2}]}}
"#;
        let m = MapSnapshot::new(
            "@l",
            vec![(Key::scalar(), lhist(&[-5, 0, 9, 10, 55, 55, 100, 1000], 0, 100, 10))],
        );
        assert_eq!(text(print_map(&m, None, None)), expected);
        // bpftrace -f json -e 'BEGIN { @l = lhist(3000, 1024, 10240, 1024); @l = lhist(10240, 1024, 10240, 1024);
        //   @l = lhist(5, 1024, 10240, 1024); exit(); }'
        let expected = r#"{"type": "hist", "data": {"@l": [{"max": 1023, "count": 1},{"min": 1024, "max": 2047, "count": 0},{"min": 2048, "max": 3071, "count": 1},{"min": 3072, "max": 4095, "count": 0},{"min": 4096, "max": 5119, "count": 0},{"min": 5120, "max": 6143, "count": 0},{"min": 6144, "max": 7167, "count": 0},{"min": 7168, "max": 8191, "count": 0},{"min": 8192, "max": 9215, "count": 0},{"min": 9216, "max": 10239, "count": 0},{"min": 10240, "count": 1}]}}
"#;
        let m = MapSnapshot::new("@l", vec![(Key::scalar(), lhist(&[3000, 10240, 5], 1024, 10240, 1024))]);
        assert_eq!(text(print_map(&m, None, None)), expected);
        // bpftrace -f json -e 'BEGIN { @l = lhist(104, 0, 105, 10); @l = lhist(99, 0, 105, 10);
        //   @l = lhist(106, 0, 105, 10); exit(); }'   (0.27.1; 0.17 wrote `"min": 105`)
        let expected = r#"{"type": "hist", "data": {"@l": [{"min": 90, "max": 99, "count": 1},{"min": 100, "count": 2}]}}
"#;
        let m = MapSnapshot::new("@l", vec![(Key::scalar(), lhist(&[104, 99, 106], 0, 105, 10))]);
        assert_eq!(text(print_map(&m, None, None)), expected);
        // bpftrace 0.27.1 -f json -e 'BEGIN { @b = lhist(5, 1024, 1026, 1); @b = lhist(1024, 1024, 1026, 1);
        //   @b = lhist(1030, 1024, 1026, 1); @d = lhist(5000, 0, 4096, 1024); @m = lhist(1, 0, 10, 3);
        //   @m = lhist(9, 0, 10, 3); exit(); }'
        let expected = r#"{"type": "hist", "data": {"@b": [{"max": 1023, "count": 1},{"min": 1024, "max": 1024, "count": 1},{"min": 1025, "max": 1025, "count": 0},{"min": 1026, "count": 1}]}}
{"type": "hist", "data": {"@d": [{"min": 4096, "count": 1}]}}
{"type": "hist", "data": {"@m": [{"min": 0, "max": 2, "count": 1},{"min": 3, "max": 5, "count": 0},{"min": 6, "max": 8, "count": 0},{"min": 9, "count": 1}]}}
"#;
        let maps = [
            MapSnapshot::new("@b", vec![(Key::scalar(), lhist(&[5, 1024, 1030], 1024, 1026, 1))]),
            MapSnapshot::new("@d", vec![(Key::scalar(), lhist(&[5000], 0, 4096, 1024))]),
            MapSnapshot::new("@m", vec![(Key::scalar(), lhist(&[1, 9], 0, 10, 3))]),
        ];
        assert_eq!(text(print_maps_at_exit(&maps)), expected);
    }

    #[test]
    fn stats_avg_and_ties() {
        // bpftrace -f json -e 'BEGIN { @s[1] = stats(-3); @s[2] = stats(10); @s[2] = stats(-3); @a[1] = avg(-7);
        //   @a[1] = avg(2); @a[2] = avg(100); exit(); }'
        let expected = r#"{"type": "stats", "data": {"@a": {"1": -2, "2": 100}}}
{"type": "stats", "data": {"@s": {"1": {"count": 1, "average": -3, "total": -3}, "2": {"count": 2, "average": 3, "total": 7}}}}
"#;
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
        // bpftrace 0.27.1 -f json -e 'BEGIN { @s[1] = stats(10); @s[2] = stats(20); @s[3] = stats(30);
        //   @s[3] = stats(31); print(@s, 1, 3); print(@s, 2, 0); @t = stats(100); print(@t, 0, 7); clear(@s);
        //   clear(@t); exit(); }'   (top and div apply to stats maps, div to the average alone)
        let expected = r#"{"type": "stats", "data": {"@s": {"3": {"count": 2, "average": 10, "total": 61}}}}
{"type": "stats", "data": {"@s": {"2": {"count": 1, "average": 20, "total": 20}, "3": {"count": 2, "average": 30, "total": 61}}}}
{"type": "stats", "data": {"@t": {"count": 1, "average": 14, "total": 100}}}
"#;
        let s = MapSnapshot::new(
            "@s",
            [(1, 1, 10), (2, 1, 20), (3, 2, 61)]
                .iter()
                .map(|&(k, count, total)| (Key::int(k), Value::Stats { count, total }))
                .collect(),
        );
        let t = MapSnapshot::new("@t", vec![(Key::scalar(), Value::Stats { count: 1, total: 100 })]);
        let out = [
            print_map(&s, Some(1), Some(3)),
            print_map(&s, Some(2), Some(0)),
            print_map(&t, Some(0), Some(7)),
        ];
        assert_eq!(text(out.concat()), expected);
        // bpftrace -f json -e 'BEGIN { @s = stats(3); @s = stats(4); @a = avg(3); @a = avg(4); @n = min(5);
        //   @n = min(-7); exit(); }'
        let expected = r#"{"type": "stats", "data": {"@a": 3}}
{"type": "map", "data": {"@n": -7}}
{"type": "stats", "data": {"@s": {"count": 2, "average": 3, "total": 7}}}
"#;
        let maps = [
            MapSnapshot::new("@s", vec![(Key::scalar(), Value::Stats { count: 2, total: 7 })]),
            MapSnapshot::new("@a", vec![(Key::scalar(), Value::Avg { count: 2, total: 7 })]),
            MapSnapshot::new("@n", vec![(Key::scalar(), Value::Min(-7))]),
        ];
        assert_eq!(text(print_maps_at_exit(&maps)), expected);
        // bpftrace -f json -e 'BEGIN { @h[1] = hist(1); @h[256] = hist(1); @h[-1] = hist(1); @h[2] = hist(1);
        //   @h[2] = hist(1); @s[1] = stats(1); @s[256] = stats(1); @s[-1] = stats(1); exit(); }'
        let expected = r#"{"type": "hist", "data": {"@h": {"256": [{"min": 1, "max": 1, "count": 1}], "1": [{"min": 1, "max": 1, "count": 1}], "-1": [{"min": 1, "max": 1, "count": 1}], "2": [{"min": 1, "max": 1, "count": 2}]}}}
{"type": "stats", "data": {"@s": {"256": {"count": 1, "average": 1, "total": 1}, "1": {"count": 1, "average": 1, "total": 1}, "-1": {"count": 1, "average": 1, "total": 1}}}}
"#;
        let maps = [
            MapSnapshot::new(
                "@h",
                vec![
                    (Key::int(2), hist(&[1, 1])),
                    (Key::int(-1), hist(&[1])),
                    (Key::int(1), hist(&[1])),
                    (Key::int(256), hist(&[1])),
                ],
            ),
            MapSnapshot::new(
                "@s",
                [1, -1, 256].iter().map(|&k| (Key::int(k), Value::Stats { count: 1, total: 1 })).collect(),
            ),
        ];
        assert_eq!(text(print_maps_at_exit(&maps)), expected);
    }

    #[test]
    fn empty_and_zeroed_maps() {
        // bpftrace -f json -e 'BEGIN { @a[1] = 1; delete(@a[1]); @b = count(); clear(@b); @c = hist(1); clear(@c);
        //   @d = stats(1); clear(@d); @e[1] = lhist(1, 0, 10, 1); delete(@e[1]); exit(); }'
        let expected = "{\"type\": \"map\", \"data\": {\"@b\": 0}}\n";
        let empty = |name: &str, kind| MapSnapshot { name: name.into(), kind, entries: vec![] };
        let maps = [
            empty("@a", MapKind::Int),
            MapSnapshot::new("@b", vec![(Key::scalar(), Value::Count(0))]),
            empty("@c", MapKind::Hist),
            empty("@d", MapKind::Stats),
            empty("@e", MapKind::Lhist),
        ];
        assert_eq!(text(print_maps_at_exit(&maps)), expected);
        // bpftrace -f json -e 'BEGIN { @h[1] = hist(5); @l = lhist(5, 0, 10, 1); @s[2] = stats(5); @a = avg(3);
        //   @c[3] = count(); zero(@h); zero(@l); zero(@s); zero(@a); zero(@c); exit(); }'
        let expected = r#"{"type": "stats", "data": {"@a": 0}}
{"type": "map", "data": {"@c": {"3": 0}}}
{"type": "hist", "data": {"@h": {"1": []}}}
{"type": "hist", "data": {"@l": []}}
{"type": "stats", "data": {"@s": {"2": {"count": 0, "average": 0, "total": 0}}}}
"#;
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
    fn stacks() {
        use crate::symbols::StackMode;
        let bt =
            |frames: &[&str]| Stack::new(StackMode::Bpftrace, frames.iter().map(|f| f.to_string()).collect());
        // bpftrace -f json -e 'profile:hz:99 /cpu == 0/ { @a[kstack(2)] = count(); @b[kstack(2), 5] = count();
        //   printf("%s|\n", kstack(2)); print(kstack(2)); exit(); }'
        // (four of the nine entries of each map kept; the others differ only in their frames; without the empty
        // line pair 0.17 printed before the maps at exit, as current bpftrace)
        let expected = r#"{"type": "printf", "data": "\n        pv_native_safe_halt+11\n        default_idle+5\n|\n"}
{"type": "value", "data": "\n        pv_native_safe_halt+11\n        default_idle+5\n"}
{"type": "map", "data": {"@a": {"\n    kallsyms_expand_symbol.constprop.0+119\n    update_iter+119\n": 1, "\n    update_iter+61\n    s_next+28\n": 1, "\n    pv_native_safe_halt+11\n    default_idle+5\n": 1, "": 2}}}
{"type": "map", "data": {"@b": {"\n    update_iter+61\n    s_next+28\n,5": 1, "\n    kallsyms_expand_symbol.constprop.0+119\n    update_iter+119\n,5": 1, "\n    pv_native_safe_halt+11\n    default_idle+5\n,5": 1, ",5": 2}}}
"#;
        let idle = bt(&["pv_native_safe_halt+11", "default_idle+5"]);
        let kallsyms = bt(&["kallsyms_expand_symbol.constprop.0+119", "update_iter+119"]);
        let iter = bt(&["update_iter+61", "s_next+28"]);
        let mut printf = idle.value_text();
        printf.extend_from_slice(b"|\n");
        let mut out = message(MessageKind::Printf, &printf);
        out.extend(print_value(&Value::Stack(idle.clone())));
        let five = |s: &Stack| Key(vec![KeyPart::Stack(s.clone()), KeyPart::Int { value: 5, signed: true }]);
        let maps = [
            MapSnapshot::new(
                "@a",
                vec![
                    (Key::stack(kallsyms.clone()), Value::Count(1)),
                    (Key::stack(iter.clone()), Value::Count(1)),
                    (Key::stack(idle.clone()), Value::Count(1)),
                    (Key::stack(bt(&[])), Value::Count(2)),
                ],
            ),
            MapSnapshot::new(
                "@b",
                vec![
                    (five(&iter), Value::Count(1)),
                    (five(&kallsyms), Value::Count(1)),
                    (five(&idle), Value::Count(1)),
                    (five(&bt(&[])), Value::Count(2)),
                ],
            ),
        ];
        out.extend(print_maps_at_exit(&maps));
        assert_eq!(text(out), expected);

        // bpftrace -f json -e 'profile:hz:99 /cpu == 0/ { @v[1] = kstack; @w = kstack(perf); exit(); }'
        // (stacks cut to two frames here)
        let expected = r#"{"type": "map", "data": {"@v": {"1": "\n        pv_native_safe_halt+11\n        default_idle+5\n"}}}
{"type": "map", "data": {"@w": "\n\tffffffff8225fe6b pv_native_safe_halt+11\n\tffffffff82261975 default_idle+5\n"}}
"#;
        let perf = Stack::new(
            StackMode::Perf,
            vec!["ffffffff8225fe6b pv_native_safe_halt+11".into(), "ffffffff82261975 default_idle+5".into()],
        );
        let maps = [
            MapSnapshot::new("@w", vec![(Key::scalar(), Value::Stack(perf))]),
            MapSnapshot::new("@v", vec![(Key::int(1), Value::Stack(idle))]),
        ];
        assert_eq!(text(print_maps_at_exit(&maps)), expected);
    }
}
