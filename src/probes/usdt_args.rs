//! The arguments of a USDT probe, as `<sys/sdt.h>` had the assembler describe them in the probe's note:
//! one operand per argument, separated by spaces, each `SIZE@OPERAND` where a negative size is a signed
//! value (`-4@%eax`: a signed 32-bit value in `eax`; `8@-16(%rbp)`: 8 bytes at `rbp - 16`; `4@$5`: the
//! constant 5; `-8@8(%rax,%rdx,8)`: 8 bytes at `rax + rdx * 8 + 8`). arm64 writes `-4@x0`, `8@[sp, 16]`
//! and `4@5`.

use bpf::arch::{Arch, UsdtSyntax};

/// One argument: where it is, and how many bytes of it are the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Argument {
    /// 1, 2, 4 or 8.
    pub size: u8,
    pub signed: bool,
    pub location: Location,
}

/// Where an argument's value is when the probe fires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// In a register saved in the context (`struct pt_regs`), at this byte offset.
    Register(i16),
    /// In the process's memory at `base + index * scale + offset`, registers named by their offsets in
    /// the context.
    Memory { base: i16, index: Option<(i16, u8)>, offset: i32 },
    /// A constant the compiler knew.
    Constant(i64),
}

impl Argument {
    /// A constant's value as the probe sees it: cut to its size, then extended by its sign.
    pub fn constant(&self) -> Option<u64> {
        let Location::Constant(value) = self.location else { return None };
        let bits = 64 - 8 * u32::from(self.size);
        let shifted = (value as u64) << bits;
        Some(if self.signed { ((shifted as i64) >> bits) as u64 } else { shifted >> bits })
    }
}

/// Reads the argument operands of one note (`-4@%edi 8@-16(%rbp)`; `-4@x0 8@[sp, 16]` on arm64) as this
/// architecture writes them; an error names the one not understood.
pub fn parse(text: &str, arch: &Arch) -> Result<Vec<Argument>, String> {
    operands(text)
        .map(|operand| {
            parse_one(operand, arch).ok_or_else(|| format!("the USDT argument `{operand}` is not understood"))
        })
        .collect()
}

/// The operands of a note: separated by spaces, except inside brackets (arm64's `[x22, 20]`).
fn operands(text: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0i32;
    text.split(move |c: char| {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ => {}
        }
        c.is_whitespace() && depth == 0
    })
    .filter(|operand| !operand.is_empty())
}

fn parse_one(text: &str, arch: &Arch) -> Option<Argument> {
    // Old notes may lack the size: then it is a 64-bit value.
    let (size, operand) = match text.split_once('@') {
        Some((size, operand)) => (size.parse::<i8>().ok()?, operand),
        None => (8, text),
    };
    let (signed, size) = (size < 0, size.unsigned_abs());
    if !matches!(size, 1 | 2 | 4 | 8) {
        return None;
    }
    let location = match arch.usdt_syntax {
        UsdtSyntax::Att => att_location(operand, arch.usdt_register)?,
        UsdtSyntax::Arm64 => arm64_location(operand, arch.usdt_register)?,
    };
    Some(Argument { size, signed, location })
}

/// `%reg`, `$constant`, `offset(%base)`, `offset(%base,%index,scale)`.
fn att_location(operand: &str, register: fn(&str) -> Option<i16>) -> Option<Location> {
    if let Some(name) = operand.strip_prefix('%') {
        return Some(Location::Register(register(name)?));
    }
    if let Some(constant) = operand.strip_prefix('$') {
        return Some(Location::Constant(number(constant)?));
    }
    let (offset, inside) = operand.strip_suffix(')')?.split_once('(')?;
    let offset = if offset.is_empty() { 0 } else { i32::try_from(number(offset)?).ok()? };
    let mut registers = inside.split(',');
    let base = register(registers.next()?.strip_prefix('%')?)?;
    let index = match registers.next() {
        None => None,
        Some(index) => {
            let scale = registers.next().map_or(Some(1), |s| s.parse::<u8>().ok())?;
            if !matches!(scale, 1 | 2 | 4 | 8) || registers.next().is_some() {
                return None;
            }
            Some((register(index.strip_prefix('%')?)?, scale))
        }
    };
    Some(Location::Memory { base, index, offset })
}

/// `x3` (or `w3`), a constant (`5`, `#5`, `-1`), `[base]`, `[base, offset]`.
fn arm64_location(operand: &str, register: fn(&str) -> Option<i16>) -> Option<Location> {
    if let Some(inside) = operand.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')) {
        let (base, offset) = match inside.split_once(',') {
            Some((base, offset)) => {
                let offset = number(offset.trim().trim_start_matches('#'))?;
                (base.trim(), i32::try_from(offset).ok()?)
            }
            None => (inside.trim(), 0),
        };
        return Some(Location::Memory { base: register(base)?, index: None, offset });
    }
    if let Some(offset) = register(operand) {
        return Some(Location::Register(offset));
    }
    Some(Location::Constant(number(operand.trim_start_matches('#'))?))
}

/// A decimal or `0x` hexadecimal number, maybe negative.
fn number(text: &str) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let value = match digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok()? as i64,
        None => digits.parse::<u64>().ok()? as i64,
    };
    Some(if negative { value.wrapping_neg() } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bpf::arch::{AARCH64, X86_64};

    fn parse_x86(text: &str) -> Result<Vec<Argument>, String> {
        parse(text, &X86_64)
    }

    fn arg(size: u8, signed: bool, location: Location) -> Argument {
        Argument { size, signed, location }
    }

    #[test]
    fn operands_of_every_form_are_read() {
        let args =
            parse_x86("-4@%eax 8@-16(%rbp) 8@%rdi 4@$5 -8@8(%rax,%rdx,8) 2@(%r12) 1@%sil -1@%ah 8@$-3")
                .expect("parses");
        assert_eq!(
            args,
            [
                arg(4, true, Location::Register(80)),
                arg(8, false, Location::Memory { base: 32, index: None, offset: -16 }),
                arg(8, false, Location::Register(112)),
                arg(4, false, Location::Constant(5)),
                arg(8, true, Location::Memory { base: 80, index: Some((96, 8)), offset: 8 }),
                arg(2, false, Location::Memory { base: 24, index: None, offset: 0 }),
                arg(1, false, Location::Register(104)),
                arg(1, true, Location::Register(81)),
                arg(8, false, Location::Constant(-3)),
            ]
        );
    }

    #[test]
    fn numbered_registers_have_their_narrow_names() {
        for (name, offset) in [("r8", 72), ("r9d", 64), ("r10w", 56), ("r15b", 0), ("esp", 152), ("rip", 128)]
        {
            assert_eq!((X86_64.usdt_register)(name), Some(offset), "{name}");
        }
        for name in ["r16", "r7", "rdd", "xmm0", "r8dd"] {
            assert_eq!((X86_64.usdt_register)(name), None, "{name}");
        }
    }

    #[test]
    fn constants_are_cut_to_their_size_and_sign() {
        assert_eq!(parse_x86("-4@$-5").unwrap()[0].constant(), Some(-5i64 as u64));
        assert_eq!(parse_x86("4@$-1").unwrap()[0].constant(), Some(0xffff_ffff));
        assert_eq!(parse_x86("1@$0x1ff").unwrap()[0].constant(), Some(0xff));
    }

    #[test]
    fn operands_not_understood_are_named() {
        assert_eq!(parse_x86("3@%eax").unwrap_err(), "the USDT argument `3@%eax` is not understood");
        assert!(parse_x86("8@foo(%rip)").is_err());
        assert!(parse_x86("4@%xmm0").is_err());
        assert!(parse_x86("8@8(%rax,%rdx,3)").is_err());
        assert_eq!(parse_x86("").unwrap(), []);
    }

    /// Notes come from any ELF file a script names: mutations of real operands, of both syntaxes, are read
    /// or refused, never a panic.
    #[test]
    fn mutated_operands_never_panic() {
        let seeds =
            ["-4@%eax 8@-16(%rbp) -8@8(%rax,%rdx,8) 1@$-3", "-4@x19 -8@[sp, 72] -4@5 2@[x22, 20] 4@w3"];
        let alphabet = b"@%$()[], -+0123456789xwabcdeflhrsp#";
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        };
        for round in 0..20_000 {
            let mut text = seeds[round % 2].as_bytes().to_vec();
            for _ in 0..1 + next(4) {
                let at = next(text.len() + 1);
                match next(3) {
                    0 if at < text.len() => text[at] = alphabet[next(alphabet.len())],
                    1 => text.insert(at, alphabet[next(alphabet.len())]),
                    _ if at < text.len() => {
                        text.remove(at);
                    }
                    _ => {}
                }
            }
            let text = String::from_utf8_lossy(&text);
            for arch in [&X86_64, &AARCH64] {
                let _ = parse(&text, arch);
            }
        }
    }

    #[test]
    fn arm64_operands_of_every_form_are_read() {
        let args =
            parse("-4@x0 8@x25 -4@[x22] 2@[x22, 20] -4@[sp, 128] 4@5 -8@-3 8@[x1, -16] 4@w3", &AARCH64)
                .expect("parses");
        assert_eq!(
            args,
            [
                arg(4, true, Location::Register(0)),
                arg(8, false, Location::Register(200)),
                arg(4, true, Location::Memory { base: 176, index: None, offset: 0 }),
                arg(2, false, Location::Memory { base: 176, index: None, offset: 20 }),
                arg(4, true, Location::Memory { base: 248, index: None, offset: 128 }),
                arg(4, false, Location::Constant(5)),
                arg(8, true, Location::Constant(-3)),
                arg(8, false, Location::Memory { base: 8, index: None, offset: -16 }),
                arg(4, false, Location::Register(24)),
            ]
        );
        assert_eq!(
            parse("-4@[x99, 4]", &AARCH64).unwrap_err(),
            "the USDT argument `-4@[x99, 4]` is not understood"
        );
        assert!(parse("-4@%eax", &AARCH64).is_err());
        assert!(parse("-4@x0", &X86_64).is_err());
    }
}
