//! A kernel module's BTF, which only describes what the kernel's own BTF does not: its types are numbered on
//! from the kernel's last one and its strings are addressed on from the end of the kernel's (split BTF). Laid
//! after the kernel's, both make one whole BTF that reads as the kernel's does.

/// `/sys/kernel/btf/NAME`: a loaded module's BTF.
pub fn path(module: &str) -> std::path::PathBuf {
    std::path::Path::new("/sys/kernel/btf").join(module)
}

/// The BTF header's fields after magic, version and flags: header length, then the type and string
/// sections' offsets (from the header's end) and lengths.
struct Header {
    hdr_len: u32,
    type_off: u32,
    type_len: u32,
    str_off: u32,
    str_len: u32,
}

const MAGIC: u16 = 0xeb9f;

fn header(btf: &[u8]) -> Option<Header> {
    let word = |at: usize| Some(u32::from_le_bytes(btf.get(at..at + 4)?.try_into().ok()?));
    (u16::from_le_bytes(btf.get(0..2)?.try_into().ok()?) == MAGIC).then_some(())?;
    Some(Header {
        hdr_len: word(4)?,
        type_off: word(8)?,
        type_len: word(12)?,
        str_off: word(16)?,
        str_len: word(20)?,
    })
}

fn section<'a>(btf: &'a [u8], h: &Header, off: u32, len: u32) -> Option<&'a [u8]> {
    let start = (h.hdr_len as usize).checked_add(off as usize)?;
    btf.get(start..start.checked_add(len as usize)?)
}

/// One BTF holding `base` (the kernel's) and then `split` (a module's, made against that base).
pub fn merged(base: &[u8], split: &[u8]) -> Result<Vec<u8>, String> {
    let (b, s) = (
        header(base).ok_or("the kernel's BTF has no BTF header")?,
        header(split).ok_or("the module's BTF has no BTF header")?,
    );
    let parts = (|| {
        Some([
            section(base, &b, b.type_off, b.type_len)?,
            section(split, &s, s.type_off, s.type_len)?,
            section(base, &b, b.str_off, b.str_len)?,
            section(split, &s, s.str_off, s.str_len)?,
        ])
    })()
    .ok_or("a BTF section lies outside its file")?;
    let [base_types, split_types, base_strings, split_strings] = parts;
    let type_len = (base_types.len() + split_types.len()) as u32;
    let str_len = (base_strings.len() + split_strings.len()) as u32;
    let mut out = Vec::with_capacity(24 + (type_len + str_len) as usize);
    out.extend_from_slice(&base[0..4]);
    for word in [24, 0, type_len, type_len, str_len] {
        out.extend_from_slice(&u32::to_le_bytes(word));
    }
    for part in parts {
        out.extend_from_slice(part);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF of header length 24 with these sections.
    fn btf(types: &[u8], strings: &[u8]) -> Vec<u8> {
        let mut out = vec![0x9f, 0xeb, 1, 0];
        for word in [24, 0, types.len() as u32, types.len() as u32, strings.len() as u32] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(types);
        out.extend_from_slice(strings);
        out
    }

    #[test]
    fn the_module_follows_the_kernel_in_each_section() {
        let base = btf(b"TTTT", b"\0base\0");
        let split = btf(b"tt", b"mod\0");
        let whole = merged(&base, &split).unwrap();
        assert_eq!(whole, btf(b"TTTTtt", b"\0base\0mod\0"));
        assert!(merged(b"nope", &split).is_err());
        assert!(merged(&base, &split[..split.len() - 1]).is_err());
    }
}
