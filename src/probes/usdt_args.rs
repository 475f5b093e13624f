//! The arguments of a USDT probe, as `<sys/sdt.h>` had the assembler describe them in the probe's note:
//! one operand per argument, separated by spaces, each `SIZE@OPERAND` where a negative size is a signed
//! value (`-4@%eax`: a signed 32-bit value in `eax`; `8@-16(%rbp)`: 8 bytes at `rbp - 16`; `4@$5`: the
//! constant 5; `-8@8(%rax,%rdx,8)`: 8 bytes at `rax + rdx * 8 + 8`).

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

/// Reads the argument operands of one note (`-4@%edi 8@-16(%rbp)`); an error names the one not understood.
pub fn parse(text: &str) -> Result<Vec<Argument>, String> {
    text.split_whitespace()
        .map(|operand| {
            parse_one(operand).ok_or_else(|| format!("the USDT argument `{operand}` is not understood"))
        })
        .collect()
}

fn parse_one(text: &str) -> Option<Argument> {
    // Old notes may lack the size: then it is a 64-bit value.
    let (size, operand) = match text.split_once('@') {
        Some((size, operand)) => (size.parse::<i8>().ok()?, operand),
        None => (8, text),
    };
    let (signed, size) = (size < 0, size.unsigned_abs());
    if !matches!(size, 1 | 2 | 4 | 8) {
        return None;
    }
    let location = if let Some(register) = operand.strip_prefix('%') {
        Location::Register(register_offset(register)?)
    } else if let Some(constant) = operand.strip_prefix('$') {
        Location::Constant(number(constant)?)
    } else {
        let (offset, inside) = operand.strip_suffix(')')?.split_once('(')?;
        let offset = if offset.is_empty() { 0 } else { i32::try_from(number(offset)?).ok()? };
        let mut registers = inside.split(',');
        let base = register_offset(registers.next()?.strip_prefix('%')?)?;
        let index = match registers.next() {
            None => None,
            Some(index) => {
                let scale = registers.next().map_or(Some(1), |s| s.parse::<u8>().ok())?;
                if !matches!(scale, 1 | 2 | 4 | 8) || registers.next().is_some() {
                    return None;
                }
                Some((register_offset(index.strip_prefix('%')?)?, scale))
            }
        };
        Location::Memory { base, index, offset }
    };
    Some(Argument { size, signed, location })
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

/// The byte offset in `struct pt_regs` of a register by any of its names (`rax`, `eax`, `ax`, `al`;
/// `ah` is the second byte of `rax`).
#[cfg(target_arch = "x86_64")]
fn register_offset(name: &str) -> Option<i16> {
    const LEGACY: [(&str, i16); 8] =
        [("ax", 80), ("bx", 40), ("cx", 88), ("dx", 96), ("si", 104), ("di", 112), ("bp", 32), ("sp", 152)];
    const NUMBERED: [i16; 8] = [72, 64, 56, 48, 24, 16, 8, 0]; // r8 .. r15
    if name == "rip" {
        return Some(128);
    }
    if let Some(n) = name.strip_prefix('r').and_then(|rest| {
        let digits = rest.trim_end_matches(['d', 'w', 'b']);
        (rest.len() - digits.len() <= 1).then_some(digits)?.parse::<usize>().ok()
    }) {
        return NUMBERED.get(n.checked_sub(8)?).copied();
    }
    let wide = name.strip_prefix(['r', 'e']).filter(|rest| rest.len() == 2).unwrap_or(name);
    if let Some(&(_, offset)) = LEGACY.iter().find(|(legacy, _)| *legacy == wide) {
        return Some(offset);
    }
    // Byte registers: al, bl, cl, dl, sil, dil, bpl, spl; ah, bh, ch, dh.
    let low = name.strip_suffix('l').map(|r| if r.len() == 1 { format!("{r}x") } else { r.to_string() });
    if let Some(&(_, offset)) = low.and_then(|r| LEGACY.iter().find(|(legacy, _)| *legacy == r)) {
        return Some(offset);
    }
    let high = name.strip_suffix('h').filter(|r| matches!(*r, "a" | "b" | "c" | "d"))?;
    LEGACY.iter().find(|(legacy, _)| *legacy == format!("{high}x")).map(|&(_, offset)| offset + 1)
}

#[cfg(not(target_arch = "x86_64"))]
fn register_offset(_: &str) -> Option<i16> {
    None
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    fn arg(size: u8, signed: bool, location: Location) -> Argument {
        Argument { size, signed, location }
    }

    #[test]
    fn operands_of_every_form_are_read() {
        let args = parse("-4@%eax 8@-16(%rbp) 8@%rdi 4@$5 -8@8(%rax,%rdx,8) 2@(%r12) 1@%sil -1@%ah 8@$-3")
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
            assert_eq!(register_offset(name), Some(offset), "{name}");
        }
        for name in ["r16", "r7", "rdd", "xmm0", "r8dd"] {
            assert_eq!(register_offset(name), None, "{name}");
        }
    }

    #[test]
    fn constants_are_cut_to_their_size_and_sign() {
        assert_eq!(parse("-4@$-5").unwrap()[0].constant(), Some(-5i64 as u64));
        assert_eq!(parse("4@$-1").unwrap()[0].constant(), Some(0xffff_ffff));
        assert_eq!(parse("1@$0x1ff").unwrap()[0].constant(), Some(0xff));
    }

    #[test]
    fn operands_not_understood_are_named() {
        assert_eq!(parse("3@%eax").unwrap_err(), "the USDT argument `3@%eax` is not understood");
        assert!(parse("8@foo(%rip)").is_err());
        assert!(parse("4@%xmm0").is_err());
        assert!(parse("8@8(%rax,%rdx,3)").is_err());
        assert_eq!(parse("").unwrap(), []);
    }
}
