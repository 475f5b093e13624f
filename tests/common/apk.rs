//! An Android APK made by a test: a library stored uncompressed at a page-aligned offset of a zip (as zipalign
//! leaves it), and a runner that maps it straight from the APK with PROT_EXEC, as Android's loader does, and
//! calls into it. tests/apk.rs runs it on the host, tests/guest.rs in the arm64 guest.

use object::{Object, ObjectSegment, ObjectSymbol};

/// `apk_leaf` is static so that `apk_answer` calls it directly: the mapped library is not relocated.
pub const LIBRARY: &str = r#"
__attribute__((noinline)) static int apk_leaf(int x) { __asm__ volatile(""); return x * 3 + 1; }
int apk_answer(int x) { return apk_leaf(x) + apk_leaf(1); }
int apk_other(int x) { return x - 1; }
"#;

/// Maps SIZE bytes at OFFSET of APK (the stored library) executable, from the APK itself, and calls the
/// function at file offset FUNCTION of the library COUNT times.
pub const RUNNER: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
int main(int argc, char **argv) {
    if (argc != 6) return 2;
    int fd = open(argv[1], O_RDONLY);
    long offset = strtol(argv[2], 0, 0), size = strtol(argv[3], 0, 0), function = strtol(argv[4], 0, 0);
    char *base = fd < 0 ? MAP_FAILED : mmap(0, size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, offset);
    if (base == MAP_FAILED) { perror(argv[1]); return 1; }
    int (*fn)(int) = (int (*)(int))(base + function);
    int sum = 0;
    for (int i = 0; i < atoi(argv[5]); i++) sum += fn(i);
    printf("%d\n", sum);
    return 0;
}
"#;

/// CRC-32 (IEEE), which zip headers carry.
fn crc32(data: &[u8]) -> u32 {
    !data.iter().fold(!0u32, |crc, &byte| {
        (0..8).fold(crc ^ u32::from(byte), |crc, _| (crc >> 1) ^ (0xedb8_8320 & (crc & 1).wrapping_neg()))
    })
}

/// A zip of `(name, data, compressed)` entries. A compressed entry is real deflate (of stored blocks); a
/// stored one starts at a multiple of `align`, reached by padding the local header's extra field as
/// zipalign does.
pub fn zip(entries: &[(&str, &[u8], bool)], align: usize) -> Vec<u8> {
    let (mut out, mut central) = (vec![], vec![]);
    let u16s =
        |v: &mut Vec<u8>, values: &[usize]| values.iter().for_each(|&n| v.extend((n as u16).to_le_bytes()));
    let u32s =
        |v: &mut Vec<u8>, values: &[usize]| values.iter().for_each(|&n| v.extend((n as u32).to_le_bytes()));
    for &(name, data, compressed) in entries {
        let stored: Vec<u8> = match compressed {
            false => data.to_vec(),
            true => {
                let mut deflated = vec![];
                let blocks: Vec<&[u8]> = data.chunks(0xffff).collect();
                for (i, block) in blocks.iter().enumerate() {
                    deflated.push(u8::from(i + 1 == blocks.len()));
                    u16s(&mut deflated, &[block.len(), !block.len() & 0xffff]);
                    deflated.extend(*block);
                }
                deflated
            }
        };
        let header = out.len();
        let pad = match compressed {
            true => 0,
            false => (align - (header + 30 + name.len()) % align) % align,
        };
        let method = if compressed { 8 } else { 0 };
        let fields = |v: &mut Vec<u8>| {
            u16s(v, &[20, 0, method, 0, 0]);
            u32s(v, &[crc32(data) as usize, stored.len(), data.len()]);
        };
        u32s(&mut out, &[0x0403_4b50]);
        fields(&mut out);
        u16s(&mut out, &[name.len(), pad]);
        out.extend(name.as_bytes());
        out.extend(vec![0; pad]);
        out.extend(&stored);
        u32s(&mut central, &[0x0201_4b50]);
        u16s(&mut central, &[20]);
        fields(&mut central);
        u16s(&mut central, &[name.len(), 0, 0, 0, 0]);
        u32s(&mut central, &[0, header]);
        central.extend(name.as_bytes());
    }
    let offset = out.len();
    out.extend(&central);
    u32s(&mut out, &[0x0605_4b50]);
    u16s(&mut out, &[0, 0, entries.len(), entries.len()]);
    u32s(&mut out, &[central.len(), offset]);
    u16s(&mut out, &[0]);
    out
}

/// The file offset of `function`'s code in the ELF file `library`.
pub fn file_offset(library: &[u8], function: &str) -> u64 {
    let elf = object::File::parse(library).unwrap();
    let address = elf.symbols().find(|s| s.name() == Ok(function)).unwrap().address();
    elf.segments()
        .find_map(|s| {
            let (offset, size) = s.file_range();
            (s.address() <= address && address < s.address() + size).then(|| offset + address - s.address())
        })
        .unwrap()
}
