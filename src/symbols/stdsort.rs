//! libstdc++'s `std::sort`, step for step, so that elements comparing equal end up in the same order as in
//! bpftrace.
//!
//! bcc (which bpftrace 0.17 uses for kernel symbols) sorts the lines of `/proc/kallsyms` by address alone
//! with `std::sort` and resolves an address to the *last* symbol at or below it. Several symbols often share
//! an address (`__do_sys_fork`, `__ia32_sys_fork`, `__x64_sys_fork`), and which of them is last after an
//! unstable sort is decided by the sort's exact steps: observed here, bpftrace names some of those addresses
//! after the first alias in file order, some after the second, some after the third. Running the same
//! algorithm on the same input gives the same names. (The same input: `/proc/kallsyms` also lists the
//! loaded BPF programs, so it differs between two tracers' runs; see "Differences" in [`crate::symbols`].)
//!
//! This is libstdc++'s introsort (`bits/stl_algo.h`, unchanged in substance since GCC 4): quicksort with a
//! median-of-three pivot (elements 1, middle and last - 1, moved to the front) and an unguarded Hoare
//! partition, recursing into the right part and looping on the left, down to parts of at most 16 elements;
//! heapsort when the depth limit `2 * floor(log2(n))` runs out; then one insertion sort over the whole range
//! (guarded for the first 16 elements, unguarded after).

const THRESHOLD: usize = 16;

/// Sorts `v` exactly as libstdc++'s `std::sort(v.begin(), v.end(), less)` does.
pub fn sort_by<T, F: Fn(&T, &T) -> bool>(v: &mut [T], less: F) {
    if v.len() < 2 {
        return;
    }
    let depth = 2 * (usize::BITS - 1 - v.len().leading_zeros()) as usize;
    introsort_loop(v, depth, &less);
    final_insertion_sort(v, &less);
}

fn introsort_loop<T, F: Fn(&T, &T) -> bool>(mut v: &mut [T], mut depth: usize, less: &F) {
    while v.len() > THRESHOLD {
        if depth == 0 {
            heap_sort(v, less);
            return;
        }
        depth -= 1;
        let cut = partition_pivot(v, less);
        let (left, right) = v.split_at_mut(cut);
        introsort_loop(right, depth, less);
        v = left;
    }
}

/// `__unguarded_partition_pivot`: the median of elements 1, mid and last - 1 goes to the front and is the
/// pivot; returns the cut.
fn partition_pivot<T, F: Fn(&T, &T) -> bool>(v: &mut [T], less: &F) -> usize {
    let len = v.len();
    let mid = len / 2;
    move_median_to_first(v, 1, mid, len - 1, less);
    // __unguarded_partition(first + 1, last, first)
    let mut first = 1;
    let mut last = len;
    loop {
        while less(&v[first], &v[0]) {
            first += 1;
        }
        last -= 1;
        while less(&v[0], &v[last]) {
            last -= 1;
        }
        if first >= last {
            return first;
        }
        v.swap(first, last);
        first += 1;
    }
}

fn move_median_to_first<T, F: Fn(&T, &T) -> bool>(v: &mut [T], a: usize, b: usize, c: usize, less: &F) {
    let pick = if less(&v[a], &v[b]) {
        if less(&v[b], &v[c]) {
            b
        } else if less(&v[a], &v[c]) {
            c
        } else {
            a
        }
    } else if less(&v[a], &v[c]) {
        a
    } else if less(&v[b], &v[c]) {
        c
    } else {
        b
    };
    v.swap(0, pick);
}

/// `__partial_sort(first, last, last)`: `__make_heap` then `__sort_heap`.
fn heap_sort<T, F: Fn(&T, &T) -> bool>(v: &mut [T], less: &F) {
    let len = v.len();
    if len >= 2 {
        let mut parent = (len - 2) / 2;
        loop {
            adjust_heap(v, parent, len, less);
            if parent == 0 {
                break;
            }
            parent -= 1;
        }
    }
    let mut last = len;
    while last > 1 {
        last -= 1;
        // __pop_heap(first, last, last): the value at `last` is re-inserted from the root's hole.
        v.swap(0, last);
        adjust_heap(&mut v[..last], 0, last, less);
    }
}

/// `__adjust_heap(first, hole, len, value)` where `value` is the element currently at `hole`: the hole
/// moves down to a leaf along the bigger children, then `value` bubbles up (`__push_heap`). Implemented with
/// swaps, which move the same elements to the same places as libstdc++'s moves.
fn adjust_heap<T, F: Fn(&T, &T) -> bool>(v: &mut [T], hole: usize, len: usize, less: &F) {
    let top = hole;
    let mut hole = hole;
    let mut child = hole;
    // `value` travels with the hole (it is swapped down along with it), so it sits at `hole` throughout.
    while child < (len - 1) / 2 {
        child = 2 * (child + 1);
        if less(&v[child], &v[child - 1]) {
            child -= 1;
        }
        v.swap(hole, child);
        hole = child;
    }
    if len % 2 == 0 && child == (len - 2) / 2 {
        child = 2 * (child + 1);
        v.swap(hole, child - 1);
        hole = child - 1;
    }
    // __push_heap(first, hole, top, value)
    while hole > top {
        let parent = (hole - 1) / 2;
        if !less(&v[parent], &v[hole]) {
            break;
        }
        v.swap(hole, parent);
        hole = parent;
    }
}

fn final_insertion_sort<T, F: Fn(&T, &T) -> bool>(v: &mut [T], less: &F) {
    if v.len() > THRESHOLD {
        insertion_sort(&mut v[..THRESHOLD], less);
        for i in THRESHOLD..v.len() {
            unguarded_linear_insert(v, i, less);
        }
    } else {
        insertion_sort(v, less);
    }
}

fn insertion_sort<T, F: Fn(&T, &T) -> bool>(v: &mut [T], less: &F) {
    for i in 1..v.len() {
        if less(&v[i], &v[0]) {
            v[..=i].rotate_right(1);
        } else {
            unguarded_linear_insert(v, i, less);
        }
    }
}

/// Moves `v[i]` left past every element it is less than (something not greater is known to lie left).
fn unguarded_linear_insert<T, F: Fn(&T, &T) -> bool>(v: &mut [T], i: usize, less: &F) {
    let mut at = i;
    while less(&v[at], &v[at - 1]) {
        v.swap(at, at - 1);
        at -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random sequence (xorshift), for inputs with many equal keys.
    fn keys(n: usize, modulo: u64, seed: u64) -> Vec<(u64, usize)> {
        let mut x = seed;
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % modulo, i)
            })
            .collect()
    }

    fn sorted_indices(mut v: Vec<(u64, usize)>) -> Vec<usize> {
        sort_by(&mut v, |a, b| a.0 < b.0);
        assert!(v.windows(2).all(|w| w[0].0 <= w[1].0));
        v.into_iter().map(|(_, i)| i).collect()
    }

    /// Expected permutations come from g++ 12.2 (libstdc++), sorting the same `(key, index)` pairs by key
    /// and printing the indices (`std::partial_sort(b, e, e, less)` for the heapsort fallback, which is what
    /// introsort calls when its depth limit runs out):
    /// ```text
    /// std::vector<std::pair<uint64_t, size_t>> v = ...same xorshift...;
    /// std::sort(v.begin(), v.end(), [](auto &a, auto &b) { return a.first < b.first; });
    /// ```
    /// (Checked the same way for n up to 100000, keys modulo 2..10^6, a few seeds: all identical.)
    #[test]
    fn equal_keys_end_up_where_libstdcxx_puts_them() {
        assert_eq!(
            sorted_indices(keys(40, 4, 88172645463325252)),
            [
                2, 37, 29, 25, 0, 11, 20, 39, 35, 31, 24, 22, 15, 3, 5, 6, 10, 9, 14, 4, 33, 26, 8, 21, 23,
                1, 38, 13, 36, 12, 34, 16, 32, 17, 30, 18, 28, 27, 19, 7
            ]
        );
        assert_eq!(sorted_indices(keys(10, 3, 7)), [0, 1, 2, 7, 8, 3, 4, 5, 6, 9]);
        assert_eq!(
            sorted_indices(keys(30, 5, 99)),
            [
                1, 6, 18, 17, 14, 28, 4, 24, 7, 23, 9, 21, 19, 29, 0, 5, 13, 12, 11, 15, 16, 20, 10, 22, 8,
                25, 26, 27, 3, 2
            ]
        );
    }

    #[test]
    fn heapsort_fallback_matches_partial_sort() {
        let mut v = keys(20, 3, 7);
        heap_sort(&mut v, &|a: &(u64, usize), b: &(u64, usize)| a.0 < b.0);
        let got: Vec<usize> = v.iter().map(|p| p.1).collect();
        assert_eq!(got, [13, 1, 19, 0, 12, 8, 7, 2, 14, 16, 3, 17, 15, 4, 10, 5, 11, 6, 18, 9]);
    }
}
