//! Attach-point wildcards, as in `tracepoint:sched:*` and `uprobe:/bin/bash:read*`.

/// Whether `text` has a wildcard that [`matches()`] understands.
pub fn has_wildcard(text: &str) -> bool {
    text.contains(['*', '?'])
}

/// Shell-style matching of a whole text: `*` matches any run of characters, `:` included (so
/// `tracepoint:*:sched_switch` and `*sched_switch*` both find `tracepoint:sched:sched_switch`), `?`
/// matches one character, everything else matches itself. bpftrace 0.17 knows only `*`.
pub fn matches(pattern: &str, text: &str) -> bool {
    // Byte by byte where both are ASCII, as kernel function names are (a wildcard is matched against tens of
    // thousands of them); else by character.
    if pattern.is_ascii() && text.is_ascii() {
        return matches_items(pattern.as_bytes(), text.as_bytes(), b'*', b'?');
    }
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    matches_items(&pattern, &text, '*', '?')
}

fn matches_items<T: Copy + PartialEq>(pattern: &[T], text: &[T], any_run: T, any_one: T) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was, and the text position it has been stretched to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == any_one || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == any_run {
            star = Some((p, t));
            p += 1;
        } else if let Some((star_p, star_t)) = star {
            // Let the last `*` take one more character, and retry after it.
            star = Some((star_p, star_t + 1));
            p = star_p + 1;
            t = star_t + 1;
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == any_run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_shell_wildcards() {
        assert!(matches("*", ""));
        assert!(matches("tracepoint:*:sched_switch", "tracepoint:sched:sched_switch"));
        assert!(matches("*sched_switch*", "tracepoint:sched:sched_switch"));
        assert!(matches("t*", "tracepoint:ipi:ipi_send_cpu"), "`*` crosses colons");
        assert!(matches("sched_sw?tch", "sched_switch"));
        assert!(matches("a*b*c", "aXbYbZc"));
        assert!(matches("*ab", "aab"));
        assert!(!matches("sched_sw?tch", "sched_swtch"));
        assert!(!matches("ipi", "ipi_send_cpu"), "the whole text must match");
        assert!(!matches("*a", "ab"));
        assert!(matches("**", "x"));
        assert!(has_wildcard("a?") && has_wildcard("*") && !has_wildcard("a:b"));
        assert!(matches("é*", "été") && matches("?t?", "été") && !matches("?", "é?"), "by character");
    }
}
