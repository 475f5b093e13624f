//! Map contents and values as userspace reads them back: a pure data model shared by the text and JSON
//! formatters, plus the kernel-side bucketing rules of `hist()` and `lhist()` that codegen mirrors.
//!
//! Ground truth is bpftrace 0.17 (`src/output.cpp`, `src/bpftrace.cpp` and `createLog2Function` /
//! `createLinearFunction` in `src/ast/passes/codegen_llvm.cpp` at tag v0.17.0) and its observed output.
//!
//! Integers are kept as 64-bit patterns plus a signedness flag, exactly as the BPF side stores them (every
//! map key and value slot is 8 bytes in 0.17; narrower integers are sign- or zero-extended on the way in).

use crate::symbols::StackMode;
use std::cmp::Ordering;

/// Number of count slots of a `hist()`: index 0 is negatives, 1 is zero, 2 + k is `[2^k, 2^(k+1))` for
/// k in 0..=62 (see [`hist_bucket_index`]).
pub const HIST_BUCKETS: usize = 65;

/// The bucket a `hist()` value falls in, as the BPF program computes it.
///
/// | index       | values                    | text label      | JSON                 |
/// |-------------|---------------------------|-----------------|----------------------|
/// | 0           | `v < 0`                   | `(..., 0)`      | `"max": -1`          |
/// | 1           | `v == 0`                  | `[0]`           | `"min": 0, "max": 0` |
/// | 2           | `v == 1`                  | `[1]`           | `"min": 1, "max": 1` |
/// | 2 + k (k≥1) | `2^k <= v < 2^(k+1)`      | `[2^k, 2^(k+1))`| min `2^k`, max `2^(k+1)-1` |
///
/// So for `v > 0` the index is `2 + floor(log2(v))`, at most 64 (for `v >= 2^62`).
///
/// The BPF algorithm (branch-free binary search, all on the 64-bit value):
/// ```text
/// if v < 0 (signed)  return 0
/// if v == 0          return 1
/// r = 2
/// for i in [5, 4, 3, 2, 1, 0]:          // shifts 32, 16, 8, 4, 2, 1
///     s = (v >= 1 << (1 << i)) << i      // (v >= 2^32) << 5, (v >= 2^16) << 4, ...
///     v >>= s; r += s
/// return r
/// ```
///
/// Deliberate difference from 0.17: bpftrace 0.17 runs only the steps i = 4..=0 (no 32-bit step), so
/// every value `>= 2^32` lands in index 33, printed `[2G, 4G)` (and its JSON min/max come out as
/// `-2147483648`/`0` from an `int` shift overflow). That is bpftrace bug #856, fixed in v0.20
/// (commit 006e68d0f "hist: Support values greater than 4G") by adding the i = 5 step as above; we follow
/// the fix. For every value below 2^32 the two agree. To get 0.17's behaviour back, drop the i = 5 step.
pub fn hist_bucket_index(value: i64) -> usize {
    if value < 0 {
        return 0;
    }
    if value == 0 {
        return 1;
    }
    let mut n = value as u64;
    let mut result = 2u64;
    for i in (0..=5).rev() {
        let shift = ((n >= 1u64 << (1u32 << i)) as u64) << i;
        n >>= shift;
        result += shift;
    }
    result as usize
}

/// Inclusive value range of `hist()` bucket `index` (< [`HIST_BUCKETS`]; `None` for an open end), as JSON
/// prints it.
pub fn hist_bucket_range(index: usize) -> (Option<i64>, Option<i64>) {
    match index {
        0 => (None, Some(-1)),
        1 => (Some(0), Some(0)),
        2 => (Some(1), Some(1)),
        _ => {
            let power = (index - 2) as u32;
            let low = 1u64 << power;
            let high = (1u64 << (power + 1)).wrapping_sub(1);
            (Some(low as i64), Some(high as i64))
        }
    }
}

/// Number of in-range buckets of `lhist(_, min, max, step)`, not counting the under- and overflow ones:
/// `(max - min) / step` (integer division, as 0.17's `lhist_prepare`).
/// (A `step` of 0, which semantic analysis rejects, is treated as 1 rather than panicking.)
pub fn lhist_range_buckets(min: i64, max: i64, step: i64) -> usize {
    ((max as u64).wrapping_sub(min as u64) / step.max(1) as u64) as usize
}

/// Number of count slots an `lhist(_, min, max, step)` needs: `lhist_range_buckets + 2`.
pub fn lhist_slots(min: i64, max: i64, step: i64) -> usize {
    lhist_range_buckets(min, max, step) + 2
}

/// The bucket an `lhist()` value falls in, exactly as bpftrace 0.17's BPF code computes it:
/// ```text
/// if v < min (signed)   return 0                          // underflow: "(..., min)"
/// if v > max (signed)   return 1 + (max - min) / step     // overflow"
/// return 1 + (v - min) / step                             // divisions unsigned
/// ```
/// With `B = (max - min) / step`, index `i` in 1..=B covers `[min + (i-1)*step, min + i*step)`, and index
/// `B + 1` is the overflow bucket, from `min + B*step` on. Two quirks follow and are kept (0.27.1 too):
/// `v == max` lands in the overflow bucket when `step` divides `max - min` (it computes to `B + 1`), and
/// when it does not, values in `[min + B*step, max]` also land in the overflow bucket (`lhist(104, 0, 105,
/// 10)` prints under `[100, ...)`, as 0.27.1 labels it; 0.17 wrote `[105, ...)`). Semantic analysis guarantees `0 <= min < max`, `step >= 1`, `B <= 1000`.
pub fn lhist_bucket_index(value: i64, min: i64, max: i64, step: i64) -> usize {
    if value < min {
        return 0;
    }
    if value > max {
        return 1 + lhist_range_buckets(min, max, step);
    }
    1 + ((value as u64).wrapping_sub(min as u64) / step.max(1) as u64) as usize
}

/// Inclusive value range of `lhist()` bucket `index` (`None` for an open end), as JSON prints it; the
/// overflow bucket starts where the last full bucket ends (`"min": 100` for `lhist(x, 0, 105, 10)`, as
/// 0.27.1; 0.17 wrote `max`).
pub fn lhist_bucket_range(index: usize, min: i64, max: i64, step: i64) -> (Option<i64>, Option<i64>) {
    let buckets = lhist_range_buckets(min, max, step);
    if index == 0 {
        (None, Some(min - 1))
    } else if index == buckets + 1 {
        (Some(min + buckets as i64 * step), None)
    } else {
        let i = index as i64;
        (Some((i - 1) * step + min), Some(i * step + min - 1))
    }
}

/// One element of a map key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyPart {
    /// An integer, as its 64-bit pattern (narrower types sign- or zero-extended), printed signed or
    /// unsigned by its type as current bpftrace prints it (0.17 printed every key integer signed:
    /// `@a[(uint64)-1]` was `@a[-1]`).
    Int { value: u64, signed: bool },
    /// A `bool`: `true` or `false`.
    Bool(bool),
    /// A string's bytes; anything from the first NUL on is ignored.
    Str(Vec<u8>),
    /// A `kstack`/`ustack` key, already symbolized. bpftrace 0.17 does not sort by stack parts (its
    /// `sort_by_key` skips them, and the key bytes it compares for hist/stats ties are stack ids, which
    /// carry no meaning): they compare equal, keeping the incoming order.
    Stack(Stack),
    /// A tuple inside a key of several parts (`@[a, (b, c)]`), printed `(b, c)`.
    Tuple(Vec<KeyPart>),
    /// A record (a named tuple, a struct's value), printed `{ .a = 1, .b = x }`: `names[i]` names `parts[i]`.
    Record { names: std::sync::Arc<[String]>, parts: Vec<KeyPart> },
    /// An address, printed `0x1f00`.
    Pointer(u64),
    /// A byte array (`pton()`), printed `[127,0,0,1]`.
    Bytes(Vec<u8>),
    /// An array's elements, printed as text prints the array: `[1,2,3]`.
    Array(Vec<Value>),
}

impl KeyPart {
    /// The bytes up to the first NUL of a string part.
    pub(crate) fn str_bytes(bytes: &[u8]) -> &[u8] {
        &bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())]
    }

    /// How bpftrace's `sort_by_key` orders: integers as unsigned 64-bit, strings by `strncmp`.
    fn cmp_value(&self, other: &KeyPart) -> Ordering {
        match (self, other) {
            (KeyPart::Int { value: a, .. }, KeyPart::Int { value: b, .. }) => a.cmp(b),
            (KeyPart::Bool(a), KeyPart::Bool(b)) => a.cmp(b),
            (KeyPart::Str(a), KeyPart::Str(b)) => Self::str_bytes(a).cmp(Self::str_bytes(b)),
            (KeyPart::Tuple(a), KeyPart::Tuple(b))
            | (KeyPart::Record { parts: a, .. }, KeyPart::Record { parts: b, .. }) => {
                a.iter().zip(b).map(|(x, y)| x.cmp_value(y)).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
            }
            _ => self.cmp_text(other).unwrap_or(Ordering::Equal),
        }
    }

    /// How the raw key bytes compare (`std::map<std::vector<uint8_t>, …>`): integers by their little-endian
    /// bytes, strings by their NUL-padded bytes.
    fn cmp_bytes(&self, other: &KeyPart) -> Ordering {
        match (self, other) {
            (KeyPart::Int { value: a, .. }, KeyPart::Int { value: b, .. }) => {
                a.swap_bytes().cmp(&b.swap_bytes())
            }
            (KeyPart::Bool(a), KeyPart::Bool(b)) => a.cmp(b),
            (KeyPart::Str(a), KeyPart::Str(b)) => Self::str_bytes(a).cmp(Self::str_bytes(b)),
            (KeyPart::Tuple(a), KeyPart::Tuple(b))
            | (KeyPart::Record { parts: a, .. }, KeyPart::Record { parts: b, .. }) => {
                a.iter().zip(b).map(|(x, y)| x.cmp_bytes(y)).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
            }
            _ => self.cmp_text(other).unwrap_or(Ordering::Equal),
        }
    }

    /// Pointers, byte arrays and arrays compare as the text every output writes them in (`0x10` before
    /// `0x8`, `[10,0]` before `[9,0]`): the order their keys have always had.
    fn cmp_text(&self, other: &KeyPart) -> Option<Ordering> {
        let text = |part: &KeyPart| {
            let mut out = vec![];
            match part {
                KeyPart::Pointer(address) => order_text(&mut out, &Value::Pointer(*address)),
                KeyPart::Bytes(bytes) => {
                    order_list(&mut out, &bytes.iter().map(|&b| Value::uint(b.into())).collect::<Vec<_>>())
                }
                KeyPart::Array(elems) => order_list(&mut out, elems),
                _ => return None,
            }
            Some(out)
        };
        Some(text(self)?.cmp(&text(other)?))
    }
}

/// The text of what an array key part can hold, for [`KeyPart::cmp_text`].
fn order_text(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Int { value, signed: true } => out.extend((*value as i64).to_string().bytes()),
        Value::Int { value, signed: false } => out.extend(value.to_string().bytes()),
        Value::Bool(b) => out.extend(b.to_string().bytes()),
        Value::Str(bytes) => out.extend(KeyPart::str_bytes(bytes)),
        Value::Pointer(address) => out.extend(format!("{address:#x}").bytes()),
        Value::Array(elems) => order_list(out, elems),
        _ => {}
    }
}

fn order_list(out: &mut Vec<u8>, elems: &[Value]) {
    out.push(b'[');
    for (i, elem) in elems.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        order_text(out, elem);
    }
    out.push(b']');
}

/// A symbolized stack (`kstack`, `ustack`): frames innermost first, each as
/// [`crate::symbols::symbolize_kernel`] / [`crate::symbols::symbolize_user`] wrote it for `mode`.
///
/// Its text is bpftrace 0.17's `get_stack`: empty when there is no stack at all (bpftrace's stack id was
/// negative, e.g. `kstack` sampled in user mode: `@[]: 498`), otherwise a newline and then one line per
/// frame, each ending in a newline:
/// - `bpftrace` mode: the frame indented by 4 spaces in a map key, by 8 everywhere else (map values,
///   `print(kstack)`, `printf("%s", kstack)`);
/// - `perf` mode: a tab, then the frame (`\tffffffff8225fe6b pv_native_safe_halt+11`), whatever the place;
/// - `raw` mode: the frame alone (bpftrace 0.18+).
///
/// So `@[kstack] = count()` prints `@[\n    f+1\n    g+2\n]: 3`, and `print(kstack)` prints
/// `\n        f+1\n        g+2\n\n`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stack {
    pub mode: StackMode,
    pub frames: Vec<String>,
}

impl Stack {
    /// Indent of `bpftrace`-mode frames in a map key (`MapKey::argument_value`).
    pub const KEY_INDENT: usize = 4;
    /// Indent of `bpftrace`-mode frames elsewhere (`Output::value_to_str`, printf).
    pub const VALUE_INDENT: usize = 8;

    pub fn new(mode: StackMode, frames: Vec<String>) -> Stack {
        Stack { mode, frames }
    }

    /// Appends the stack's text with `bpftrace`-mode frames indented by `indent` spaces.
    pub fn render(&self, out: &mut Vec<u8>, indent: usize) {
        if self.frames.is_empty() {
            return;
        }
        out.push(b'\n');
        for frame in &self.frames {
            match self.mode {
                StackMode::Bpftrace => out.resize(out.len() + indent, b' '),
                StackMode::Perf => out.push(b'\t'),
                StackMode::Raw | StackMode::BuildId => {}
            }
            out.extend_from_slice(frame.as_bytes());
            out.push(b'\n');
        }
    }

    /// The text `printf("%s", kstack)` substitutes (frames indented by 8).
    pub fn value_text(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.render(&mut out, Self::VALUE_INDENT);
        out
    }
}

/// A map key: empty for a scalar map such as `@x`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Key(pub Vec<KeyPart>);

impl Key {
    /// The key of a scalar map.
    pub fn scalar() -> Key {
        Key(Vec::new())
    }

    /// A one-part signed integer key, the common `@m[pid]`-like case.
    pub fn int(value: i64) -> Key {
        Key(vec![KeyPart::Int { value: value as u64, signed: true }])
    }

    /// A one-part string key.
    pub fn str(value: &[u8]) -> Key {
        Key(vec![KeyPart::Str(value.to_vec())])
    }

    /// A one-part stack key, as in `@[kstack]`.
    pub fn stack(stack: Stack) -> Key {
        Key(vec![KeyPart::Stack(stack)])
    }

    pub fn is_scalar(&self) -> bool {
        self.0.is_empty()
    }

    fn cmp_value(&self, other: &Key) -> Ordering {
        self.0
            .iter()
            .zip(&other.0)
            .map(|(a, b)| a.cmp_value(b))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }

    fn cmp_bytes(&self, other: &Key) -> Ordering {
        self.0
            .iter()
            .zip(&other.0)
            .map(|(a, b)| a.cmp_bytes(b))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }
}

/// A map value (or a printed non-map value), already reduced over CPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// A plain integer (`@x = 5`, `print(5)`), as its 64-bit pattern.
    Int { value: u64, signed: bool },
    /// A `bool` (`@b = 1 > 0`): `true` or `false`; 1 or 0 for printf's `%d`.
    Bool(bool),
    /// A string's bytes; anything from the first NUL on is ignored.
    Str(Vec<u8>),
    /// A tuple: text `(1, abc)`, JSON `[1,"abc"]`.
    Tuple(Vec<Value>),
    /// `count()`.
    Count(u64),
    /// `sum()`: signed when its argument is.
    Sum { value: u64, signed: bool },
    /// `min()`: the true minimum. (0.17 stores `0xffffffff - v` in the map and undoes it when printing;
    /// whatever codegen stores, the reader hands the real value here.)
    Min(i64),
    /// `max()`: printed signed. (0.17 prints it as unsigned, but its codegen never stores a negative max —
    /// the comparison against the zero of a missing entry fails — so signed printing differs from 0.17 only
    /// where 0.17 shows nothing at all.)
    Max(i64),
    /// `avg()`: bpftrace prints `total / count` truncated towards zero (0 when `count` is 0).
    Avg { count: u64, total: i64 },
    /// `stats()`: printed `{ .count = N, .average = A, .total = T }` as current bpftrace does (no min or max).
    Stats { count: u64, total: i64 },
    /// `hist()`: counts indexed by [`hist_bucket_index`]; any length up to [`HIST_BUCKETS`], missing
    /// trailing buckets count as zero.
    Hist(Vec<u64>),
    /// `hist(v, bits)` with `bits` from 1 to 5: counts indexed as `output/finehist.rs` describes.
    FineHist { bits: u32, counts: Vec<u64> },
    /// `lhist()`: counts indexed by [`lhist_bucket_index`], `lhist_slots(min, max, step)` long (missing
    /// trailing buckets count as zero).
    Lhist { min: i64, max: i64, step: i64, counts: Vec<u64> },
    /// A `kstack`/`ustack` value (`@s[tid] = kstack`, `print(ustack)`): text as [`Stack`] describes, frames
    /// indented by 8; JSON a string of that text.
    Stack(Stack),
    /// `print(args)`: text `{ .name = value, ... }`, JSON an object.
    Record(Vec<(String, Value)>),
    /// An address in a record: text `0x1f00`, JSON a number.
    Pointer(u64),
    /// An array's elements: text `[1,2,3]`, JSON a list.
    Array(Vec<Value>),
    /// A byte array (`pton()`): text `[127,0,0,1]`, JSON an array of numbers.
    Bytes(Vec<u8>),
    /// One key's `tseries()`: its intervals in order (see `output/tseries.rs`).
    Tseries { points: Vec<Point>, signed: bool },
}

/// One interval of a `tseries()`: its start (nanoseconds of the clock `tseries()` reads, shown as
/// wall-clock time) and its value, `None` where nothing was recorded.
pub type Point = (u64, Option<i128>);

impl Value {
    /// A signed plain integer.
    pub fn int(value: i64) -> Value {
        Value::Int { value: value as u64, signed: true }
    }

    /// An unsigned plain integer.
    pub fn uint(value: u64) -> Value {
        Value::Int { value, signed: false }
    }

    /// A string value.
    pub fn str(value: &[u8]) -> Value {
        Value::Str(value.to_vec())
    }

    /// The kind of map that holds values like this one.
    pub fn kind(&self) -> MapKind {
        match self {
            Value::Int { .. } | Value::Bool(_) => MapKind::Int,
            Value::Str(_) => MapKind::Str,
            Value::Tuple(_) | Value::Record(_) | Value::Array(_) => MapKind::Tuple,
            Value::Pointer(_) => MapKind::Int,
            Value::Count(_) => MapKind::Count,
            Value::Sum { .. } => MapKind::Sum,
            Value::Min(_) => MapKind::Min,
            Value::Max(_) => MapKind::Max,
            Value::Avg { .. } => MapKind::Avg,
            Value::Stats { .. } => MapKind::Stats,
            Value::Hist(_) | Value::FineHist { .. } => MapKind::Hist,
            Value::Lhist { .. } => MapKind::Lhist,
            Value::Stack(_) => MapKind::Stack,
            Value::Tseries { .. } => MapKind::Tseries,
            Value::Bytes(_) => MapKind::Tuple,
        }
    }

    /// `avg()`/`stats()` average: `total / count`, truncating, 0 for no samples.
    pub fn average(count: u64, total: i64) -> i64 {
        if count == 0 {
            0
        } else {
            total.wrapping_div(count as i64)
        }
    }

    /// The number bpftrace sorts count/sum/int/min/max maps by.
    fn sort_number(&self) -> i128 {
        match self {
            Value::Int { value, signed } | Value::Sum { value, signed } => {
                if *signed {
                    *value as i64 as i128
                } else {
                    *value as i128
                }
            }
            Value::Count(n) | Value::Pointer(n) => *n as i128,
            Value::Bool(b) => *b as i128,
            Value::Min(n) | Value::Max(n) => *n as i128,
            Value::Avg { count, total } | Value::Stats { count, total } => {
                Value::average(*count, *total) as i128
            }
            Value::Hist(counts) | Value::FineHist { counts, .. } | Value::Lhist { counts, .. } => {
                counts.iter().fold(0u64, |a, &c| a.wrapping_add(c)) as i128
            }
            Value::Str(_)
            | Value::Tuple(_)
            | Value::Stack(_)
            | Value::Record(_)
            | Value::Array(_)
            | Value::Tseries { .. }
            | Value::Bytes(_) => 0,
        }
    }
}

/// What a map holds; decides the layout and sort order of its printout, even when it is empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapKind {
    Int,
    Str,
    Tuple,
    Count,
    Sum,
    Min,
    Max,
    Avg,
    Stats,
    Hist,
    Lhist,
    /// `kstack`/`ustack` values: sorted by key like strings; in text, entries are not separated by a
    /// newline (each stack's text already ends with one), as 0.17's `map_elem_delim_to_str` does.
    Stack,
    /// `tseries()` values: sorted by the key's bytes, as bpftrace's ordered map of keys does.
    Tseries,
}

/// A map's contents at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapSnapshot {
    /// With its `@`: `@x`, or just `@`.
    pub name: String,
    pub kind: MapKind,
    /// In the order the map iteration (`bpf_map_get_next_key`) returned them; the formatters sort.
    pub entries: Vec<(Key, Value)>,
}

impl MapSnapshot {
    /// A snapshot whose kind is taken from its first entry; use a struct literal for an empty map.
    pub fn new(name: &str, entries: Vec<(Key, Value)>) -> MapSnapshot {
        let kind = entries.first().map_or(MapKind::Int, |(_, v)| v.kind());
        MapSnapshot { name: name.to_string(), kind, entries }
    }

    /// Whether the map has keys (`@m[...]`) rather than being a scalar `@x`.
    pub fn is_keyed(&self) -> bool {
        self.entries.first().is_some_and(|(k, _)| !k.is_scalar())
    }

    /// The entries in the order bpftrace 0.17 prints them, after applying `top` (0 or `None`: all).
    ///
    /// - count, sum, int, min, max maps: by value ascending (`std::sort` on the value);
    /// - hist and lhist maps: by total count ascending, ties in raw key byte order (integers compare by
    ///   their little-endian bytes, so `@h[256]` comes before `@h[1]`, and negatives last);
    /// - avg and stats maps: by average ascending, ties in raw key byte order;
    /// - string, tuple and stack valued maps: by key (`sort_by_key`: integer parts as *unsigned* 64-bit, so
    ///   `@s[-1]` sorts after `@s[3]`; string parts by `strncmp`).
    ///
    /// bpftrace uses the unstable `std::sort`; libstdc++ sorts ranges of at most 16 by insertion sort,
    /// which is stable, so for up to 16 entries ties keep their incoming order — for count/sum/int/min/max
    /// maps that is the hash iteration order, which the snapshot preserves. Beyond 16 entries bpftrace's
    /// tie order is unspecified; we keep the stable order.
    ///
    /// `top` keeps the last `top` entries (the biggest); 0.17 ignored it for stats maps, 0.27.1 applies it.
    pub fn print_order(&self, top: Option<usize>) -> Vec<&(Key, Value)> {
        let mut entries: Vec<&(Key, Value)> = self.entries.iter().collect();
        match self.kind {
            MapKind::Int | MapKind::Count | MapKind::Sum | MapKind::Min | MapKind::Max => {
                entries.sort_by_key(|(_, v)| v.sort_number());
            }
            MapKind::Hist | MapKind::Lhist | MapKind::Avg | MapKind::Stats => {
                entries.sort_by(|a, b| a.0.cmp_bytes(&b.0));
                entries.sort_by_key(|(_, v)| v.sort_number());
            }
            MapKind::Str | MapKind::Tuple | MapKind::Stack => entries.sort_by(|a, b| a.0.cmp_value(&b.0)),
            MapKind::Tseries => entries.sort_by(|a, b| a.0.cmp_bytes(&b.0)),
        }
        if let Some(top) = top.filter(|&t| t > 0) {
            if entries.len() > top {
                entries.drain(..entries.len() - top);
            }
        }
        entries
    }
}

/// The order bpftrace prints all maps in at exit: by name, bytewise (`@`, `@B`, `@_x`, `@a`, `@a1`, `@b`).
pub fn exit_order(maps: &[MapSnapshot]) -> Vec<&MapSnapshot> {
    let mut maps: Vec<&MapSnapshot> = maps.iter().collect();
    maps.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    maps
}

/// The effective divisor of `print(@m, top, div)`: 0 and `None` mean 1.
pub(crate) fn divisor(div: Option<u64>) -> u64 {
    div.filter(|&d| d != 0).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hist_bucket_edges() {
        assert_eq!(hist_bucket_index(i64::MIN), 0);
        assert_eq!(hist_bucket_index(-1), 0);
        assert_eq!(hist_bucket_index(0), 1);
        assert_eq!(hist_bucket_index(1), 2);
        assert_eq!(hist_bucket_index(2), 3);
        assert_eq!(hist_bucket_index(3), 3);
        assert_eq!(hist_bucket_index(4), 4);
        assert_eq!(hist_bucket_index(7), 4);
        assert_eq!(hist_bucket_index(8), 5);
        assert_eq!(hist_bucket_index(1023), 11);
        assert_eq!(hist_bucket_index(1024), 12);
        assert_eq!(hist_bucket_index(1 << 20), 22);
        assert_eq!(hist_bucket_index((1 << 31) - 1), 32);
        assert_eq!(hist_bucket_index(1 << 31), 33);
        assert_eq!(hist_bucket_index((1 << 32) - 1), 33);
        // 0.17 puts these in 33 too (bug #856); we follow the v0.20 fix.
        assert_eq!(hist_bucket_index(1 << 32), 34);
        assert_eq!(hist_bucket_index(10 << 30), 35);
        assert_eq!(hist_bucket_index(1 << 62), 64);
        assert_eq!(hist_bucket_index(i64::MAX), 64);
        // Agrees with 2 + floor(log2(v)) everywhere positive.
        for shift in 0..63 {
            for v in [1i64 << shift, ((1i64 << shift) - 1).max(1), (1i64 << shift) + 1] {
                assert_eq!(hist_bucket_index(v), 2 + (63 - v.leading_zeros() as usize), "{v}");
            }
        }
        assert!(hist_bucket_index(i64::MAX) < HIST_BUCKETS);
    }

    #[test]
    fn hist_ranges() {
        assert_eq!(hist_bucket_range(0), (None, Some(-1)));
        assert_eq!(hist_bucket_range(1), (Some(0), Some(0)));
        assert_eq!(hist_bucket_range(2), (Some(1), Some(1)));
        assert_eq!(hist_bucket_range(3), (Some(2), Some(3)));
        assert_eq!(hist_bucket_range(12), (Some(1024), Some(2047)));
        assert_eq!(hist_bucket_range(33), (Some(1 << 31), Some((1 << 32) - 1)));
        assert_eq!(hist_bucket_range(64), (Some(1 << 62), Some(i64::MAX)));
        for v in [1i64, 2, 3, 4, 1000, 1 << 40, i64::MAX] {
            let (lo, hi) = hist_bucket_range(hist_bucket_index(v));
            assert!(lo.unwrap() <= v && v <= hi.unwrap(), "{v}");
        }
    }

    #[test]
    fn lhist_bucket_edges() {
        // lhist(v, 0, 100, 10): 10 range buckets, slots 0..=11.
        assert_eq!(lhist_slots(0, 100, 10), 12);
        assert_eq!(lhist_bucket_index(-5, 0, 100, 10), 0);
        assert_eq!(lhist_bucket_index(i64::MIN, 0, 100, 10), 0);
        assert_eq!(lhist_bucket_index(0, 0, 100, 10), 1);
        assert_eq!(lhist_bucket_index(9, 0, 100, 10), 1);
        assert_eq!(lhist_bucket_index(10, 0, 100, 10), 2);
        assert_eq!(lhist_bucket_index(99, 0, 100, 10), 10);
        assert_eq!(lhist_bucket_index(100, 0, 100, 10), 11); // max itself is overflow
        assert_eq!(lhist_bucket_index(1000, 0, 100, 10), 11);
        assert_eq!(lhist_bucket_index(i64::MAX, 0, 100, 10), 11);
        // Non-dividing step: lhist(v, 0, 105, 10) has 10 range buckets; 100..=105 land in overflow.
        assert_eq!(lhist_slots(0, 105, 10), 12);
        assert_eq!(lhist_bucket_index(99, 0, 105, 10), 10);
        assert_eq!(lhist_bucket_index(104, 0, 105, 10), 11);
        assert_eq!(lhist_bucket_index(106, 0, 105, 10), 11);
        // Non-zero min.
        assert_eq!(lhist_bucket_index(5, 1024, 10240, 1024), 0);
        assert_eq!(lhist_bucket_index(1024, 1024, 10240, 1024), 1);
        assert_eq!(lhist_bucket_index(3000, 1024, 10240, 1024), 2);
        assert_eq!(lhist_bucket_index(10240, 1024, 10240, 1024), 10);
        assert_eq!(lhist_bucket_range(0, 1024, 10240, 1024), (None, Some(1023)));
        assert_eq!(lhist_bucket_range(2, 1024, 10240, 1024), (Some(2048), Some(3071)));
        assert_eq!(lhist_bucket_range(10, 1024, 10240, 1024), (Some(10240), None));
    }

    #[test]
    fn print_order_rules() {
        let int = |v: i64| KeyPart::Int { value: v as u64, signed: true };
        // String-valued map: keys as unsigned (0.17: @s[1], @s[3], @s[256], @s[-5], @s[-1]).
        let m = MapSnapshot::new(
            "@s",
            [-1, 1, -5, 3, 256].iter().map(|&k| (Key(vec![int(k)]), Value::str(b"x"))).collect(),
        );
        let keys: Vec<_> = m.print_order(None).iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(keys, [1, 3, 256, -5, -1].map(Key::int));
        // Hist map ties: raw key bytes (0.17: @h[256], @h[1], @h[-1], then @h[2] with the bigger total).
        let h = |n| Value::Hist(vec![0, 0, n]);
        let m = MapSnapshot::new(
            "@h",
            vec![(Key::int(1), h(1)), (Key::int(2), h(2)), (Key::int(-1), h(1)), (Key::int(256), h(1))],
        );
        let keys: Vec<_> = m.print_order(None).iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(keys, [256, 1, -1, 2].map(Key::int));
        assert_eq!(m.print_order(Some(1)).len(), 1);
        // Stats keeps the top too (0.27.1; 0.17 ignored it).
        let m = MapSnapshot::new(
            "@s",
            (1..=3).map(|k| (Key::int(k), Value::Stats { count: 1, total: k * 10 })).collect(),
        );
        let keys: Vec<_> = m.print_order(Some(1)).iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(keys, [Key::int(3)]);
    }
}
