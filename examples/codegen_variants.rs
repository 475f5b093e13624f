//! Hand-assembled variants of programs steadytrace generates, each with one codegen change, so that
//! `benches/event_cost.py --variants` can measure what the change would save before the compiler makes it
//! (see docs/BENCHMARKS.md). Run as a tracer would be: `codegen_variants VARIANT SCRIPT`, where SCRIPT is
//! the bench's script text, of which only the tracepoint names and the `pid == N` filter are used. The
//! programs are loaded and attached, then the process waits to be killed.
//!
//! Variants (the first of each pair is today's code, for checking that the harness measures like
//! steadytrace does; the others are the proposals):
//!   count_hash      `@ = count()` as today: per-CPU hash, 8-byte key 0, lookup helper, in-place add
//!   count_array     the same on a one-entry per-CPU array, whose lookup the verifier inlines
//!   hist_key16      `@h = hist(v)` as today: per-CPU hash with the 16-byte key (0, bucket)
//!   hist_key8       the same with the 8-byte key (bucket)
//!   hist_array      a 66-entry per-CPU array indexed by the bucket
//!   assign_update   `@t[tid] = nsecs` as today: map_update_elem on every event
//!   assign_inplace  lookup first and store into the value when the key exists; update only when not
//!   lat_now         `@start[tid] = nsecs` / `/@start[tid]/ { @lat = hist(nsecs - @start[tid]);
//!                   delete(@start[tid]); }` as today: tid, its key and the lookup redone at each use
//!   lat_cse         the same with tid's key built once and the predicate's lookup reused
//!   printf_nowakeup `printf("%s %d\n", comm, tid)` with BPF_RB_NO_WAKEUP, the reader polling every 10 ms

use bpf::{Alu, Asm, AttachMode, Code, Cond, Helper, Label, Map, MapKind, MapSpec, ProgType, Reg, Size};
use std::os::fd::AsFd;

const FP: Reg = Reg::FP;
/// BPF_RB_NO_WAKEUP: do not wake the ring buffer's reader for this record.
const RB_NO_WAKEUP: i32 = 1;
const GET_CURRENT_COMM: u32 = 16;

fn usage() -> ! {
    eprintln!("usage: codegen_variants VARIANT 'SCRIPT' (see the source for the variants)");
    std::process::exit(2)
}

fn pointer(a: &mut Asm, reg: Reg, offset: i16) {
    a.mov64_reg(reg, FP);
    a.alu64_imm(Alu::Add, reg, offset as i32);
}

/// `/pid == N/`: to `out` when another process.
fn filter(a: &mut Asm, pid: i32, out: Label) {
    a.call(Helper::GetCurrentPidTgid.id());
    a.alu64_imm(Alu::Rsh, Reg::R0, 32);
    a.jump_imm(Cond::Ne, Reg::R0, pid, out);
}

/// `tid` as a map key at `fp + at`.
fn tid_key(a: &mut Asm, at: i16) {
    a.call(Helper::GetCurrentPidTgid.id());
    a.alu32_imm(Alu::Add, Reg::R0, 0);
    a.store(Size::DW, FP, at, Reg::R0);
}

/// `*r0 += 1` when the lookup found the key; otherwise, with `create`, the key gets the value 1.
fn increment(a: &mut Asm, map: usize, key: i16, create: bool, out: Label) {
    let absent = a.new_label();
    a.jump_imm(Cond::Eq, Reg::R0, 0, absent);
    a.load(Size::DW, Reg::R1, Reg::R0, 0);
    a.alu64_imm(Alu::Add, Reg::R1, 1);
    a.store(Size::DW, Reg::R0, 0, Reg::R1);
    a.jump(out);
    a.bind(absent);
    if create {
        a.store_imm(Size::DW, FP, -64, 1);
        a.ld_map(Reg::R1, map);
        pointer(a, Reg::R2, key);
        pointer(a, Reg::R3, -64);
        a.mov64_imm(Reg::R4, 0);
        a.call(Helper::MapUpdateElem.id());
    }
}

/// r1 = the `hist()` bucket of r2, as steadytrace computes it.
fn log2(a: &mut Asm) {
    let done = a.new_label();
    a.mov64_imm(Reg::R1, 0);
    a.jump_imm(Cond::SLt, Reg::R2, 0, done);
    a.mov64_imm(Reg::R1, 1);
    a.jump_imm(Cond::Eq, Reg::R2, 0, done);
    a.mov64_imm(Reg::R1, 2);
    for shift in [32, 16, 8, 4, 2, 1] {
        let below = a.new_label();
        match shift {
            32 => a.ld_imm64(Reg::R3, 1 << 32),
            _ => a.mov64_imm(Reg::R3, 1 << shift),
        }
        a.jump_reg(Cond::ULt, Reg::R2, Reg::R3, below);
        a.alu64_imm(Alu::Rsh, Reg::R2, shift);
        a.alu64_imm(Alu::Add, Reg::R1, shift);
        a.bind(below);
    }
    a.bind(done);
}

/// Adds r2 to the histogram in `map`, laid out as `layout` says (key16, key8 or array).
fn hist(a: &mut Asm, map: usize, layout: &str, out: Label) {
    log2(a);
    let (key, size) = match layout {
        "key16" => {
            a.store_imm(Size::DW, FP, -48, 0);
            (-48, Size::DW)
        }
        "key8" => (-40, Size::DW),
        _ => (-40, Size::W),
    };
    a.store(size, FP, -40, Reg::R1);
    a.ld_map(Reg::R1, map);
    pointer(a, Reg::R2, key);
    a.call(Helper::MapLookupElem.id());
    increment(a, map, key, layout != "array", out);
}

fn map(kind: MapKind, key_size: u32, max_entries: u32) -> MapSpec {
    MapSpec { name: "variant".into(), kind, key_size, value_size: 8, max_entries }
}

fn hist_map(layout: &str) -> MapSpec {
    match layout {
        "key16" => map(MapKind::PercpuHash, 16, 4096),
        "key8" => map(MapKind::PercpuHash, 8, 4096),
        _ => map(MapKind::PercpuArray, 4, 66),
    }
}

fn finish(mut a: Asm, out: Label) -> Code {
    a.bind(out);
    a.mov64_imm(Reg::R0, 0);
    a.exit();
    a.finish().expect("labels are bound")
}

/// The programs, each with the tracepoint (of `points`, in the script's order) it attaches to, and the maps.
fn build(variant: &str, pid: i32, points: &[String]) -> (Vec<(String, Code)>, Vec<MapSpec>) {
    let mut a = Asm::new();
    let out = a.new_label();
    let first = points[0].clone();
    match variant {
        "count_hash" | "count_array" => {
            filter(&mut a, pid, out);
            let hash = variant == "count_hash";
            a.store_imm(if hash { Size::DW } else { Size::W }, FP, -8, 0);
            a.ld_map(Reg::R1, 0);
            pointer(&mut a, Reg::R2, -8);
            a.call(Helper::MapLookupElem.id());
            increment(&mut a, 0, -8, hash, out);
            let spec = if hash { map(MapKind::PercpuHash, 8, 4096) } else { map(MapKind::PercpuArray, 4, 1) };
            (vec![(first, finish(a, out))], vec![spec])
        }
        "hist_key16" | "hist_key8" | "hist_array" => {
            let layout = &variant[5..];
            filter(&mut a, pid, out);
            a.call(Helper::KtimeGetNs.id());
            a.mov64_reg(Reg::R2, Reg::R0);
            a.alu64_imm(Alu::And, Reg::R2, 0xffff);
            hist(&mut a, 0, layout, out);
            (vec![(first, finish(a, out))], vec![hist_map(layout)])
        }
        "assign_update" | "assign_inplace" => {
            filter(&mut a, pid, out);
            a.call(Helper::KtimeGetNs.id());
            a.mov64_reg(Reg::R6, Reg::R0);
            a.store(Size::DW, FP, -8, Reg::R6);
            tid_key(&mut a, -16);
            if variant == "assign_inplace" {
                a.ld_map(Reg::R1, 0);
                pointer(&mut a, Reg::R2, -16);
                a.call(Helper::MapLookupElem.id());
                let absent = a.new_label();
                a.jump_imm(Cond::Eq, Reg::R0, 0, absent);
                a.store(Size::DW, Reg::R0, 0, Reg::R6);
                a.jump(out);
                a.bind(absent);
            }
            a.ld_map(Reg::R1, 0);
            pointer(&mut a, Reg::R2, -16);
            pointer(&mut a, Reg::R3, -8);
            a.mov64_imm(Reg::R4, 0);
            a.call(Helper::MapUpdateElem.id());
            (vec![(first, finish(a, out))], vec![map(MapKind::Hash, 8, 4096)])
        }
        "lat_now" | "lat_cse" => {
            // Entry: @start[tid] = nsecs (map 0).
            filter(&mut a, pid, out);
            a.call(Helper::KtimeGetNs.id());
            a.store(Size::DW, FP, -8, Reg::R0);
            tid_key(&mut a, -16);
            a.ld_map(Reg::R1, 0);
            pointer(&mut a, Reg::R2, -16);
            pointer(&mut a, Reg::R3, -8);
            a.mov64_imm(Reg::R4, 0);
            a.call(Helper::MapUpdateElem.id());
            let entry = finish(a, out);
            // Exit: /@start[tid]/ { @lat = hist(nsecs - @start[tid]); delete(@start[tid]); } (@lat: map 1).
            let mut a = Asm::new();
            let out = a.new_label();
            let delete = a.new_label();
            let again = variant == "lat_now";
            tid_key(&mut a, -8);
            a.ld_map(Reg::R1, 0);
            pointer(&mut a, Reg::R2, -8);
            a.call(Helper::MapLookupElem.id());
            a.jump_imm(Cond::Eq, Reg::R0, 0, out);
            a.load(Size::DW, Reg::R7, Reg::R0, 0);
            a.jump_imm(Cond::Eq, Reg::R7, 0, out);
            a.call(Helper::KtimeGetNs.id());
            a.mov64_reg(Reg::R6, Reg::R0);
            if again {
                tid_key(&mut a, -16);
                a.ld_map(Reg::R1, 0);
                pointer(&mut a, Reg::R2, -16);
                a.call(Helper::MapLookupElem.id());
                a.mov64_imm(Reg::R7, 0);
                let absent = a.new_label();
                a.jump_imm(Cond::Eq, Reg::R0, 0, absent);
                a.load(Size::DW, Reg::R7, Reg::R0, 0);
                a.bind(absent);
            }
            a.alu64_reg(Alu::Sub, Reg::R6, Reg::R7);
            a.mov64_reg(Reg::R2, Reg::R6);
            hist(&mut a, 1, "key16", delete);
            a.bind(delete);
            let key = if again { -24 } else { -8 };
            if again {
                tid_key(&mut a, key);
            }
            a.ld_map(Reg::R1, 0);
            pointer(&mut a, Reg::R2, key);
            a.call(Helper::MapDeleteElem.id());
            let exit = points.get(1).cloned().unwrap_or_else(|| usage());
            (
                vec![(first, entry), (exit, finish(a, out))],
                vec![map(MapKind::Hash, 8, 4096), hist_map("key16")],
            )
        }
        "printf_nowakeup" => {
            // The record steadytrace writes for printf("%s %d\n", comm, tid): format id, comm, tid.
            filter(&mut a, pid, out);
            a.store_imm(Size::DW, FP, -32, 1);
            a.store_imm(Size::DW, FP, -24, 0);
            a.store_imm(Size::DW, FP, -16, 0);
            pointer(&mut a, Reg::R1, -24);
            a.mov64_imm(Reg::R2, 16);
            a.call(GET_CURRENT_COMM);
            tid_key(&mut a, -8);
            a.ld_map(Reg::R1, 0);
            pointer(&mut a, Reg::R2, -32);
            a.mov64_imm(Reg::R3, 32);
            a.mov64_imm(Reg::R4, RB_NO_WAKEUP);
            a.call(Helper::RingbufOutput.id());
            let ring = MapSpec {
                name: "events".into(),
                kind: MapKind::RingBuf,
                key_size: 0,
                value_size: 0,
                max_entries: 1 << 20,
            };
            (vec![(first, finish(a, out))], vec![ring])
        }
        _ => usage(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(variant), Some(script)) = (args.get(1), args.get(2)) else { usage() };
    let points: Vec<String> = script
        .split("tracepoint:")
        .skip(1)
        .filter_map(|rest| rest.split_whitespace().next())
        .map(|point| point.replace(':', "/"))
        .collect();
    let pid = script
        .split("pid == ")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| usage());
    if points.is_empty() {
        usage();
    }
    let (programs, specs) = build(variant, pid, &points);
    let maps: Vec<Map> = specs.iter().map(|spec| Map::create(spec).expect("map created")).collect();
    let fds: Vec<_> = maps.iter().map(|m| m.handle().as_fd()).collect();
    let mut attached = vec![];
    for (point, code) in &programs {
        let prog = bpf::load("variant", ProgType::Tracepoint, AttachMode::PerfEvent, code, &fds)
            .unwrap_or_else(|e| panic!("{}\n{}", e.reason, e.log));
        let id = std::fs::read_to_string(format!("/sys/kernel/tracing/events/{point}/id"))
            .ok()
            .and_then(|id| id.trim().parse().ok())
            .unwrap_or_else(|| panic!("no tracepoint {point}"));
        let event = bpf::perf::attach_trace_event(prog.as_fd(), bpf::perf::TraceEvent::Tracepoint { id }, 0)
            .expect("attached");
        attached.push((prog, event));
    }
    if variant == "printf_nowakeup" {
        // Nothing wakes the reader: it takes the records every 10 ms.
        let reader = bpf::ringbuf::RingBufReader::new(&maps[0], |_| {}).expect("ring buffer reader");
        loop {
            std::thread::sleep(std::time::Duration::from_millis(10));
            reader.drain().expect("ring buffer read");
        }
    }
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}
