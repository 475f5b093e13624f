//! "Did you mean ...?": the known name nearest to a misspelt one.

/// The candidate nearest to `name` by edit distance, if it is a likely typo (at most 2 edits).
pub fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    // A candidate whose length differs by more than 2 is more than 2 edits away: not measured (a C++
    // binary has 100,000 long names).
    let len = name.chars().count();
    candidates
        .filter(|c| c.len().abs_diff(len) <= 2 || c.chars().count().abs_diff(len) <= 2)
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance: insertions, deletions and substitutions of one character each count 1.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_near_names_only() {
        assert_eq!(closest("printff", ["printf", "print", "exit"].into_iter()), Some("printf"));
        assert_eq!(closest("frobnicate", ["printf", "exit"].into_iter()), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
