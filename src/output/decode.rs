//! Reading BPF memory back into values: map keys and values, and `print()` records, laid out as
//! [`Type::slot_size`] describes (8-byte integers, NUL-padded strings, tuples field after field).

use super::value::{Key, KeyPart, MapKind, MapSnapshot, Stack, Value};
use crate::sema::maps::{Agg, MapDecl, MapValue};
use crate::sema::types::{StackType, Type};
use crate::symbols::unwind::StackCopy;
use std::collections::BTreeMap;

/// Turns the id of a recorded stack (and for a user stack, its process id) into printed frames.
pub trait StackResolver {
    fn frames(&mut self, stack: &StackType, id: i64, pid: u32) -> Vec<String>;
    /// `ksym`/`usym`: the name of the function containing `addr` (in process `pid` for a user one).
    fn symbol(&mut self, user: bool, addr: u64, pid: u32) -> String;
    /// `dw_ustack`: a copied user stack to unwind, named by its handle in keys and values.
    fn take_stack_copy(&mut self, copy: StackCopy);
}

fn symbol(resolver: &mut dyn StackResolver, user: bool, bytes: &[u8]) -> Vec<u8> {
    resolver.symbol(user, word(bytes, 0), word(bytes, 8) as u32).into_bytes()
}

fn stack(resolver: &mut dyn StackResolver, ty: &StackType, bytes: &[u8]) -> Stack {
    let (id, pid) = (word(bytes, 0) as i64, word(bytes, 8) as u32);
    Stack::new(ty.mode, resolver.frames(ty, id, pid))
}

/// A CPU bitmap (64-bit words, least significant bit first) as the kernel prints a CPU list: `0-3,8`.
pub fn cpu_list(bitmap: &[u8]) -> String {
    let set: Vec<usize> =
        (0..bitmap.len() * 8).filter(|&cpu| bitmap[cpu / 8] & (1 << (cpu % 8)) != 0).collect();
    let mut ranges: Vec<String> = vec![];
    let mut i = 0;
    while i < set.len() {
        let start = set[i];
        while i + 1 < set.len() && set[i + 1] == set[i] + 1 {
            i += 1;
        }
        ranges.push(if set[i] == start { start.to_string() } else { format!("{start}-{}", set[i]) });
        i += 1;
    }
    ranges.join(",")
}

/// The name of function `index` of a uprobe_multi link (its cookie), as the probe on that one function
/// would give `func`.
pub fn function_name(names: &[String], index: u64) -> Vec<u8> {
    match usize::try_from(index).ok().and_then(|i| names.get(i)) {
        Some(name) => name.clone().into_bytes(),
        None => format!("{index:#x}").into_bytes(),
    }
}

/// A `macaddr()` value: its 6 bytes in hex, colon-separated, upper case as bpftrace prints them.
pub fn mac_address(bytes: &[u8]) -> String {
    let bytes = &bytes[..bytes.len().min(6)];
    bytes.iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

/// An `ntop()` value, `[family: u64][16 bytes of address]`, as `inet_ntop` prints it.
pub fn inet(bytes: &[u8]) -> String {
    let address = |len: usize| bytes.get(8..8 + len);
    match word(bytes, 0) {
        2 => address(4).map(|a| std::net::Ipv4Addr::new(a[0], a[1], a[2], a[3]).to_string()),
        10 => address(16)
            .and_then(|a| <[u8; 16]>::try_from(a).ok())
            .map(|a| std::net::Ipv6Addr::from(a).to_string()),
        _ => None,
    }
    .unwrap_or_default()
}

/// A `buf()` value, `[length: u64][at most size bytes]`, as `%r` prints it.
fn buffer(bytes: &[u8], size: usize) -> Vec<u8> {
    let len = (word(bytes, 0) as usize).min(size);
    super::printf::buffer(bytes.get(8..8 + len).unwrap_or(&[]), true, true)
}

fn word(bytes: &[u8], at: usize) -> u64 {
    bytes.get(at..at + 8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes)
}

fn string(bytes: &[u8]) -> Vec<u8> {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    bytes[..end].to_vec()
}

/// A value of type `ty` from its bytes.
pub fn value(ty: &Type, bytes: &[u8], stacks: &mut dyn StackResolver) -> Value {
    match ty {
        Type::Int { signed, .. } => Value::Int { value: word(bytes, 0), signed: *signed },
        Type::Bool => Value::Bool(word(bytes, 0) != 0),
        Type::Enum { def, .. } => match def.variant(word(bytes, 0) as i64) {
            Some(name) => Value::Str(name.as_bytes().to_vec()),
            None => Value::Int { value: word(bytes, 0), signed: false },
        },
        Type::Str { size } => Value::Str(string(&bytes[..(*size).min(bytes.len())])),
        Type::Tuple(fields) => Value::Tuple(
            fields
                .iter()
                .zip(Type::field_offsets(fields))
                .map(|(field, at)| value(field, bytes.get(at..).unwrap_or(&[]), stacks))
                .collect(),
        ),
        Type::NamedTuple { names, fields } => Value::Record(
            names
                .iter()
                .zip(fields)
                .zip(Type::field_offsets(fields))
                .map(|((name, field), at)| {
                    (name.clone(), value(field, bytes.get(at..).unwrap_or(&[]), stacks))
                })
                .collect(),
        ),
        Type::Stack(ty) => Value::Stack(stack(stacks, ty, bytes)),
        Type::Cpumask { bytes: size } => {
            Value::Str(cpu_list(&bytes[..(*size).min(bytes.len())]).into_bytes())
        }
        Type::Symbol { user } => Value::Str(symbol(stacks, *user, bytes)),
        Type::Inet => Value::Str(inet(bytes).into_bytes()),
        Type::MacAddr => Value::Str(mac_address(bytes).into_bytes()),
        Type::Bytes { size } => Value::Bytes(bytes[..(*size).min(bytes.len())].to_vec()),
        Type::Buf { size } => Value::Str(buffer(bytes, *size)),
        Type::Timestamp { format } => Value::Str(super::timestamp::format(format, word(bytes, 0))),
        Type::Username => Value::Str(super::user_name(word(bytes, 0) as u32).into_bytes()),
        Type::CgroupPath { filter } => Value::Str(super::cgroup::paths(word(bytes, 0), filter).into_bytes()),
        Type::ContainerId => Value::Str(super::container::container_id(word(bytes, 0)).into_bytes()),
        Type::Function { names } => Value::Str(function_name(names, word(bytes, 0))),
        Type::Ptr { .. } | Type::Pointer { .. } => Value::Pointer(word(bytes, 0)),
        Type::Array { elem, len } => Value::Array(array(elem, *len, bytes, stacks)),
        Type::Record { .. } | Type::Void => Value::Int { value: 0, signed: false },
    }
}

/// The `len` elements of an array of `elem`.
fn array(elem: &Type, len: usize, bytes: &[u8], stacks: &mut dyn StackResolver) -> Vec<Value> {
    let stride = elem.c_size().unwrap_or(8);
    (0..len).map(|i| element(elem, bytes.get(i * stride..).unwrap_or(&[]), stride, stacks)).collect()
}

/// An array's element of `size` bytes: integers narrower than 8 bytes are widened first.
fn element(ty: &Type, bytes: &[u8], size: usize, stacks: &mut dyn StackResolver) -> Value {
    match ty {
        Type::Int { .. } | Type::Bool if size < 8 => {
            let mut raw = [0u8; 8];
            let n = size.min(bytes.len());
            raw[..n].copy_from_slice(&bytes[..n]);
            let shift = 64 - 8 * size as u32;
            let word = u64::from_le_bytes(raw);
            let word = if ty.is_signed() { (((word << shift) as i64) >> shift) as u64 } else { word };
            value(ty, &word.to_le_bytes(), stacks)
        }
        _ => value(ty, bytes, stacks),
    }
}

/// The user's part of a map key (without a histogram's bucket index). A key written as one tuple is
/// the same key as its fields written as parts (`sema::maps::as_parts`), so it prints as they do.
fn key(types: &[Type], bytes: &[u8], stacks: &mut dyn StackResolver) -> Key {
    match types {
        [Type::Tuple(fields)] => key_parts(fields, bytes, stacks),
        _ => key_parts(types, bytes, stacks),
    }
}

/// The parts of a key; a tuple among them is one part, printed `(a, b)`.
fn key_parts(types: &[Type], bytes: &[u8], stacks: &mut dyn StackResolver) -> Key {
    let mut parts = vec![];
    let mut at = 0;
    for ty in types {
        let field = bytes.get(at..).unwrap_or(&[]);
        match ty {
            Type::Int { signed, .. } => parts.push(KeyPart::Int { value: word(field, 0), signed: *signed }),
            Type::Bool => parts.push(KeyPart::Bool(word(field, 0) != 0)),
            Type::Enum { def, .. } => parts.push(match def.variant(word(field, 0) as i64) {
                Some(name) => KeyPart::Str(name.as_bytes().to_vec()),
                None => KeyPart::Int { value: word(field, 0), signed: false },
            }),
            Type::Ptr { .. } | Type::Pointer { .. } => parts.push(KeyPart::Pointer(word(field, 0))),
            Type::Array { elem, len } => parts.push(KeyPart::Array(array(elem, *len, field, stacks))),
            Type::Str { size } => parts.push(KeyPart::Str(string(&field[..(*size).min(field.len())]))),
            Type::Tuple(inner) => parts.push(KeyPart::Tuple(key_parts(inner, field, stacks).0)),
            Type::NamedTuple { names, fields } => parts
                .push(KeyPart::Record { names: names.clone(), parts: key_parts(fields, field, stacks).0 }),
            Type::Stack(ty) => parts.push(KeyPart::Stack(stack(stacks, ty, field))),
            Type::Cpumask { bytes: size } => {
                parts.push(KeyPart::Str(cpu_list(&field[..(*size).min(field.len())]).into_bytes()))
            }
            Type::Symbol { user } => parts.push(KeyPart::Str(symbol(stacks, *user, field))),
            Type::Inet => parts.push(KeyPart::Str(inet(field).into_bytes())),
            Type::MacAddr => parts.push(KeyPart::Str(mac_address(field).into_bytes())),
            Type::Bytes { size } => parts.push(KeyPart::Bytes(field[..(*size).min(field.len())].to_vec())),
            Type::Buf { size } => parts.push(KeyPart::Str(buffer(field, *size))),
            Type::CgroupPath { filter } => {
                parts.push(KeyPart::Str(super::cgroup::paths(word(field, 0), filter).into_bytes()))
            }
            Type::ContainerId => {
                parts.push(KeyPart::Str(super::container::container_id(word(field, 0)).into_bytes()))
            }
            Type::Timestamp { format } => {
                parts.push(KeyPart::Str(super::timestamp::format(format, word(field, 0))))
            }
            Type::Username => parts.push(KeyPart::Str(super::user_name(word(field, 0) as u32).into_bytes())),
            Type::Function { names } => parts.push(KeyPart::Str(function_name(names, word(field, 0)))),
            Type::Record { .. } | Type::Void => {}
        }
        at += ty.slot_size();
    }
    Key(parts)
}

fn map_kind(value: &MapValue) -> MapKind {
    match value {
        MapValue::Plain(Type::Str { .. }) => MapKind::Str,
        MapValue::Plain(Type::Tuple(_) | Type::NamedTuple { .. }) => MapKind::Tuple,
        MapValue::Plain(Type::Stack(_)) => MapKind::Stack,
        MapValue::Plain(
            Type::Cpumask { .. }
            | Type::Symbol { .. }
            | Type::Function { .. }
            | Type::Inet
            | Type::MacAddr
            | Type::Buf { .. }
            | Type::Timestamp { .. }
            | Type::Username
            | Type::CgroupPath { .. }
            | Type::ContainerId,
        ) => MapKind::Str,
        MapValue::Plain(_) => MapKind::Int,
        MapValue::Agg(agg) => match agg {
            Agg::Count => MapKind::Count,
            Agg::Sum { .. } => MapKind::Sum,
            Agg::Min => MapKind::Min,
            Agg::Max => MapKind::Max,
            Agg::Avg => MapKind::Avg,
            Agg::Stats => MapKind::Stats,
            Agg::Hist { .. } => MapKind::Hist,
            Agg::Lhist { .. } => MapKind::Lhist,
            Agg::Tseries(_) => MapKind::Tseries,
        },
    }
}

/// A map's entries as read from the kernel: `(key bytes, one value per CPU)` (a single value for maps
/// that are not per-CPU), merged into what the formatters print.
pub fn snapshot(
    decl: &MapDecl,
    entries: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
    stacks: &mut dyn StackResolver,
) -> MapSnapshot {
    let name = format!("@{}", decl.name);
    let kind = map_kind(&decl.value);
    let user_key_len =
        decl.key_size() - if matches!(&decl.value, MapValue::Agg(a) if a.has_buckets()) { 8 } else { 0 };
    let mut out = vec![];
    match &decl.value {
        MapValue::Plain(ty) => {
            for (k, values) in entries {
                if let Some(v) = values.first() {
                    out.push((key(&decl.key, &k, stacks), value(ty, v, stacks)));
                }
            }
        }
        MapValue::Agg(Agg::Tseries(series)) => {
            for (k, points) in super::tseries::series(series, user_key_len, entries) {
                out.push((key(&decl.key, &k, stacks), super::tseries::value(points, series)));
            }
        }
        MapValue::Agg(agg) if agg.has_buckets() => {
            // One BPF entry per (key, bucket), each read once, its CPUs' counts folded: gather each key's buckets.
            let mut grouped: BTreeMap<Vec<u8>, Vec<u64>> = BTreeMap::new();
            for (k, values) in entries {
                let bucket = word(&k, user_key_len) as usize;
                let counts = grouped.entry(k[..user_key_len].to_vec()).or_default();
                if counts.len() <= bucket {
                    counts.resize(bucket + 1, 0);
                }
                counts[bucket] = word(&fold(decl, &values), 0);
            }
            for (k, counts) in grouped {
                let value = match *agg {
                    Agg::Lhist { min, max, step } => Value::Lhist { min, max, step, counts },
                    Agg::Hist { bits } if bits > 0 => Value::FineHist { bits, counts },
                    _ => Value::Hist(counts),
                };
                out.push((key(&decl.key, &k, stacks), value));
            }
        }
        MapValue::Agg(agg) => {
            for (k, values) in entries {
                let merged = fold(decl, &values);
                let (first, second) = (word(&merged, 0), word(&merged, 8));
                let value = match agg {
                    Agg::Count => Value::Count(first),
                    Agg::Sum { signed } => Value::Sum { value: first, signed: *signed },
                    Agg::Avg => Value::Avg { count: first, total: second as i64 },
                    Agg::Stats => Value::Stats { count: first, total: second as i64 },
                    Agg::Min | Agg::Max if second == 0 => continue,
                    Agg::Min => Value::Min(first as i64),
                    Agg::Max => Value::Max(first as i64),
                    Agg::Hist { .. } | Agg::Lhist { .. } | Agg::Tseries(_) => unreachable!("handled above"),
                };
                out.push((key(&decl.key, &k, stacks), value));
            }
        }
    }
    MapSnapshot { name, kind, entries: out }
}

/// Every CPU's value of one entry merged into one, as the aggregation merges them (a min or max counts only
/// where it was set: `[value][set]`).
fn fold(decl: &MapDecl, values: &[Vec<u8>]) -> [u8; 16] {
    let mut merged = [0u8; 16];
    for value in values {
        super::merge::merge(decl, &mut merged, value);
    }
    merged
}

/// `print(@m)` of a scalar map that holds no value (never set, or cleared) shows its zero value, as current
/// bpftrace does (`@: 0`, `@s: { .count = 0, ... }`); histograms stay empty. At exit such a map is not shown.
pub fn with_zero_scalar(
    mut snapshot: MapSnapshot,
    decl: &MapDecl,
    stacks: &mut dyn StackResolver,
) -> MapSnapshot {
    if !snapshot.entries.is_empty() || !decl.key.is_empty() {
        return snapshot;
    }
    let zero = match &decl.value {
        MapValue::Plain(ty) => value(ty, &vec![0; ty.slot_size()], stacks),
        MapValue::Agg(agg) => match *agg {
            Agg::Count => Value::Count(0),
            Agg::Sum { signed } => Value::Sum { value: 0, signed },
            Agg::Avg => Value::Avg { count: 0, total: 0 },
            Agg::Stats => Value::Stats { count: 0, total: 0 },
            Agg::Min => Value::Min(0),
            Agg::Max => Value::Max(0),
            Agg::Hist { .. } | Agg::Lhist { .. } | Agg::Tseries(_) => return snapshot,
        },
    };
    snapshot.entries.push((Key::scalar(), zero));
    snapshot
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_read_like_the_kernel_prints_them() {
        assert_eq!(cpu_list(&[0b0000_1111, 0b0000_0001, 0, 0, 0, 0, 0, 0]), "0-3,8");
        assert_eq!(cpu_list(&[0b0000_0010, 0, 0, 0, 0, 0, 0, 0]), "1");
        assert_eq!(cpu_list(&[0; 8]), "");
        assert_eq!(cpu_list(&[0b1010_1010]), "1,3,5,7");
    }

    #[test]
    fn ntop_values_read_like_inet_ntop_prints_them() {
        let value = |family: u64, address: &[u8]| {
            let mut bytes = family.to_le_bytes().to_vec();
            bytes.extend(address);
            bytes.resize(24, 0);
            inet(&bytes)
        };
        assert_eq!(value(2, &[10, 0, 0, 1]), "10.0.0.1");
        let mut v6 = [0u8; 16];
        v6[15] = 1;
        assert_eq!(value(10, &v6), "::1");
        v6[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        assert_eq!(value(10, &v6), "2001:db8::1");
        v6 = [0; 16];
        v6[10..].copy_from_slice(&[0xff, 0xff, 192, 168, 0, 1]);
        assert_eq!(value(10, &v6), "::ffff:192.168.0.1");
        assert_eq!(value(7, &[1, 2, 3, 4]), "");
    }
}
