//! Uprobes into a library stored inside an Android APK (`uprobe:APK!/lib/ABI/libfoo.so:FN`): an APK made
//! here (a zip whose library is stored uncompressed at a page-aligned offset), run by a process that maps the
//! library straight from the APK with PROT_EXEC, as Android's loader does, and calls into it.

mod common;

use common::*;
use object::{Object, ObjectSegment, ObjectSymbol};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

/// `apk_leaf` is static so that `apk_answer` calls it directly: the mapped library is not relocated.
const LIBRARY: &str = r#"
__attribute__((noinline)) static int apk_leaf(int x) { __asm__ volatile(""); return x * 3 + 1; }
int apk_answer(int x) { return apk_leaf(x) + apk_leaf(1); }
int apk_other(int x) { return x - 1; }
"#;

/// Maps SIZE bytes at OFFSET of APK (the stored library) executable, from the APK itself, and calls the
/// function at file offset FUNCTION of the library COUNT times.
const RUNNER: &str = r#"
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

/// Where the library is inside the APK, as Android names its ABI directories.
fn entry() -> String {
    let abi = if cfg!(target_arch = "aarch64") { "arm64-v8a" } else { "x86_64" };
    format!("lib/{abi}/libfoo.so")
}

/// The library and the runner, built with the system's C compiler into `dir`.
fn build(test: &str, dir: &Path) -> Option<(Vec<u8>, PathBuf)> {
    std::fs::create_dir_all(dir).unwrap();
    let (source, library) = (dir.join("foo.c"), dir.join("libfoo.so"));
    let (runner_source, runner) = (dir.join("runner.c"), dir.join("runner"));
    std::fs::write(&source, LIBRARY).unwrap();
    std::fs::write(&runner_source, RUNNER).unwrap();
    let builds = [
        Command::new("cc").args(["-shared", "-fPIC", "-O1", "-o"]).arg(&library).arg(&source).output(),
        Command::new("cc").args(["-O1", "-o"]).arg(&runner).arg(&runner_source).output(),
    ];
    for built in builds {
        match built {
            Ok(built) if built.status.success() => {}
            Ok(built) => panic!("cc failed: {}", stderr(&built)),
            Err(error) => {
                skip(test, &format!("needs a C compiler (cc): {error}"));
                return None;
            }
        }
    }
    Some((std::fs::read(&library).unwrap(), runner))
}

/// CRC-32 (IEEE), which zip headers carry.
fn crc32(data: &[u8]) -> u32 {
    !data.iter().fold(!0u32, |crc, &byte| {
        (0..8).fold(crc ^ u32::from(byte), |crc, _| (crc >> 1) ^ (0xedb8_8320 & (crc & 1).wrapping_neg()))
    })
}

/// A zip of `(name, data, compressed)` entries. A compressed entry is real deflate (of stored blocks); a
/// stored one starts at a multiple of `align`, reached by padding the local header's extra field as
/// zipalign does.
fn zip(entries: &[(&str, &[u8], bool)], align: usize) -> Vec<u8> {
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
fn file_offset(library: &[u8], function: &str) -> u64 {
    let elf = object::File::parse(library).unwrap();
    let address = elf.symbols().find(|s| s.name() == Ok(function)).unwrap().address();
    elf.segments()
        .find_map(|s| {
            let (offset, size) = s.file_range();
            (s.address() <= address && address < s.address() + size).then(|| offset + address - s.address())
        })
        .unwrap()
}

/// Functions, a wildcard, a uretprobe, `reg("pc")` and `ustack` on the library of an APK that a process
/// runs from inside the APK: each hit counted exactly, its frames named as the library's functions.
#[test]
fn uprobes_fire_in_a_library_mapped_from_inside_an_apk() {
    let test = "uprobes_fire_in_a_library_mapped_from_inside_an_apk";
    if !can_trace(test) {
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(test);
    let Some((library, runner)) = build(test, &dir) else { return };
    let manifest = b"<manifest package=\"dev.steadytrace.apk\"/>".repeat(20);
    let apk_bytes = zip(&[("AndroidManifest.xml", &manifest, true), (&entry(), &library, false)], 4096);
    let apk = dir.join("base.apk");
    std::fs::write(&apk, &apk_bytes).unwrap();
    let start = apk_bytes.windows(library.len()).position(|w| w == library).unwrap();
    assert_eq!(start % 4096, 0);
    let lib = format!("{}!/{}", apk.display(), entry());
    let script = format!(
        r#"uprobe:{lib}:apk_* {{ @[func] = count(); }}
           uprobe:{lib}:apk_leaf {{ @pc[usym(reg("pc"))] = count(); @stack[ustack(1)] = count(); }}
           uretprobe:{lib}:apk_answer {{ @returned = sum(retval); }}"#
    );
    let command = format!(
        "{} {} {start} {} {} 5",
        runner.display(),
        apk.display(),
        library.len(),
        file_offset(&library, "apk_answer")
    );
    let output = run_with(&["-e", &script, "-c", &command], LIMIT);
    // apk_answer(i) = 3i + 5 for i in 0..5: 55 in all, as the runner prints it too.
    assert_eq!(
        stdout(&output),
        "55\n\n\n@[apk_answer]: 5\n@[apk_leaf]: 10\n@pc[apk_leaf]: 10\n@returned: 55\n@stack[\n    apk_leaf+0\n]: 10\n",
        "{}",
        stderr(&output)
    );
}

/// `-l` lists the library's functions under the `APK!/ENTRY` path.
#[test]
fn lists_the_functions_of_a_library_in_an_apk() {
    let test = "lists_the_functions_of_a_library_in_an_apk";
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(test);
    let Some((library, _)) = build(test, &dir) else { return };
    let apk = dir.join("base.apk");
    std::fs::write(&apk, zip(&[(&entry(), &library, false)], 4096)).unwrap();
    let lib = format!("{}!/{}", apk.display(), entry());
    let listed = tracer(&["-l", &format!("uprobe:{lib}:apk_*")]).output().unwrap();
    assert_eq!(
        stdout(&listed),
        format!("uprobe:{lib}:apk_answer\nuprobe:{lib}:apk_leaf\nuprobe:{lib}:apk_other\n"),
        "{}",
        stderr(&listed)
    );
}

/// A library the loader could not map from the APK (compressed, or not page-aligned), or no such entry: an
/// error at the attach point saying what to do.
#[test]
fn refuses_libraries_no_process_runs_from_the_apk() {
    let test = "refuses_libraries_no_process_runs_from_the_apk";
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(test);
    let Some((library, _)) = build(test, &dir) else { return };
    let cases = [
        ("compressed", zip(&[(&entry(), &library, true)], 4096), entry(), "is compressed in"),
        ("unaligned", zip(&[(&entry(), &library, false)], 1), entry(), "not on a 4096-byte page"),
        ("missing", zip(&[(&entry(), &library, false)], 4096), "lib/x86/libbar.so".into(), "has no entry"),
    ];
    for (name, bytes, entry, why) in cases {
        let apk = dir.join(format!("{name}.apk"));
        std::fs::write(&apk, bytes).unwrap();
        let point = format!("uprobe:{}!/{entry}:apk_answer", apk.display());
        let output = run_with(&["--dry-run", "-e", &format!("{point} {{ }}")], LIMIT);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{err}");
        assert!(err.starts_with("stdin:1:1: ERROR: ") && err.contains(why), "{name}: {err}");
        let underline = format!("\n{}\n", "^".repeat(point.len()));
        assert!(err.contains(&format!("\n{point} {{ }}\n")) && err.contains(&underline), "{name}: {err}");
    }
}
