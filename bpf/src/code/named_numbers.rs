//! Tables of names and their numbers (system call numbers, a C header's constants) that cost a program's start
//! nothing. A table of `(&str, i64)` pairs holds a pointer for every name, and a position-independent binary
//! rewrites each one at every start: a page of the table written, so copied, for every 170 names. Here the names
//! are one string and the numbers one array, two pointers for a whole table; [`named_numbers!`] (in lib.rs, defined
//! before the modules that use it) writes one as readably as the pairs were.

/// Names and their numbers, in the order written.
#[derive(Debug)]
pub struct NamedNumbers {
    /// Every name followed by one space.
    names: &'static str,
    numbers: &'static [i64],
}

impl NamedNumbers {
    /// `names`, each followed by one space, and their `numbers` in the same order. As a constant's value, a
    /// count of names that is not the count of numbers fails the build.
    pub const fn new(names: &'static str, numbers: &'static [i64]) -> NamedNumbers {
        let bytes = names.as_bytes();
        let (mut spaces, mut at) = (0, 0);
        while at < bytes.len() {
            if bytes[at] == b' ' {
                spaces += 1;
            }
            at += 1;
        }
        assert!(spaces == numbers.len(), "a table of names and numbers whose counts differ");
        NamedNumbers { names, numbers }
    }

    /// Each name with its number, in the order written.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, i64)> + 'static {
        self.names.split_terminator(' ').zip(self.numbers.iter().copied())
    }

    /// The number of `name`, the first where it is written twice.
    pub fn get(&self, name: &str) -> Option<i64> {
        self.iter().find(|&(known, _)| known == name).map(|(_, number)| number)
    }
}

#[cfg(test)]
mod tests {
    const TABLE: super::NamedNumbers = named_numbers! { read = 0, write = 1, E2BIG = 7, minimum = i64::MIN };

    #[test]
    fn names_keep_their_numbers_and_order() {
        let pairs: Vec<_> = TABLE.iter().collect();
        assert_eq!(pairs, [("read", 0), ("write", 1), ("E2BIG", 7), ("minimum", i64::MIN)]);
        assert_eq!(TABLE.get("E2BIG"), Some(7));
        assert_eq!(TABLE.get("E2BI"), None);
        assert_eq!(TABLE.get(""), None);
        const EMPTY: super::NamedNumbers = named_numbers! {};
        assert!(EMPTY.iter().next().is_none());
    }
}
