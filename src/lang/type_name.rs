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
    } else if !INT_TYPES.contains(&base.as_str()) && !params.contains(&base) {
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
        return Some((format!("{base} {}", "*".repeat(stars)), at));
    }
    if record {
        return None;
    }
    if tagged {
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
/// `uint8[4]`, `struct task_struct`), not an identifier naming a value.
pub fn is_type(name: &str) -> bool {
    INT_TYPES.contains(&name) || name.contains([' ', '*', '['])
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
    }

    #[test]
    fn refuses_what_is_no_type() {
        assert_eq!(read("struct A)"), None);
        assert_eq!(read("x * 2)"), None);
        assert_eq!(read("uint8[x])"), None);
        assert_eq!(read("enum)"), None);
    }
}
