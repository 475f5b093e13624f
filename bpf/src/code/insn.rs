//! BPF instructions: their encoding and a typed assembler with labels, so that no caller ever writes
//! raw opcode bytes.

use std::fmt;

/// A BPF register. R10 is the read-only frame pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reg(pub u8);

impl Reg {
    pub const R0: Reg = Reg(0);
    pub const R1: Reg = Reg(1);
    pub const R2: Reg = Reg(2);
    pub const R3: Reg = Reg(3);
    pub const R4: Reg = Reg(4);
    pub const R5: Reg = Reg(5);
    pub const R6: Reg = Reg(6);
    pub const R7: Reg = Reg(7);
    pub const R8: Reg = Reg(8);
    pub const R9: Reg = Reg(9);
    pub const FP: Reg = Reg(10);
}

impl fmt::Display for Reg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}", self.0)
    }
}

/// One 8-byte instruction, laid out as the kernel's `struct bpf_insn` (dst in the low nibble).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Insn {
    pub code: u8,
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    pub fn new(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> Insn {
        Insn { code, regs: (src.0 << 4) | (dst.0 & 0xf), off, imm }
    }
    pub fn dst(&self) -> Reg {
        Reg(self.regs & 0xf)
    }
    pub fn src(&self) -> Reg {
        Reg(self.regs >> 4)
    }
}

pub mod class {
    pub const LD: u8 = 0x00;
    pub const LDX: u8 = 0x01;
    pub const ST: u8 = 0x02;
    pub const STX: u8 = 0x03;
    pub const ALU: u8 = 0x04;
    pub const JMP: u8 = 0x05;
    pub const JMP32: u8 = 0x06;
    pub const ALU64: u8 = 0x07;
}
pub(crate) const MODE_IMM: u8 = 0x00;
const MODE_MEM: u8 = 0x60;
pub(crate) const MODE_ATOMIC: u8 = 0xc0;
/// The immediate of an atomic compare-and-exchange: BPF_CMPXCHG | BPF_FETCH.
pub(crate) const ATOMIC_CMPXCHG: i32 = 0xf1;
const SRC_X: u8 = 0x08;
/// `src_reg` of an `ld_imm64` whose immediate is a map file descriptor.
pub const PSEUDO_MAP_FD: u8 = 1;
/// `src_reg` of an `ld_imm64` whose immediate is a map file descriptor and whose second half is an offset
/// into the value of the array map's first element: the instruction loads that address.
pub const PSEUDO_MAP_VALUE: u8 = 2;
/// `src_reg` of an `ld_imm64` whose immediate is the distance to a subprogram (a helper's callback).
pub const PSEUDO_FUNC: u8 = 4;
/// `src` of a call of a subprogram of the same program (a bpf-to-bpf call, Linux 4.16).
pub const PSEUDO_CALL: u8 = 1;
/// `src_reg` of an `ld_imm64` whose immediate is the BTF id of a kernel variable (a ksym; vmlinux's BTF).
pub const PSEUDO_BTF_ID: u8 = 3;
/// `src` of a call of a kernel function (a kfunc, Linux 5.13) whose immediate is its BTF id in vmlinux.
pub const PSEUDO_KFUNC_CALL: u8 = 2;

/// Operand size of loads and stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    B = 0x10,
    H = 0x08,
    W = 0x00,
    DW = 0x18,
}

impl Size {
    pub fn bytes(self) -> usize {
        match self {
            Size::B => 1,
            Size::H => 2,
            Size::W => 4,
            Size::DW => 8,
        }
    }
    pub fn for_bytes(bytes: usize) -> Option<Size> {
        Some(match bytes {
            1 => Size::B,
            2 => Size::H,
            4 => Size::W,
            8 => Size::DW,
            _ => return None,
        })
    }
    pub(crate) fn from_code(code: u8) -> Size {
        match code & 0x18 {
            0x10 => Size::B,
            0x08 => Size::H,
            0x00 => Size::W,
            _ => Size::DW,
        }
    }
}

/// Arithmetic and logic operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alu {
    Add = 0x00,
    Sub = 0x10,
    Mul = 0x20,
    Div = 0x30,
    Or = 0x40,
    And = 0x50,
    Lsh = 0x60,
    Rsh = 0x70,
    Neg = 0x80,
    Mod = 0x90,
    Xor = 0xa0,
    Mov = 0xb0,
    Arsh = 0xc0,
}

impl Alu {
    pub(crate) fn from_code(code: u8) -> Option<Alu> {
        use Alu::*;
        [Add, Sub, Mul, Div, Or, And, Lsh, Rsh, Neg, Mod, Xor, Mov, Arsh]
            .into_iter()
            .find(|op| *op as u8 == code & 0xf0)
    }
}

/// Conditions of conditional jumps (the `U`/`S` prefix: unsigned or signed comparison).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    Eq = 0x10,
    UGt = 0x20,
    UGe = 0x30,
    Set = 0x40,
    Ne = 0x50,
    SGt = 0x60,
    SGe = 0x70,
    ULt = 0xa0,
    ULe = 0xb0,
    SLt = 0xc0,
    SLe = 0xd0,
}

impl Cond {
    pub(crate) fn from_code(code: u8) -> Option<Cond> {
        use Cond::*;
        [Eq, UGt, UGe, Set, Ne, SGt, SGe, ULt, ULe, SLt, SLe].into_iter().find(|c| *c as u8 == code & 0xf0)
    }
    /// The condition that holds exactly when this one does not.
    pub fn negate(self) -> Option<Cond> {
        use Cond::*;
        Some(match self {
            Eq => Ne,
            Ne => Eq,
            UGt => ULe,
            ULe => UGt,
            UGe => ULt,
            ULt => UGe,
            SGt => SLe,
            SLe => SGt,
            SGe => SLt,
            SLt => SGe,
            Set => return None,
        })
    }
}

/// `BPF_END`: byte order conversion, with `BPF_TO_BE` as its source bit.
pub(crate) const OP_END: u8 = 0xd0;
pub(crate) const TO_BIG_ENDIAN: u8 = 0x08;
pub(crate) const OP_JA: u8 = 0x00;
pub(crate) const OP_CALL: u8 = 0x80;
pub(crate) const OP_EXIT: u8 = 0x90;

/// A jump target not yet placed; see [`Asm::bind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Label(usize);

/// A load of a map's file descriptor that the loader must patch: `insn` is the first half of an
/// `ld_imm64`, `map` an index into the maps handed to the loader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapReloc {
    pub insn: usize,
    pub map: usize,
}

/// Finished instructions with their map relocations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Code {
    pub insns: Vec<Insn>,
    pub map_relocs: Vec<MapReloc>,
    /// Where each subprogram (callback) starts, in order; the main program starts at 0.
    pub subprograms: Vec<usize>,
}

impl Code {
    /// Whether any instruction from `from` on names `reg` (as destination or source).
    pub fn names_reg_from(&self, from: usize, reg: Reg) -> bool {
        self.insns.iter().skip(from).any(|insn| insn.dst() == reg || insn.src() == reg)
    }

    /// Leaves out the first instruction, which nothing jumps to (jumps and calls are relative; map
    /// relocations and subprogram starts move up by one).
    pub fn remove_first(&mut self) {
        self.insns.remove(0);
        self.map_relocs.iter_mut().for_each(|reloc| reloc.insn -= 1);
        self.subprograms.iter_mut().for_each(|start| *start -= 1);
    }

    /// The helper calls, as (instruction index, helper number); calls of subprograms are not among them.
    pub fn helper_calls(&self) -> impl Iterator<Item = (usize, i32)> + '_ {
        self.insns
            .iter()
            .enumerate()
            .filter(|(_, insn)| insn.code == class::JMP | OP_CALL && insn.src().0 == 0)
            .map(|(at, insn)| (at, insn.imm))
    }
}

/// An assembler: appends instructions and resolves labels when finished.
#[derive(Default)]
pub struct Asm {
    insns: Vec<Insn>,
    labels: Vec<Option<usize>>,
    jumps: Vec<(usize, Label)>,
    /// `ld_imm64` of a subprogram's address, or a call of it: the immediate is patched like a jump.
    funcs: Vec<(usize, Label)>,
    map_relocs: Vec<MapReloc>,
}

/// Why a program could not be assembled.
#[derive(Debug, PartialEq, Eq)]
pub enum AsmError {
    UnboundLabel,
    JumpTooFar,
}

impl Asm {
    pub fn new() -> Asm {
        Asm::default()
    }

    /// Index of the next instruction to be emitted.
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    /// How many conditional jumps there are from instruction `start` on: each is a branch the verifier
    /// may have to come back to.
    pub fn conditional_jumps_since(&self, start: usize) -> usize {
        self.insns[start.min(self.insns.len())..]
            .iter()
            .filter(|insn| {
                let class = insn.code & 0x07;
                (class == class::JMP || class == class::JMP32)
                    && ![OP_JA, OP_CALL, OP_EXIT].contains(&(insn.code & 0xf0))
            })
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }

    fn emit(&mut self, insn: Insn) {
        self.insns.push(insn);
    }

    pub fn alu64_imm(&mut self, op: Alu, dst: Reg, imm: i32) {
        self.emit(Insn::new(class::ALU64 | op as u8, dst, Reg(0), 0, imm));
    }
    pub fn alu64_reg(&mut self, op: Alu, dst: Reg, src: Reg) {
        self.emit(Insn::new(class::ALU64 | op as u8 | SRC_X, dst, src, 0, 0));
    }
    /// 32-bit operation; the upper half of `dst` becomes zero.
    pub fn alu32_imm(&mut self, op: Alu, dst: Reg, imm: i32) {
        self.emit(Insn::new(class::ALU | op as u8, dst, Reg(0), 0, imm));
    }
    /// Reverses the order of the low `bits` (16, 32 or 64) bits' bytes of `dst`, clearing the bits above
    /// them: `BPF_END` to big-endian, a byte swap on the little-endian machines BPF runs on.
    pub fn byte_swap(&mut self, dst: Reg, bits: i32) {
        self.emit(Insn::new(class::ALU | OP_END | TO_BIG_ENDIAN, dst, Reg(0), 0, bits));
    }
    pub fn mov64_imm(&mut self, dst: Reg, imm: i32) {
        self.alu64_imm(Alu::Mov, dst, imm);
    }
    pub fn mov64_reg(&mut self, dst: Reg, src: Reg) {
        self.alu64_reg(Alu::Mov, dst, src);
    }
    /// Loads any 64-bit constant, in one instruction when it fits a sign-extended 32-bit immediate.
    pub fn mov_u64(&mut self, dst: Reg, value: u64) {
        match i32::try_from(value as i64) {
            Ok(imm) => self.mov64_imm(dst, imm),
            Err(_) => self.ld_imm64(dst, value),
        }
    }
    pub fn ld_imm64(&mut self, dst: Reg, value: u64) {
        self.emit(Insn::new(class::LD | Size::DW as u8 | MODE_IMM, dst, Reg(0), 0, value as u32 as i32));
        self.emit(Insn::new(0, Reg(0), Reg(0), 0, (value >> 32) as u32 as i32));
    }
    /// Loads the file descriptor of map number `map` (patched by the loader).
    pub fn ld_map(&mut self, dst: Reg, map: usize) {
        self.map_relocs.push(MapReloc { insn: self.len(), map });
        self.emit(Insn::new(class::LD | Size::DW as u8 | MODE_IMM, dst, Reg(PSEUDO_MAP_FD), 0, 0));
        self.emit(Insn::new(0, Reg(0), Reg(0), 0, 0));
    }
    /// Loads the address of the first element's value of array map number `map` (patched by the loader):
    /// memory a program reads and writes without a helper call.
    pub fn ld_map_value(&mut self, dst: Reg, map: usize) {
        self.map_relocs.push(MapReloc { insn: self.len(), map });
        self.emit(Insn::new(class::LD | Size::DW as u8 | MODE_IMM, dst, Reg(PSEUDO_MAP_VALUE), 0, 0));
        self.emit(Insn::new(0, Reg(0), Reg(0), 0, 0));
    }
    /// Loads the address of the kernel variable whose vmlinux BTF id is `id` (for a per-CPU variable, a
    /// value only `per_cpu_ptr` and `this_cpu_ptr` take).
    pub fn ld_btf_id(&mut self, dst: Reg, id: u32) {
        self.emit(Insn::new(class::LD | Size::DW as u8 | MODE_IMM, dst, Reg(PSEUDO_BTF_ID), 0, id as i32));
        self.emit(Insn::new(0, Reg(0), Reg(0), 0, 0));
    }
    /// Loads the address of the subprogram starting at `label`, for helpers taking a callback.
    pub fn ld_func(&mut self, dst: Reg, label: Label) {
        self.funcs.push((self.len(), label));
        self.emit(Insn::new(class::LD | Size::DW as u8 | MODE_IMM, dst, Reg(PSEUDO_FUNC), 0, 0));
        self.emit(Insn::new(0, Reg(0), Reg(0), 0, 0));
    }
    /// `dst = *(size *)(src + off)`
    pub fn load(&mut self, size: Size, dst: Reg, src: Reg, off: i16) {
        self.emit(Insn::new(class::LDX | size as u8 | MODE_MEM, dst, src, off, 0));
    }
    /// `*(size *)(dst + off) = src`
    pub fn store(&mut self, size: Size, dst: Reg, off: i16, src: Reg) {
        self.emit(Insn::new(class::STX | size as u8 | MODE_MEM, dst, src, off, 0));
    }
    /// `lock *(u64 *)(dst + off) += src`: an add no other CPU's add can come between (BPF_ATOMIC BPF_ADD).
    pub fn atomic_add64(&mut self, dst: Reg, off: i16, src: Reg) {
        self.emit(Insn::new(class::STX | Size::DW as u8 | MODE_ATOMIC, dst, src, off, 0));
    }
    /// `r0 = cmpxchg(*(u64 *)(dst + off), r0, src)`: stores `src` where the memory still holds r0, and leaves
    /// in r0 what it held (BPF_ATOMIC BPF_CMPXCHG, Linux 5.12).
    pub fn atomic_cmpxchg64(&mut self, dst: Reg, off: i16, src: Reg) {
        self.emit(Insn::new(class::STX | Size::DW as u8 | MODE_ATOMIC, dst, src, off, ATOMIC_CMPXCHG));
    }
    /// `*(size *)(dst + off) = imm`
    pub fn store_imm(&mut self, size: Size, dst: Reg, off: i16, imm: i32) {
        self.emit(Insn::new(class::ST | size as u8 | MODE_MEM, dst, Reg(0), off, imm));
    }
    /// Calls the subprogram starting at `label` with R1-R5; it returns in R0 and keeps R6-R9.
    pub fn call_local(&mut self, label: Label) {
        self.funcs.push((self.len(), label));
        self.emit(Insn::new(class::JMP | OP_CALL, Reg(0), Reg(PSEUDO_CALL), 0, 0));
    }
    pub fn call(&mut self, helper: u32) {
        self.emit(Insn::new(class::JMP | OP_CALL, Reg(0), Reg(0), 0, helper as i32));
    }
    /// A call of the kernel function (kfunc) with this BTF id.
    pub fn call_kernel_function(&mut self, btf_id: u32) {
        self.emit(Insn::new(class::JMP | OP_CALL, Reg(0), Reg(PSEUDO_KFUNC_CALL), 0, btf_id as i32));
    }
    pub fn exit(&mut self) {
        self.emit(Insn::new(class::JMP | OP_EXIT, Reg(0), Reg(0), 0, 0));
    }

    pub fn new_label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }
    /// Places `label` at the next instruction.
    pub fn bind(&mut self, label: Label) {
        self.labels[label.0] = Some(self.len());
    }
    /// Takes back the last instruction when it is `dst = src` (64 bits) and no label is placed after it: the
    /// value is then still in `src` for what comes next. Whether it did.
    pub fn undo_move(&mut self, dst: Reg, src: Reg) -> bool {
        let mov = Insn::new(class::ALU64 | Alu::Mov as u8 | SRC_X, dst, src, 0, 0);
        if self.insns.last() != Some(&mov) || self.is_label_at(self.len()) {
            return false;
        }
        self.insns.pop();
        true
    }
    /// Whether a label is placed at instruction `at` (code may jump there from elsewhere).
    pub fn is_label_at(&self, at: usize) -> bool {
        self.labels.contains(&Some(at))
    }
    /// Whether any jump emitted so far goes to `label`.
    pub fn is_jumped_to(&self, label: Label) -> bool {
        self.jumps.iter().any(|&(_, target)| target == label)
    }
    pub fn jump(&mut self, target: Label) {
        self.jumps.push((self.len(), target));
        self.emit(Insn::new(class::JMP | OP_JA, Reg(0), Reg(0), 0, 0));
    }
    pub fn jump_imm(&mut self, cond: Cond, reg: Reg, imm: i32, target: Label) {
        self.jumps.push((self.len(), target));
        self.emit(Insn::new(class::JMP | cond as u8, reg, Reg(0), 0, imm));
    }
    pub fn jump_reg(&mut self, cond: Cond, a: Reg, b: Reg, target: Label) {
        self.jumps.push((self.len(), target));
        self.emit(Insn::new(class::JMP | cond as u8 | SRC_X, a, b, 0, 0));
    }

    pub fn finish(mut self) -> Result<Code, AsmError> {
        for &(at, label) in &self.jumps {
            let target = self.labels[label.0].ok_or(AsmError::UnboundLabel)?;
            let off = target as i64 - at as i64 - 1;
            self.insns[at].off = i16::try_from(off).map_err(|_| AsmError::JumpTooFar)?;
        }
        let mut subprograms = vec![];
        for &(at, label) in &self.funcs {
            let target = self.labels[label.0].ok_or(AsmError::UnboundLabel)?;
            self.insns[at].imm = (target as i64 - at as i64 - 1) as i32;
            subprograms.push(target);
        }
        subprograms.sort_unstable();
        subprograms.dedup();
        Ok(Code { insns: self.insns, map_relocs: self.map_relocs, subprograms })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_the_kernel() {
        let mut asm = Asm::new();
        asm.mov64_imm(Reg::R0, 7);
        asm.exit();
        let code = asm.finish().unwrap();
        assert_eq!(code.insns[0], Insn { code: 0xb7, regs: 0x00, off: 0, imm: 7 });
        assert_eq!(code.insns[1].code, 0x95);
    }

    #[test]
    fn resolves_forward_and_backward_labels() {
        let mut asm = Asm::new();
        let top = asm.new_label();
        let end = asm.new_label();
        asm.bind(top);
        asm.jump_imm(Cond::Eq, Reg::R1, 0, end);
        asm.jump(top);
        asm.bind(end);
        asm.exit();
        let code = asm.finish().unwrap();
        assert_eq!(code.insns[0].off, 1);
        assert_eq!(code.insns[1].off, -2);
    }

    #[test]
    fn wide_constants_take_two_slots_and_small_ones_one() {
        let mut asm = Asm::new();
        asm.mov_u64(Reg::R1, 5);
        asm.mov_u64(Reg::R1, 0x1_0000_0000);
        asm.mov_u64(Reg::R1, u64::MAX);
        assert_eq!(asm.finish().unwrap().insns.len(), 4);
    }

    #[test]
    fn a_subprogram_address_is_its_distance_from_the_load() {
        let mut asm = Asm::new();
        let callback = asm.new_label();
        asm.ld_func(Reg::R2, callback);
        asm.exit();
        asm.bind(callback);
        asm.exit();
        let code = asm.finish().unwrap();
        assert_eq!((code.insns[0].src(), code.insns[0].imm), (Reg(PSEUDO_FUNC), 2));
    }

    #[test]
    fn an_unbound_label_is_an_error() {
        let mut asm = Asm::new();
        let nowhere = asm.new_label();
        asm.jump(nowhere);
        assert_eq!(asm.finish(), Err(AsmError::UnboundLabel));
    }
}
