//! An ELF relocatable object of BPF programs and their maps, as libbpf opens one (`--emit-elf`): a
//! section per program named for its type as libbpf's section table has it (`tracepoint/CAT/NAME`,
//! `raw_tracepoint`, `kprobe/FN`...), programs' callbacks in `.text`, a `.rel` section per code section
//! pointing each map load at its map's symbol and each call of a callback at its function, `license`, the maps' definitions in `.maps` with the BTF libbpf 1.x reads them from, and a map
//! that programs address by value (`ld_map_value`, a one-element array) as a `.data.NAME` section of its
//! own, which libbpf makes a one-element array map and whose loads it patches to its value's address.
//! With callbacks, `.BTF.ext` names each function's BTF type (`btf.rs` writes both).

use super::btf::{self, MapDefinition};
use super::insn::{class, Code, Insn, Size, MODE_IMM, OP_CALL, PSEUDO_CALL, PSEUDO_FUNC, PSEUDO_MAP_VALUE};
use super::map::{MapKind, MapSpec};
use super::prog::{AttachMode, ProgType};
use std::ops::Range;

/// One program of the object.
pub struct Program<'a> {
    /// Its symbol, which libbpf names the program by (and bpftool pins it by): unique in the object.
    pub name: String,
    /// The section libbpf reads the program's type from ([`section`]).
    pub section: String,
    pub code: &'a Code,
}

/// The section name libbpf gives the type of program `prog_type` attached as `mode`, with what follows
/// its `/` (a tracepoint's `CAT/NAME`, a function's name) when it is known: libbpf needs it to attach, and
/// a trampoline's program needs it to load.
pub fn section(prog_type: ProgType, mode: AttachMode, target: Option<&str>) -> String {
    let kind = match (prog_type, mode) {
        (ProgType::Kprobe, AttachMode::UprobeMulti) => "uprobe.multi",
        (ProgType::Kprobe, AttachMode::KprobeMulti) => "kprobe.multi",
        (ProgType::Kprobe, AttachMode::KprobeSession) => "kprobe.session",
        (ProgType::Kprobe, _) => "kprobe",
        (ProgType::Tracing, AttachMode::Iterator { .. }) => "iter",
        (ProgType::Tracing, AttachMode::Trampoline { exit: true, .. }) => "fexit",
        (ProgType::Tracing, _) => "fentry",
        (ProgType::Tracepoint, _) => "tracepoint",
        (ProgType::PerfEvent, _) => "perf_event",
        (ProgType::RawTracepoint, _) => "raw_tracepoint",
        (ProgType::SchedCls, _) => "tc",
    };
    match target {
        Some(target) => format!("{kind}/{target}"),
        None => kind.to_string(),
    }
}

const SHT_PROGBITS: u32 = 1;
const SHT_SYMTAB: u32 = 2;
const SHT_STRTAB: u32 = 3;
const SHT_REL: u32 = 9;
const SHF_WRITE: u64 = 1;
const SHF_ALLOC: u64 = 2;
const SHF_EXECINSTR: u64 = 4;
const SHF_INFO_LINK: u64 = 0x40;
const STT_OBJECT: u8 = 1;
const STT_FUNC: u8 = 2;
const STB_GLOBAL: u8 = 1;
const STV_DEFAULT: u8 = 0;
/// A global symbol seen outside its object as if static: libbpf marks the function static in its BTF.
const STV_HIDDEN: u8 = 2;
const EM_BPF: u16 = 247;
/// `R_BPF_64_64`: the 64-bit immediate of an `ld_imm64`.
const R_BPF_64_64: u64 = 1;
/// `R_BPF_64_32`: the 32-bit immediate of a call.
const R_BPF_64_32: u64 = 10;
const HEADER_SIZE: usize = 64;
const SECTION_HEADER_SIZE: usize = 64;
const SYMBOL_SIZE: usize = 24;
const REL_SIZE: usize = 16;

/// The object holding `programs` and `maps` (their relocations name maps by index in `maps`). Programs
/// whose sections are named alike share one section, one after the other, as clang places the functions
/// of one `SEC()`. A program's callbacks (its subprograms) are functions of `.text`, as libbpf takes
/// them: hidden global symbols (`NAME_callback_N`) that its calls and `ld_imm64`s of their addresses are
/// relocated against; libbpf appends each program the callbacks it uses. Then `.BTF` also declares every
/// function (a callback static, which the verifier wants of a callback's address) and `.BTF.ext` names
/// each function's type by section and offset, the function information libbpf hands the kernel.
pub fn object(programs: &[Program], maps: &[MapSpec]) -> Result<Vec<u8>, String> {
    let by_value = maps_by_value(programs, maps)?;
    let mut strings = vec![0u8];
    let mut sections: Vec<Section> = vec![];
    let mut symbols: Vec<Symbol> = vec![];
    // Symbols: the programs, then the maps in map order, LICENSE, then the callbacks in program order.
    let map_symbol = |map: usize| (1 + programs.len() + map) as u64;
    let mut callback_symbols = vec![];
    let mut next_callback = 2 + programs.len() + maps.len();
    for program in programs {
        callback_symbols.push(next_callback);
        next_callback += program.code.subprograms.len();
    }
    let placer = Placer { programs, map_symbol: &map_symbol, callback_symbols: &callback_symbols };
    // The sections holding programs, each with its programs.
    let mut groups: Vec<(&str, Vec<usize>)> = vec![];
    for (i, program) in programs.iter().enumerate() {
        match groups.iter_mut().find(|(name, _)| *name == program.section) {
            Some((_, members)) => members.push(i),
            None => groups.push((&program.section, vec![i])),
        }
    }
    let mut rels = vec![];
    // Each program's section and offset (in instructions) in it.
    let mut placed = vec![(0, 0); programs.len()];
    for (name, members) in &groups {
        let (mut code, mut entries) = (vec![], vec![]);
        for &i in members {
            placed[i].1 = code.len() / 8;
            placer.place(i, 0..main_end(programs[i].code), code.len() / 8, &mut code, &mut entries);
        }
        let mut section = Section::new(&mut strings, name, SHT_PROGBITS, code);
        section.flags = SHF_ALLOC | SHF_EXECINSTR;
        sections.push(section);
        for &i in members {
            placed[i].0 = sections.len();
        }
        if !entries.is_empty() {
            rels.push((format!(".rel{name}"), sections.len(), entries));
        }
    }
    for (program, &(section, offset)) in programs.iter().zip(&placed) {
        symbols.push(Symbol {
            name: add(&mut strings, &program.name),
            kind: STT_FUNC,
            hidden: false,
            section,
            value: 8 * offset as u64,
            size: 8 * main_end(program.code) as u64,
        });
    }
    // `.text`: the callbacks, each program's one after the other, as (program, callback number, offset, length).
    let mut callbacks = vec![];
    let (mut text, mut text_entries) = (vec![], vec![]);
    for (i, program) in programs.iter().enumerate() {
        for (k, insns) in callback_ranges(program.code).enumerate() {
            callbacks.push((i, k, text.len() / 8, insns.len()));
            placer.place(i, insns, text.len() / 8, &mut text, &mut text_entries);
        }
    }
    let text_index = match text.is_empty() {
        true => None,
        false => {
            let mut section = Section::new(&mut strings, ".text", SHT_PROGBITS, text);
            section.flags = SHF_ALLOC | SHF_EXECINSTR;
            sections.push(section);
            if !text_entries.is_empty() {
                rels.push((".rel.text".to_string(), sections.len(), text_entries));
            }
            Some(sections.len())
        }
    };
    for (name, target, entries) in rels {
        let mut entries_bytes = vec![];
        for (offset, symbol, kind) in entries {
            entries_bytes.extend(offset.to_le_bytes());
            entries_bytes.extend((symbol << 32 | kind).to_le_bytes());
        }
        let mut rel = Section::new(&mut strings, &name, SHT_REL, entries_bytes);
        (rel.flags, rel.info, rel.entsize) = (SHF_INFO_LINK, target as u32, REL_SIZE as u64);
        sections.push(rel);
    }
    let mut license = Section::new(&mut strings, "license", SHT_PROGBITS, b"GPL\0".to_vec());
    license.flags = SHF_ALLOC | SHF_WRITE;
    license.align = 1;
    sections.push(license);
    let license_index = sections.len();
    let definitions: Vec<MapDefinition> =
        maps.iter().zip(&by_value).filter(|(_, by_value)| !**by_value).map(|(m, _)| definition(m)).collect();
    let mut maps_section = Section::new(
        &mut strings,
        ".maps",
        SHT_PROGBITS,
        vec![0; definitions.iter().map(|d| d.size() as usize).sum()],
    );
    maps_section.flags = SHF_ALLOC | SHF_WRITE;
    sections.push(maps_section);
    let maps_index = sections.len();
    let mut offset = 0;
    for (map, by_value) in maps.iter().zip(&by_value) {
        let (section, value, size) = if *by_value {
            let mut data = Section::new(
                &mut strings,
                &format!(".data.{}", map.name),
                SHT_PROGBITS,
                vec![0; map.value_size as usize],
            );
            data.flags = SHF_ALLOC | SHF_WRITE;
            sections.push(data);
            (sections.len(), 0, map.value_size as u64)
        } else {
            let size = definition(map).size() as u64;
            offset += size;
            (maps_index, offset - size, size)
        };
        let name = add(&mut strings, &map.name);
        symbols.push(Symbol { name, kind: STT_OBJECT, hidden: false, section, value, size });
    }
    let name = add(&mut strings, "LICENSE");
    symbols.push(Symbol { name, kind: STT_OBJECT, hidden: false, section: license_index, value: 0, size: 4 });
    let callback_names: Vec<String> =
        callbacks.iter().map(|&(i, k, _, _)| callback_name(&programs[i].name, k)).collect();
    for (&(_, _, offset, len), name) in callbacks.iter().zip(&callback_names) {
        symbols.push(Symbol {
            name: add(&mut strings, name),
            kind: STT_FUNC,
            hidden: true,
            section: text_index.expect("callbacks are in .text"),
            value: 8 * offset as u64,
            size: 8 * len as u64,
        });
    }
    // With callbacks, every function in `.BTF` and `.BTF.ext`; without, neither has any.
    let mut functions = vec![];
    if !callbacks.is_empty() {
        for (name, members) in &groups {
            let of = members.iter().map(|&i| {
                (8 * placed[i].1 as u32, btf::Function { name: &programs[i].name, callback: false })
            });
            functions.push(btf::FunctionSection { name, functions: of.collect() });
        }
        let of = callbacks
            .iter()
            .zip(&callback_names)
            .map(|(&(_, _, offset, _), name)| (8 * offset as u32, btf::Function { name, callback: true }));
        functions.push(btf::FunctionSection { name: ".text", functions: of.collect() });
    }
    let (btf_blob, btf_ext) = btf::object_btf(&definitions, &functions);
    let mut btf_section = Section::new(&mut strings, ".BTF", SHT_PROGBITS, btf_blob);
    btf_section.align = 4;
    sections.push(btf_section);
    if let Some(ext) = btf_ext {
        let mut ext_section = Section::new(&mut strings, ".BTF.ext", SHT_PROGBITS, ext);
        ext_section.align = 4;
        sections.push(ext_section);
    }
    let symtab_index = sections.len() + 1;
    let mut symtab_bytes = vec![0; SYMBOL_SIZE];
    for symbol in &symbols {
        symtab_bytes.extend(symbol.name.to_le_bytes());
        symtab_bytes.push(STB_GLOBAL << 4 | symbol.kind);
        symtab_bytes.push(if symbol.hidden { STV_HIDDEN } else { STV_DEFAULT });
        symtab_bytes.extend((symbol.section as u16).to_le_bytes());
        symtab_bytes.extend(symbol.value.to_le_bytes());
        symtab_bytes.extend(symbol.size.to_le_bytes());
    }
    let mut symtab = Section::new(&mut strings, ".symtab", SHT_SYMTAB, symtab_bytes);
    // `info`: the first global symbol; all but the null one are global.
    (symtab.link, symtab.info, symtab.entsize) = (symtab_index as u32 + 1, 1, SYMBOL_SIZE as u64);
    sections.push(symtab);
    for rel in sections.iter_mut().filter(|s| s.kind == SHT_REL) {
        rel.link = symtab_index as u32;
    }
    // The string table last, once every name is in it (section names too: it is also `e_shstrndx`).
    let strtab_name = add(&mut strings, ".strtab");
    sections.push(Section {
        name: strtab_name,
        align: 1,
        ..Section::new(&mut vec![], "", SHT_STRTAB, strings)
    });
    Ok(layout(&sections))
}

/// The name of a program's callback number `k` (from 0): `NAME_callback_1`...
fn callback_name(program: &str, k: usize) -> String {
    format!("{program}_callback_{}", k + 1)
}

/// Where a program's main function ends: at its first callback, else at its end.
fn main_end(code: &Code) -> usize {
    code.subprograms.first().copied().unwrap_or(code.insns.len())
}

/// The instructions of each of a program's callbacks.
fn callback_ranges(code: &Code) -> impl Iterator<Item = Range<usize>> + '_ {
    let ends = code.subprograms.iter().skip(1).copied().chain([code.insns.len()]);
    code.subprograms.iter().copied().zip(ends).map(|(start, end)| start..end)
}

/// Places instructions of programs in sections, with their relocations as (offset in bytes, symbol,
/// type): a map load's against its map, a call of a callback (`R_BPF_64_32`, immediate -1) or a load
/// of its address (`R_BPF_64_64`, immediate 0) against the callback's function.
struct Placer<'a, F: Fn(usize) -> u64> {
    programs: &'a [Program<'a>],
    map_symbol: &'a F,
    /// The symbol of each program's first callback; the others follow it.
    callback_symbols: &'a [usize],
}

impl<F: Fn(usize) -> u64> Placer<'_, F> {
    /// Appends the instructions `insns` of program `program` to `code`, where they start at instruction
    /// `base` of their section, and their relocations to `relocations`.
    fn place(
        &self,
        program: usize,
        insns: Range<usize>,
        base: usize,
        code: &mut Vec<u8>,
        relocations: &mut Vec<(u64, u64, u64)>,
    ) {
        let of = self.programs[program].code;
        let offset = |at: usize| 8 * (base + at - insns.start) as u64;
        let mut found = vec![];
        for reloc in of.map_relocs.iter().filter(|r| insns.contains(&r.insn)) {
            found.push((offset(reloc.insn), (self.map_symbol)(reloc.map), R_BPF_64_64));
        }
        for at in insns.clone() {
            let mut insn = of.insns[at];
            let call = insn.code == class::JMP | OP_CALL && insn.src().0 == PSEUDO_CALL;
            let address = insn.code == class::LD | Size::DW as u8 | MODE_IMM && insn.src().0 == PSEUDO_FUNC;
            if call || address {
                let target = (at as i64 + insn.imm as i64 + 1) as usize;
                let k = of.subprograms.binary_search(&target).expect("a callback starts there");
                let symbol = (self.callback_symbols[program] + k) as u64;
                found.push((offset(at), symbol, if call { R_BPF_64_32 } else { R_BPF_64_64 }));
                insn.imm = if call { -1 } else { 0 };
            }
            code.extend(insn_bytes(&insn));
        }
        found.sort_unstable();
        relocations.extend(found);
    }
}

/// Which maps programs address by value: each must be a one-element array, never also loaded as a map.
fn maps_by_value(programs: &[Program], maps: &[MapSpec]) -> Result<Vec<bool>, String> {
    let mut by_value = vec![false; maps.len()];
    let mut as_map = vec![false; maps.len()];
    for program in programs {
        for reloc in &program.code.map_relocs {
            let map = maps.get(reloc.map).ok_or_else(|| {
                format!("program {} names map {}, which is not there", program.name, reloc.map)
            })?;
            if program.code.insns[reloc.insn].src().0 == PSEUDO_MAP_VALUE {
                if map.kind != MapKind::Array || map.max_entries != 1 {
                    return Err(format!(
                        "map {} is addressed by value but is no one-element array",
                        map.name
                    ));
                }
                by_value[reloc.map] = true;
            } else {
                as_map[reloc.map] = true;
            }
        }
    }
    match maps.iter().zip(by_value.iter().zip(&as_map)).find(|(_, (value, map))| **value && **map) {
        Some((map, _)) => Err(format!("map {} is addressed both by value and as a map", map.name)),
        None => Ok(by_value),
    }
}

/// A map's definition as `.maps` holds it; a ring buffer has no key or value size.
fn definition(map: &MapSpec) -> MapDefinition<'_> {
    let mut fields = vec![("type", map.kind.number()), ("max_entries", map.max_entries)];
    if map.kind != MapKind::RingBuf {
        fields.extend([("key_size", map.key_size), ("value_size", map.value_size)]);
    }
    MapDefinition { name: &map.name, fields }
}

fn insn_bytes(insn: &Insn) -> [u8; 8] {
    let [off0, off1] = insn.off.to_le_bytes();
    let [i0, i1, i2, i3] = insn.imm.to_le_bytes();
    [insn.code, insn.regs, off0, off1, i0, i1, i2, i3]
}

/// Appends `name` to a string table, giving its offset.
fn add(strings: &mut Vec<u8>, name: &str) -> u32 {
    let at = strings.len() as u32;
    strings.extend(name.bytes().chain([0]));
    at
}

struct Symbol {
    name: u32,
    kind: u8,
    /// Hidden (`STV_HIDDEN`), as a callback is.
    hidden: bool,
    section: usize,
    value: u64,
    size: u64,
}

struct Section {
    name: u32,
    kind: u32,
    flags: u64,
    link: u32,
    info: u32,
    align: u64,
    entsize: u64,
    data: Vec<u8>,
}

impl Section {
    fn new(strings: &mut Vec<u8>, name: &str, kind: u32, data: Vec<u8>) -> Section {
        Section { name: add(strings, name), kind, flags: 0, link: 0, info: 0, align: 8, entsize: 0, data }
    }
}

/// The file: the ELF header, each section's data aligned, then the section headers (index 0 the null
/// section, so that `sections[i]` is section `i + 1`).
fn layout(sections: &[Section]) -> Vec<u8> {
    let mut file = vec![0; HEADER_SIZE];
    let mut offsets = vec![];
    for section in sections {
        file.resize(file.len().next_multiple_of(section.align as usize), 0);
        offsets.push(file.len() as u64);
        file.extend(&section.data);
    }
    file.resize(file.len().next_multiple_of(8), 0);
    let section_headers = file.len() as u64;
    file.extend([0; SECTION_HEADER_SIZE]);
    for (section, offset) in sections.iter().zip(offsets) {
        file.extend(section.name.to_le_bytes());
        file.extend(section.kind.to_le_bytes());
        file.extend(section.flags.to_le_bytes());
        file.extend(0u64.to_le_bytes()); // address
        file.extend(offset.to_le_bytes());
        file.extend((section.data.len() as u64).to_le_bytes());
        file.extend(section.link.to_le_bytes());
        file.extend(section.info.to_le_bytes());
        file.extend(section.align.to_le_bytes());
        file.extend(section.entsize.to_le_bytes());
    }
    // ELFCLASS64, little-endian, version 1.
    let mut header = vec![0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    header.extend(1u16.to_le_bytes()); // ET_REL
    header.extend(EM_BPF.to_le_bytes());
    header.extend(1u32.to_le_bytes());
    header.extend([0u8; 16]); // entry, program headers
    header.extend(section_headers.to_le_bytes());
    header.extend(0u32.to_le_bytes()); // flags
    header.extend((HEADER_SIZE as u16).to_le_bytes());
    header.extend([0u8; 4]); // program header size and count
    header.extend((SECTION_HEADER_SIZE as u16).to_le_bytes());
    header.extend((sections.len() as u16 + 1).to_le_bytes());
    header.extend((sections.len() as u16).to_le_bytes()); // the string table, last
    file[..HEADER_SIZE].copy_from_slice(&header);
    file
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::insn::{Asm, Reg};
    use crate::code::prog::TrampolineTarget;
    use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget};

    fn map(name: &str, kind: MapKind, value_size: u32, max_entries: u32) -> MapSpec {
        MapSpec { name: name.into(), kind, key_size: 4, value_size, max_entries }
    }

    /// `r1 = map 1; r2 = value of map 2; r0 = 0; exit`.
    fn code() -> Code {
        let mut asm = Asm::new();
        asm.ld_map(Reg::R1, 1);
        asm.ld_map_value(Reg::R2, 2);
        asm.mov64_imm(Reg::R0, 0);
        asm.exit();
        asm.finish().unwrap()
    }

    #[test]
    fn names_sections_as_libbpf_reads_them() {
        let tracepoint =
            section(ProgType::Tracepoint, AttachMode::PerfEvent, Some("syscalls/sys_enter_read"));
        assert_eq!(tracepoint, "tracepoint/syscalls/sys_enter_read");
        assert_eq!(section(ProgType::RawTracepoint, AttachMode::PerfEvent, None), "raw_tracepoint");
        let fexit = AttachMode::Trampoline { btf_id: 7, exit: true, target: TrampolineTarget::Kernel };
        assert_eq!(section(ProgType::Tracing, fexit, Some("vfs_read")), "fexit/vfs_read");
    }

    #[test]
    fn an_object_holds_programs_relocations_maps_and_their_btf() {
        let code = code();
        let programs = [Program { name: "begin_0".into(), section: "raw_tracepoint".into(), code: &code }];
        let maps = [
            MapSpec { key_size: 0, ..map("events", MapKind::RingBuf, 0, 4096) },
            map("AT_h", MapKind::Hash, 8, 1024),
            map("exited", MapKind::Array, 8, 1),
        ];
        let bytes = object(&programs, &maps).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        assert_eq!(file.architecture(), object::Architecture::Bpf);
        assert!(file.is_little_endian());
        let names: Vec<&str> = file.sections().map(|s| s.name().unwrap()).collect();
        let expected = [
            "raw_tracepoint",
            ".relraw_tracepoint",
            "license",
            ".maps",
            ".data.exited",
            ".BTF",
            ".symtab",
            ".strtab",
        ];
        assert_eq!(names, expected);
        let program = file.section_by_name("raw_tracepoint").unwrap();
        assert_eq!(program.data().unwrap().len(), 8 * code.insns.len());
        assert_eq!(file.section_by_name("license").unwrap().data().unwrap(), b"GPL\0");
        // Two maps of `.maps`: a ring buffer's two fields, a hash's four, a pointer each.
        assert_eq!(file.section_by_name(".maps").unwrap().size(), 16 + 32);
        assert_eq!(file.section_by_name(".data.exited").unwrap().size(), 8);
        let symbols: Vec<(String, u64)> =
            file.symbols().map(|s| (s.name().unwrap().to_string(), s.address())).collect();
        let expected = [("begin_0", 0), ("events", 0), ("AT_h", 16), ("exited", 0), ("LICENSE", 0)];
        assert_eq!(symbols, expected.map(|(n, v)| (n.to_string(), v)));
        let relocations: Vec<(u64, String)> = program
            .relocations()
            .map(|(offset, reloc)| match reloc.target() {
                RelocationTarget::Symbol(i) => {
                    (offset, file.symbol_by_index(i).unwrap().name().unwrap().into())
                }
                _ => panic!("a relocation to no symbol"),
            })
            .collect();
        assert_eq!(relocations, [(0, "AT_h".to_string()), (16, "exited".to_string())]);
    }

    #[test]
    fn callbacks_are_hidden_functions_of_text_relocated_against() {
        // main: `r2 = &callback; call callback; r0 = 0; exit`; the callback loads map 1 and returns.
        let mut asm = Asm::new();
        let callback = asm.new_label();
        asm.ld_func(Reg::R2, callback);
        asm.call_local(callback);
        asm.mov64_imm(Reg::R0, 0);
        asm.exit();
        asm.bind(callback);
        asm.ld_map(Reg::R1, 1);
        asm.mov64_imm(Reg::R0, 0);
        asm.exit();
        let with_callback = asm.finish().unwrap();
        let plain = code();
        let programs = [
            Program { name: "begin_1".into(), section: "raw_tracepoint".into(), code: &with_callback },
            Program { name: "end_2".into(), section: "raw_tracepoint".into(), code: &plain },
        ];
        let maps = [
            MapSpec { key_size: 0, ..map("events", MapKind::RingBuf, 0, 4096) },
            map("AT_h", MapKind::Hash, 8, 1024),
            map("exited", MapKind::Array, 8, 1),
        ];
        let bytes = object(&programs, &maps).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        let names: Vec<&str> = file.sections().map(|s| s.name().unwrap()).collect();
        let expected = [
            "raw_tracepoint",
            ".text",
            ".relraw_tracepoint",
            ".rel.text",
            "license",
            ".maps",
            ".data.exited",
            ".BTF",
            ".BTF.ext",
            ".symtab",
            ".strtab",
        ];
        assert_eq!(names, expected);
        // One section for both programs: the first's main function (5 instructions), then the second.
        let section = file.section_by_name("raw_tracepoint").unwrap();
        assert_eq!(section.size(), 8 * (5 + plain.insns.len() as u64));
        let symbol = |name: &str| file.symbols().find(|s| s.name() == Ok(name)).unwrap();
        assert_eq!((symbol("begin_1").address(), symbol("end_2").address()), (0, 40));
        let callback = symbol("begin_1_callback_1");
        assert_eq!((callback.address(), callback.size()), (0, 32));
        assert_eq!(callback.section_index(), file.section_by_name(".text").map(|s| s.index()));
        let relocations = |section: &object::Section| -> Vec<(u64, String, u32)> {
            section
                .relocations()
                .map(|(offset, reloc)| match (reloc.target(), reloc.flags()) {
                    (RelocationTarget::Symbol(i), object::RelocationFlags::Elf { r_type }) => {
                        (offset, file.symbol_by_index(i).unwrap().name().unwrap().into(), r_type.0)
                    }
                    _ => panic!("a relocation to no symbol"),
                })
                .collect()
        };
        let callback_name = "begin_1_callback_1".to_string();
        let expected = [
            (0, callback_name.clone(), 1),
            (16, callback_name, 10),
            (40, "AT_h".to_string(), 1),
            (56, "exited".to_string(), 1),
        ];
        assert_eq!(relocations(&section), expected);
        let text = file.section_by_name(".text").unwrap();
        assert_eq!(relocations(&text), [(0, "AT_h".to_string(), 1)]);
        // Immediates as libbpf reads them: a function symbol's load 0, its call -1.
        let data = section.data().unwrap();
        assert_eq!(i32::from_le_bytes(data[4..8].try_into().unwrap()), 0);
        assert_eq!(i32::from_le_bytes(data[20..24].try_into().unwrap()), -1);
    }
}
