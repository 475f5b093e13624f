//! Type names as casts and declarations write them: `uint8`, `int32 *`, `struct task_struct *`,
//! `uint8[4]`, `int8[]`, `enum color`. Read from the text (a `(` may open a cast or a parenthesised expression, and
//! only a whole type name followed by `)` makes it a cast), and given in one canonical spelling that
//! sema reads back: the base, then ` *`, ` **`, ... or `[N]` / `[]`.

/// The integer types (and `bool`) a value can be cast to.
pub const INT_TYPES: &[&str] = &[
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "i8", "i16", "i32", "i64",
    "u8", "u16", "u32", "u64", "bool",
];

/// The type name at the start of `text` (after blanks): its canonical spelling and the bytes it takes.
/// A struct or union is a type here only as a pointer (`struct NAME *`); an enum (`enum NAME`) is never
/// an array's element.
pub fn read(text: &str) -> Option<(String, usize)> {
    read_with(text, &[])
}

/// [`read`], where the names `params` (a macro's parameters, which may stand for types) are types too.
pub fn read_with(text: &str, params: &[String]) -> Option<(String, usize)> {
    let start = text.len() - text.trim_start().len();
    let (mut base, mut at) = word(text, start)?;
    let record = base == "struct" || base == "union";
    let tagged = record || base == "enum";
    if tagged {
        let (name, end) = word(text, skip_blanks(text, at))?;
        base = format!("{base} {name}");
        at = end;
    } else if let Some(int) = c_integer(&base) {
        base = int.to_string();
    } else if base == "void" {
        // `void *` is an address: a pointer to bytes.
        base = "uint8".to_string();
        if !text[at..].trim_start().starts_with('*') {
            return None;
        }
    } else if !INT_TYPES.contains(&base.as_str()) && !params.contains(&base) && !is_typedef(&base) {
        return None;
    }
    let mut stars = 0;
    loop {
        let next = skip_blanks(text, at);
        if text[next..].starts_with('*') {
            stars += 1;
            at = next + 1;
        } else {
            break;
        }
    }
    if stars > 0 {
        base = format!("{base} {}", "*".repeat(stars));
    } else if record {
        return None;
    } else if tagged {
        return Some((base, at));
    }
    let open = skip_blanks(text, at);
    if let Some(rest) = text[open..].strip_prefix('[') {
        let digits = rest.trim_start();
        let len = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
        let close = open + 1 + (rest.len() - digits.len()) + len;
        let close = skip_blanks(text, close);
        if text[close..].starts_with(']') {
            return Some((format!("{base}[{}]", &digits[..len]), close + 1));
        }
        return None;
    }
    Some((base, at))
}

/// Whether `name` is a type's spelling as the parser gives it for a type argument (`uint8`, `uint64 *`,
/// `uint8[4]`, `struct task_struct`, `pid_t`), not an identifier naming a value.
pub fn is_type(name: &str) -> bool {
    INT_TYPES.contains(&name) || is_typedef(name) || name.contains([' ', '*', '['])
}

/// C's and the kernel's names of the integers (`int`, `long`, `uint64_t`, `u_int8_t`, `__u32`, `__s16`, `s64`), in
/// the script's spelling.
fn c_integer(name: &str) -> Option<&'static str> {
    // C's own one-word integer names, at their x86_64 and arm64 sizes, and the kernel's short unsigned ones
    // (`uint`, `u_long`), as bpftrace takes them.
    if let Some(at) = ["char", "short", "int", "long"].iter().position(|c| *c == name) {
        return Some(["int8", "int16", "int32", "int64"][at]);
    }
    let unsigned = [("u_char", "uint8"), ("ushort", "uint16"), ("u_short", "uint16"), ("uint", "uint32")];
    let unsigned = unsigned.iter().chain(&[("u_int", "uint32"), ("ulong", "uint64"), ("u_long", "uint64")]);
    if let Some((_, int)) = unsigned.clone().find(|(c, _)| *c == name) {
        return Some(int);
    }
    if name == "_Bool" {
        return Some("bool");
    }
    let (signed, digits) = if let Some(c) = name.strip_suffix("_t") {
        match c.strip_prefix("uint").or_else(|| c.strip_prefix("u_int")) {
            Some(digits) => (false, digits),
            None => (true, c.strip_prefix("int")?),
        }
    } else if let Some(digits) = name.strip_prefix("__u") {
        (false, digits)
    } else {
        (true, name.strip_prefix("__s").or_else(|| name.strip_prefix('s'))?)
    };
    let at = ["8", "16", "32", "64"].iter().position(|bits| *bits == digits)?;
    let names =
        if signed { ["int8", "int16", "int32", "int64"] } else { ["uint8", "uint16", "uint32", "uint64"] };
    Some(names[at])
}

/// Bytes of the integer type `ty` in its canonical spelling (`int32`, `u8`, `bool`), or of any pointer.
pub fn integer_bytes(ty: &str) -> Option<usize> {
    if ty.ends_with('*') {
        return Some(8);
    }
    if ty == "bool" {
        return Some(1);
    }
    let digits = ty.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    let bits: usize = digits.parse().ok().filter(|_| INT_TYPES.contains(&ty))?;
    Some(bits / 8)
}

/// Whether the canonical type `ty` stands on a name only a kernel typedef makes a type (`pid_t`, `size_t[2]`; not
/// `pid_t *`, which no expression can be).
pub fn is_typedef_cast(ty: &str) -> bool {
    !ty.ends_with('*') && is_typedef(ty.split('[').next().unwrap_or(ty))
}

/// A name the kernel's typedefs may hold (`pid_t`, `size_t`, `loff_t`): sema looks it up in BTF.
fn is_typedef(name: &str) -> bool {
    name.len() > 2 && name.ends_with("_t") && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
}

/// The identifier starting at `at`, and where it ends.
fn word(text: &str, at: usize) -> Option<(String, usize)> {
    let rest = &text[at..];
    let len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
    (len > 0 && rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
        .then(|| (rest[..len].to_string(), at + len))
}

fn skip_blanks(text: &str, at: usize) -> usize {
    at + (text[at..].len() - text[at..].trim_start().len())
}

#[cfg(test)]
mod tests {
    use super::read;

    #[test]
    fn reads_pointers_arrays_and_records() {
        assert_eq!(read(" int8*) 0x32"), Some(("int8 *".into(), 6)));
        assert_eq!(read("uint16 ** )"), Some(("uint16 **".into(), 9)));
        assert_eq!(read("struct task_struct *)x"), Some(("struct task_struct *".into(), 20)));
        assert_eq!(read("uint8[4])$x"), Some(("uint8[4]".into(), 8)));
        assert_eq!(read("int8[ ])\"a\""), Some(("int8[]".into(), 7)));
        assert_eq!(read("uint32)"), Some(("uint32".into(), 6)));
        assert_eq!(read("enum  color )x"), Some(("enum color".into(), 11)));
        assert_eq!(read("uint32*[10])"), Some(("uint32 *[10]".into(), 11)));
    }

    #[test]
    fn reads_c_and_kernel_integer_names_and_typedefs() {
        for (written, canonical) in [
            ("uint64_t)", "uint64"),
            ("int8_t)", "int8"),
            ("u_int16_t)", "uint16"),
            ("__u32)", "uint32"),
            ("__s64)", "int64"),
            ("s16)", "int16"),
            ("int *)", "int32 *"),
            ("long)", "int64"),
            ("char[4])", "int8[4]"),
            ("ulong)", "uint64"),
            ("u_short)", "uint16"),
            ("_Bool)", "bool"),
            ("void *)", "uint8 *"),
            ("pid_t)", "pid_t"),
            ("size_t *)", "size_t *"),
        ] {
            assert_eq!(read(written).map(|(t, _)| t), Some(canonical.to_string()), "{written}");
        }
        for name in ["uint64", "s", "int7_t", "__u32_t", "s8_t", "u8", "size_t"] {
            assert_eq!(super::c_integer(name), None, "{name}");
        }
        assert_eq!(read("_t)"), None);
        assert_eq!(read("PID_T)"), None);
    }

    #[test]
    fn refuses_what_is_no_type() {
        assert_eq!(read("struct A)"), None);
        assert_eq!(read("x * 2)"), None);
        assert_eq!(read("uint8[x])"), None);
        assert_eq!(read("enum)"), None);
    }
}
