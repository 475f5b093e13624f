//! Writing the little BTF steadytrace hands the kernel (`sys/btf.rs` loads it). A program with callback
//! subprograms needs some: the verifier accepts the address of a callback (`ld_imm64` of a subprogram,
//! for `bpf_for_each_map_elem`) only when the program comes with function information naming each
//! subprogram a static function. Also the BTF of a map value holding a `struct bpf_timer`, which the
//! kernel finds in a map only through its BTF.

const MAGIC: u16 = 0xeb9f;
const KIND_INT: u32 = 1;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const LINKAGE_STATIC: u32 = 0;
const LINKAGE_GLOBAL: u32 = 1;
/// `BTF_INT_SIGNED`, in the encoding byte of an int's extra word.
const INT_SIGNED: u32 = 1 << 24;

/// The BTF of a program whose subprograms start at `subprograms` (the main program at 0 comes first):
/// `int`, `int (void)`, and `subprograms.len() + 1` functions of that prototype.
pub(crate) fn func_info_blob(subprograms: &[usize]) -> Vec<u8> {
    let strings = b"\0int\0main\0callback\0";
    let (int_name, main_name, callback_name) = (1u32, 5u32, 10u32);
    let mut types: Vec<u32> = vec![int_name, KIND_INT << 24, 4, INT_SIGNED | 32, 0, KIND_FUNC_PROTO << 24, 1];
    types.extend([main_name, KIND_FUNC << 24 | LINKAGE_GLOBAL, 2]);
    for _ in subprograms {
        types.extend([callback_name, KIND_FUNC << 24 | LINKAGE_STATIC, 2]);
    }
    blob(&types, strings)
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
