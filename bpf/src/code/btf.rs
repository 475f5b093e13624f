//! Writing the little BTF steadytrace hands the kernel (`sys/btf.rs` loads it). A program with callback
//! subprograms needs some: the verifier accepts the address of a callback (`ld_imm64` of a subprogram,
//! for `bpf_for_each_map_elem`) only when the program comes with function information naming each
//! subprogram a static function. Also the BTF of a map value holding a `struct bpf_timer`, which the
//! kernel finds in a map only through its BTF. And the `.BTF` of an `--emit-elf` object, where libbpf 1.x
//! reads the definitions of the maps in `.maps` and, where programs have callbacks, its functions, with the
//! `.BTF.ext` naming each function's type (`elf.rs`).

const MAGIC: u16 = 0xeb9f;
/// The length of a `.BTF.ext` header without CO-RE relocations, which libbpf takes.
const EXT_HEADER_SIZE: u32 = 24;
const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
/// A global variable's linkage, as a map definition's `VAR` has it.
const VAR_GLOBAL: u32 = 1;
const LINKAGE_STATIC: u32 = 0;
const LINKAGE_GLOBAL: u32 = 1;
/// `BTF_INT_SIGNED`, in the encoding byte of an int's extra word.
const INT_SIGNED: u32 = 1 << 24;

/// The BTF of a program whose subprograms start at `subprograms` (the main program at 0 comes first):
/// `int`, `int (void)` (the callbacks' prototype), the functions (main first, a global function
/// `int main(void *ctx)` named `main`, as bpftrace declares a probe's), then `void *` and main's prototype.
pub(crate) fn func_info_blob(main: &str, subprograms: &[usize]) -> Vec<u8> {
    // The main function goes by `main`'s name, which fentry:bpf: names it by.
    let strings = [b"\0int\0callback\0ctx\0".as_slice(), main.as_bytes(), b"\0"].concat();
    let (int_name, callback_name, ctx_name, main_name) = (1u32, 5u32, 14u32, 18u32);
    // Types: 1 int, 2 int (void), 3 main, 4.. callbacks, then `void *` and `int (void *ctx)`.
    let (pointer, main_prototype) = (4 + subprograms.len() as u32, 5 + subprograms.len() as u32);
    let mut types: Vec<u32> = vec![int_name, KIND_INT << 24, 4, INT_SIGNED | 32, 0, KIND_FUNC_PROTO << 24, 1];
    types.extend([main_name, KIND_FUNC << 24 | LINKAGE_GLOBAL, main_prototype]);
    for _ in subprograms {
        types.extend([callback_name, KIND_FUNC << 24 | LINKAGE_STATIC, 2]);
    }
    types.extend([0, KIND_PTR << 24, 0]);
    types.extend([0, KIND_FUNC_PROTO << 24 | 1, 1, ctx_name, pointer]);
    blob(&types, &strings)
}

/// The function information records of [`func_info_blob`]'s BTF, as (`insn_off`, `type_id`): one per
/// function, main first.
pub(crate) fn func_info_records(subprograms: &[usize]) -> impl Iterator<Item = (u32, u32)> + '_ {
    // Types: 1 int, 2 the prototype, then one function per program part, main first.
    std::iter::once(0)
        .chain(subprograms.iter().copied())
        .enumerate()
        .map(|(i, start)| (start as u32, 3 + i as u32))
}

/// The BTF of an array map whose value is `struct { struct bpf_timer timer; u64 fields[n]; }`.
pub(crate) struct TimerValueBtf {
    pub blob: Vec<u8>,
    /// The type ids to create the map with.
    pub key_type: u32,
    pub value_type: u32,
    /// The offset of each u64 field in the value (the timer is at 0).
    pub offsets: Vec<usize>,
}

impl TimerValueBtf {
    pub(crate) fn new(fields: usize) -> TimerValueBtf {
        let mut strings = b"\0u32\0u64\0bpf_timer\0__opaque\0value\0timer\0".to_vec();
        let (u32_name, u64_name, timer_name, opaque_name, value_name, timer_member) =
            (1u32, 5u32, 9u32, 19u32, 28u32, 34u32);
        // Types: 1 u32, 2 u64, 3 u64[2], 4 struct bpf_timer (16 bytes), 5 the value.
        let mut types: Vec<u32> = vec![u32_name, KIND_INT << 24, 4, 32, u64_name, KIND_INT << 24, 8, 64];
        types.extend([0, KIND_ARRAY << 24, 0, 2, 1, 2]);
        types.extend([timer_name, KIND_STRUCT << 24 | 1, 16, opaque_name, 3, 0]);
        types.extend([value_name, KIND_STRUCT << 24 | (1 + fields as u32), 16 + 8 * fields as u32]);
        types.extend([timer_member, 4, 0]);
        let offsets: Vec<usize> = (0..fields).map(|i| 16 + 8 * i).collect();
        for (i, &offset) in offsets.iter().enumerate() {
            let name = strings.len() as u32;
            strings.extend(format!("f{i}\0").bytes());
            types.extend([name, 2, offset as u32 * 8]);
        }
        TimerValueBtf { blob: blob(&types, &strings), key_type: 1, value_type: 5, offsets }
    }
}

/// One map definition of `.maps`, as libbpf's `__uint(field, n)` macros write it: a struct whose every
/// member is an `int (*field)[n]`, the number held in the pointed array's length.
pub(crate) struct MapDefinition<'a> {
    pub name: &'a str,
    /// (`type`, `max_entries`, `key_size`, `value_size`..., the number).
    pub fields: Vec<(&'static str, u32)>,
}

impl MapDefinition<'_> {
    /// Its size in `.maps`: a pointer per field.
    pub(crate) fn size(&self) -> u32 {
        8 * self.fields.len() as u32
    }
}

/// A function of an `--emit-elf` object, for its `.BTF` and `.BTF.ext`: a program's main function
/// (`int NAME(void *ctx)`, global, as bpftrace declares a probe's) or a callback (`int NAME(void)`,
/// static: the verifier takes the address of static functions only).
pub(crate) struct Function<'a> {
    pub name: &'a str,
    pub callback: bool,
}

/// An executable section of an object and the functions in it, each at its offset in bytes.
pub(crate) struct FunctionSection<'a> {
    pub name: &'a str,
    pub functions: Vec<(u32, Function<'a>)>,
}

/// The `.BTF` of an object: its maps' definitions in `.maps` one after the other (each a global
/// variable of its definition's struct, all in the `.maps` data section), then the functions of
/// `sections`. With functions, also its `.BTF.ext`: function information naming each function's type
/// by its section and offset, which libbpf hands the kernel with each program (no line information).
pub(crate) fn object_btf(maps: &[MapDefinition], sections: &[FunctionSection]) -> (Vec<u8>, Option<Vec<u8>>) {
    let mut strings = Strings(b"\0int\0.maps\0".to_vec());
    let (int_name, maps_name) = (1u32, 5u32);
    let mut types: Vec<u32> = vec![int_name, KIND_INT << 24, 4, INT_SIGNED | 32];
    let mut next_id = 2u32;
    let mut vars = vec![];
    let mut offset = 0u32;
    for map in maps {
        let mut members = vec![];
        for &(field, number) in &map.fields {
            // `int [number]`, then a pointer to it.
            types.extend([0, KIND_ARRAY << 24, 0, 1, 1, number]);
            types.extend([0, KIND_PTR << 24, next_id]);
            members.push((strings.add(field), next_id + 1));
            next_id += 2;
        }
        types.extend([0, KIND_STRUCT << 24 | members.len() as u32, map.size()]);
        for (i, (name, ptr)) in members.into_iter().enumerate() {
            types.extend([name, ptr, 64 * i as u32]);
        }
        types.extend([strings.add(map.name), KIND_VAR << 24, next_id, VAR_GLOBAL]);
        vars.push((next_id + 1, offset, map.size()));
        offset += map.size();
        next_id += 2;
    }
    types.extend([maps_name, KIND_DATASEC << 24 | vars.len() as u32, offset]);
    for (var, offset, size) in vars {
        types.extend([var, offset, size]);
    }
    next_id += 1;
    if sections.is_empty() {
        return (blob(&types, &strings.0), None);
    }
    // `void *`, `int (void *ctx)`, `int (void)`, then a function each.
    let (pointer, main_prototype, callback_prototype) = (next_id, next_id + 1, next_id + 2);
    types.extend([0, KIND_PTR << 24, 0]);
    types.extend([0, KIND_FUNC_PROTO << 24 | 1, 1, strings.add("ctx"), pointer]);
    types.extend([0, KIND_FUNC_PROTO << 24, 1]);
    next_id += 3;
    // `.BTF.ext`'s function information: the record size, then per section its name, count, records.
    let mut func_info: Vec<u32> = vec![8];
    for section in sections.iter().filter(|s| !s.functions.is_empty()) {
        func_info.extend([strings.add(section.name), section.functions.len() as u32]);
        for (at, function) in &section.functions {
            let (linkage, prototype) = match function.callback {
                true => (LINKAGE_STATIC, callback_prototype),
                false => (LINKAGE_GLOBAL, main_prototype),
            };
            types.extend([strings.add(function.name), KIND_FUNC << 24 | linkage, prototype]);
            func_info.extend([*at, next_id]);
            next_id += 1;
        }
    }
    // The header (magic, version 1, no flags, its length), function information at 0, no line information.
    let func_info_len = 4 * func_info.len() as u32;
    let mut ext = vec![];
    ext.extend(MAGIC.to_ne_bytes());
    ext.extend([1u8, 0]);
    for word in [EXT_HEADER_SIZE, 0, func_info_len, func_info_len, 0].into_iter().chain(func_info) {
        ext.extend(word.to_ne_bytes());
    }
    (blob(&types, &strings.0), Some(ext))
}

/// A BTF string section being written: each name's offset, a name written once.
struct Strings(Vec<u8>);

impl Strings {
    fn add(&mut self, name: &str) -> u32 {
        let wanted: Vec<u8> = name.bytes().chain([0]).collect();
        // Offsets of whole names only: just after a NUL.
        let found = (1..self.0.len())
            .find(|&at| self.0[at - 1] == 0 && self.0[at..].starts_with(&wanted))
            .map(|at| at as u32);
        found.unwrap_or_else(|| {
            let at = self.0.len() as u32;
            self.0.extend(wanted);
            at
        })
    }
}

/// A BTF blob: the header, the type words, the string section.
fn blob(types: &[u32], strings: &[u8]) -> Vec<u8> {
    let type_len = types.len() as u32 * 4;
    let mut blob = vec![];
    blob.extend(MAGIC.to_ne_bytes());
    blob.extend([1u8, 0]); // version, flags
    for word in [24u32, 0, type_len, type_len, strings.len() as u32] {
        blob.extend(word.to_ne_bytes());
    }
    for word in types {
        blob.extend(word.to_ne_bytes());
    }
    blob.extend(strings);
    blob
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(bytes: &[u8]) -> Vec<u32> {
        bytes.chunks(4).map(|w| u32::from_ne_bytes(w.try_into().unwrap())).collect()
    }

    #[test]
    fn map_definitions_are_pointers_to_arrays_in_a_maps_datasec() {
        let maps = [
            MapDefinition { name: "events", fields: vec![("type", 27), ("max_entries", 4096)] },
            MapDefinition { name: "AT_", fields: vec![("type", 1), ("max_entries", 10)] },
        ];
        let (blob, ext) = object_btf(&maps, &[]);
        assert!(ext.is_none(), "no functions, no .BTF.ext");
        let header = words(&blob[..24]);
        assert_eq!((header[0] & 0xffff, header[1]), (MAGIC as u32, 24));
        let types = words(&blob[24..24 + header[3] as usize]);
        let strings = &blob[24 + header[4] as usize..];
        let name = |offset: u32| {
            let rest = &strings[offset as usize..];
            std::str::from_utf8(&rest[..rest.iter().position(|&b| b == 0).unwrap()]).unwrap().to_string()
        };
        // int; then per map and field `int[n]` and a pointer to it, the struct, its variable.
        assert_eq!(&types[4..13], [0, KIND_ARRAY << 24, 0, 1, 1, 27, 0, KIND_PTR << 24, 2]);
        assert_eq!(&types[22..25], [0, KIND_STRUCT << 24 | 2, 16]);
        assert_eq!((name(types[25]), types[26], types[27]), ("type".into(), 3, 0));
        let datasec = &types[types.len() - 9..];
        assert_eq!((name(datasec[0]), datasec[1], datasec[2]), (".maps".into(), KIND_DATASEC << 24 | 2, 32));
        // The two variables, one after the other.
        assert_eq!(&datasec[3..], [7, 0, 16, 13, 16, 16]);
        assert_eq!(name(types[31]), "events");
    }

    #[test]
    fn btf_ext_names_each_function_by_section_and_offset() {
        let function = |name, callback| Function { name, callback };
        let sections = [
            FunctionSection { name: "kprobe/f", functions: vec![(0, function("kprobe_f_1", false))] },
            FunctionSection {
                name: ".text",
                functions: vec![(0, function("cb_1", true)), (64, function("cb_2", true))],
            },
        ];
        let (blob, ext) = object_btf(&[], &sections);
        let ext = ext.unwrap();
        assert_eq!(u16::from_ne_bytes([ext[0], ext[1]]), MAGIC);
        // Header: its length, function information at 0 (11 words), no line information.
        assert_eq!(words(&ext[4..24]), [24, 0, 44, 44, 0]);
        let info = words(&ext[24..]);
        let header = words(&blob[..24]);
        let types = words(&blob[24..24 + header[3] as usize]);
        let strings = &blob[24 + header[4] as usize..];
        let name = |offset: u32| {
            let rest = &strings[offset as usize..];
            std::str::from_utf8(&rest[..rest.iter().position(|&b| b == 0).unwrap()]).unwrap().to_string()
        };
        // Types: 1 int, 2 the `.maps` section, 3 `void *`, 4 `int (void *ctx)`, 5 `int (void)`, 6.. functions.
        assert_eq!((info[0], name(info[1]), info[2], info[3], info[4]), (8, "kprobe/f".into(), 1, 0, 6));
        assert_eq!((name(info[5]), &info[6..]), (".text".into(), [2, 0, 7, 64, 8].as_slice()));
        let function_type = |id: usize| &types[types.len() - 3 * (9 - id)..][..3];
        assert_eq!(function_type(6)[1..], [KIND_FUNC << 24 | LINKAGE_GLOBAL, 4]);
        assert_eq!(function_type(7)[1..], [KIND_FUNC << 24 | LINKAGE_STATIC, 5]);
        assert_eq!(name(function_type(8)[0]), "cb_2");
    }
}
