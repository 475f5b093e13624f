//! A small kernel for unit tests: raw BTF written here with a few types whose sizes and offsets differ from
//! any real kernel's, so that a test of sema or codegen shows they came from this BTF and needs no kernel.
//!
//! ```c
//! struct task_struct { int pad; int pid; struct task_struct *parent; char comm[16]; };  // 32 bytes, said 40
//! typedef int pid_t;
//! enum fixture_state { FIXTURE_READY = 7 };
//! ```

use super::{KernelTypes, Vmlinux};
use std::path::PathBuf;
use std::sync::Arc;

const INT: u32 = 1;
const PTR: u32 = 2;
const ARRAY: u32 = 3;
const STRUCT: u32 = 4;
const ENUM: u32 = 6;
const TYPEDEF: u32 = 8;

/// Raw BTF: a header, the type section, the string section.
struct Writer {
    types: Vec<u32>,
    strings: Vec<u8>,
}

impl Writer {
    fn name(&mut self, name: &str) -> u32 {
        let at = self.strings.len() as u32;
        self.strings.extend_from_slice(name.as_bytes());
        self.strings.push(0);
        at
    }

    fn header(&mut self, name: &str, kind: u32, vlen: u32, size_or_type: u32) {
        let name = if name.is_empty() { 0 } else { self.name(name) };
        self.types.extend([name, kind << 24 | vlen, size_or_type]);
    }

    fn bytes(&self) -> Vec<u8> {
        let types: Vec<u8> = self.types.iter().flat_map(|w| w.to_le_bytes()).collect();
        let mut out = vec![];
        out.extend(0xeb9fu16.to_le_bytes());
        out.extend([1, 0]);
        for word in [24, 0, types.len() as u32, types.len() as u32, self.strings.len() as u32] {
            out.extend(word.to_le_bytes());
        }
        out.extend(types);
        out.extend(&self.strings);
        out
    }
}

/// The file of the fixture's BTF (written once per test process).
fn file() -> PathBuf {
    let path = std::env::temp_dir().join(format!("steadytrace-fixture-{}.btf", std::process::id()));
    if path.exists() {
        return path;
    }
    let mut w = Writer { types: vec![], strings: vec![0] };
    // [1] int
    w.header("int", INT, 0, 4);
    w.types.push(1 << 24 | 32); // signed, 32 bits
                                // [2] char
    w.header("char", INT, 0, 1);
    w.types.push(8);
    // [3] struct task_struct *
    w.header("", PTR, 0, 4);
    // [4] struct task_struct
    w.header("task_struct", STRUCT, 4, 40);
    for (name, ty, bits) in [("pad", 1, 0), ("pid", 1, 32), ("parent", 3, 64), ("comm", 5, 128)] {
        let name = w.name(name);
        w.types.extend([name, ty, bits]);
    }
    // [5] char[16]
    w.header("", ARRAY, 0, 0);
    w.types.extend([2, 1, 16]);
    // [6] typedef int pid_t
    w.header("pid_t", TYPEDEF, 0, 1);
    // [7] enum fixture_state
    w.header("fixture_state", ENUM, 1, 4);
    let name = w.name("FIXTURE_READY");
    w.types.extend([name, 7]);
    let unique = path.with_extension(format!("{:?}", std::thread::current().id()).replace(['(', ')'], ""));
    std::fs::write(&unique, w.bytes()).expect("write the fixture's BTF");
    std::fs::rename(&unique, &path).expect("put the fixture's BTF in place");
    path
}

/// The fixture kernel's types, with no script types.
pub fn kernel() -> KernelTypes {
    KernelTypes::new(Vmlinux::from_file(file()), super::every_feature(), Arc::default())
}

/// The fixture kernel's types beside a script's own.
pub fn kernel_with(script: Arc<crate::lang::cdecl::CTypes>) -> KernelTypes {
    KernelTypes::new(Vmlinux::from_file(file()), super::every_feature(), script)
}
