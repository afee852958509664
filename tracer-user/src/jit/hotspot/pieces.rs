//! Where a JVM's code was when its code heaps were read, as the kernel's walk is given it:
//! each code-heap mapping is cut to the runs of used blocks in it ([`pieces`]). A sample in
//! code compiled since the read (a free block then, or the part of the heap not used yet)
//! falls in no mapping the kernel knows: its stack is shipped as a copy and the process read
//! again (`tracer-ebpf`'s `end_walk`, `crate::snapshots`), so the copy is walked once the new
//! code's frame size is known, instead of the walk guessing a frame pointer the code does not
//! keep and the stack ending there.

/// The most pieces one mapping is cut into (a JVM has up to three code heaps, and a process
/// at most `MAX_MAPPINGS` mappings in the kernel): past it, the narrowest free gaps are
/// given to the kernel with the code around them (new code there is walked as before the
/// cut: by frame pointer, cut by userspace where it cannot be trusted).
pub const MAX_PIECES: usize = 24;

/// The parts of the mapping `[start, end)` that held code: the used `runs` (sorted, disjoint)
/// clipped to it, at most `max` of them (the narrowest gaps between them filled first).
pub fn pieces(runs: &[(u64, u64)], start: u64, end: u64, max: usize) -> Vec<(u64, u64)> {
    let clipped: Vec<(u64, u64)> = runs
        .iter()
        .map(|&(s, e)| (s.max(start), e.min(end)))
        .filter(|&(s, e)| s < e)
        .collect();
    let max = max.max(1);
    if clipped.len() <= max {
        return clipped;
    }
    // The gap before each run but the first, narrowest first: the first `len - max` are filled.
    let mut gaps: Vec<(u64, usize)> = (1..clipped.len())
        .map(|i| (clipped[i].0 - clipped[i - 1].1, i))
        .collect();
    gaps.sort_unstable();
    let mut filled = vec![false; clipped.len()];
    for &(_, i) in &gaps[..clipped.len() - max] {
        filled[i] = true;
    }
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(max);
    for (i, &(s, e)) in clipped.iter().enumerate() {
        match out.last_mut() {
            Some(last) if filled[i] => last.1 = e,
            _ => out.push((s, e)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs are clipped to the mapping, and those outside it left out.
    #[test]
    fn runs_are_clipped_to_the_mapping() {
        let runs = [(0x100, 0x200), (0x300, 0x400), (0x500, 0x600)];
        assert_eq!(
            pieces(&runs, 0x180, 0x520, 8),
            vec![(0x180, 0x200), (0x300, 0x400), (0x500, 0x520)]
        );
        assert_eq!(pieces(&runs, 0x600, 0x700, 8), vec![]);
        assert_eq!(pieces(&[], 0, 0x1000, 8), vec![]);
    }

    /// Past the limit, the narrowest gaps are filled first, and the pieces stay in order.
    #[test]
    fn the_narrowest_gaps_are_filled_first() {
        // Gaps of 0x100, 0x10, 0x80, 0x20.
        let runs = [
            (0x000, 0x100),
            (0x200, 0x300),
            (0x310, 0x400),
            (0x480, 0x500),
            (0x520, 0x600),
        ];
        assert_eq!(pieces(&runs, 0, 0x1000, 5), runs.to_vec());
        assert_eq!(
            pieces(&runs, 0, 0x1000, 3),
            vec![(0x000, 0x100), (0x200, 0x400), (0x480, 0x600)]
        );
        assert_eq!(pieces(&runs, 0, 0x1000, 1), vec![(0x000, 0x600)]);
        assert_eq!(pieces(&runs, 0, 0x1000, 0), vec![(0x000, 0x600)]);
    }

    /// Many runs (a heap of alternating used and free blocks) are cut down in one sort.
    #[test]
    fn many_runs_are_bounded() {
        let runs: Vec<(u64, u64)> = (0..100_000u64).map(|i| (i * 0x100, i * 0x100 + 0x80)).collect();
        let cut = pieces(&runs, 0, u64::MAX, MAX_PIECES);
        assert_eq!(cut.len(), MAX_PIECES);
        assert_eq!((cut[0].0, cut[MAX_PIECES - 1].1), (0, 99_999 * 0x100 + 0x80));
        assert!(cut.windows(2).all(|w| w[0].1 < w[1].0));
    }
}
