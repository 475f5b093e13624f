//! `--emit-elf`: the compiled programs and maps as an ELF object libbpf opens (`bpf::elf` writes it).
//! What it holds is what steadytrace loads, less the dispatcher (it tail-calls the programs steadytrace
//! itself fires, from a uprobe on its trigger function).

use super::Compiled;

/// The object's bytes; its programs are named after their attach points (`tracepoint_syscalls_sys_enter_read_1`,
/// numbered from 1 in script order, so that each name is unique).
pub fn elf_object(compiled: &Compiled) -> Result<Vec<u8>, String> {
    let programs: Vec<bpf::elf::Program> = compiled
        .programs
        .iter()
        .enumerate()
        .map(|(i, program)| bpf::elf::Program {
            name: format!("{}_{}", symbol_name(&program.point.name), i + 1),
            section: program.point.provider.elf_section(),
            code: &program.code,
        })
        .collect();
    bpf::elf::object(&programs, &compiled.maps)
}

/// An attach point's name as a C identifier: what the kernel takes as a program name.
fn symbol_name(point: &str) -> String {
    point.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_programs_after_their_attach_points() {
        assert_eq!(
            super::symbol_name("tracepoint:syscalls:sys_enter_read"),
            "tracepoint_syscalls_sys_enter_read"
        );
        assert_eq!(super::symbol_name("BEGIN"), "begin");
    }
}
