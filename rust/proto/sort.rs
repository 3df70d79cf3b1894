// SPDX-License-Identifier: GPL-2.0

//! In-place sorting without `core`'s sort.
//!
//! `core`'s slice sorts end in a panic for inconsistent orderings
//! (`panic_on_ord_violation`) that the kernel's objtool does not know as
//! noreturn, so a module that instantiates them builds with "falls through
//! to next function" warnings. A heapsort needs no such path: O(n log n),
//! no allocation, not stable.

/// Sorts `v` by the key `key` gives each element, smallest first.
pub fn sort_by_key<T, K: Ord>(v: &mut [T], key: impl Fn(&T) -> K) {
    let n = v.len();
    for start in (0..n / 2).rev() {
        sift_down(v, start, n, &key);
    }
    for end in (1..n).rev() {
        v.swap(0, end);
        sift_down(v, 0, end, &key);
    }
}

/// Restores the max-heap below `root` within `v[..end]`.
fn sift_down<T, K: Ord>(v: &mut [T], mut root: usize, end: usize, key: &impl Fn(&T) -> K) {
    loop {
        let mut child = 2 * root + 1;
        if child >= end {
            return;
        }
        if child + 1 < end && key(&v[child]) < key(&v[child + 1]) {
            child += 1;
        }
        if key(&v[root]) >= key(&v[child]) {
            return;
        }
        v.swap(root, child);
        root = child;
    }
}

#[cfg(test)]
mod tests {
    use super::sort_by_key;

    #[test]
    fn sorts_like_core() {
        let mut seed = 0x2545_f491_u32;
        for n in 0..200 {
            let mut v = [0u32; 200];
            for x in v[..n].iter_mut() {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                *x = seed % 50;
            }
            let mut want = v;
            want[..n].sort_unstable();
            sort_by_key(&mut v[..n], |x| *x);
            assert_eq!(v, want, "n={n}");
        }
    }

    #[test]
    fn sorts_by_key() {
        let mut v = [(3, 'c'), (1, 'a'), (2, 'b')];
        sort_by_key(&mut v, |p| p.0);
        assert_eq!(v, [(1, 'a'), (2, 'b'), (3, 'c')]);
    }
}
