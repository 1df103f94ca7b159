//! Channels-first (ONNX's `[N, C, spatial…]`) and channels-last
//! (`[N, spatial…, C]`) shapes and permutations, and the weight layouts of
//! a convolution in each (`[K, C/group, kernel…]`, `[kernel…, C/group, K]`).

/// `[N, spatial…, C]` as `[N, C, spatial…]` (ranks below 3 unchanged).
pub fn channels_first(shape: &[usize]) -> Vec<usize> {
    permuted(shape, &to_channels_first(shape.len()))
}

/// `[N, C, spatial…]` as `[N, spatial…, C]` (ranks below 3 unchanged).
pub fn channels_last(shape: &[usize]) -> Vec<usize> {
    permuted(shape, &to_channels_last(shape.len()))
}

/// A channels-last weight `[kernel…, C/group, K]` as ONNX's
/// `[K, C/group, kernel…]` (ranks below 3 unchanged).
pub fn weight_channels_first(shape: &[usize]) -> Vec<usize> {
    permuted(shape, &weight_to_channels_first(shape.len()))
}

/// The permutation (output dimension `i` is input dimension `perm[i]`, as
/// ONNX's Transpose) from channels first to channels last at `rank`: `[0,
/// 2, 3, …, 1]` (the identity below rank 3).
pub fn to_channels_last(rank: usize) -> Vec<usize> {
    if rank < 3 {
        return (0..rank).collect();
    }
    std::iter::once(0).chain(2..rank).chain([1]).collect()
}

/// The permutation from channels last to channels first: `[0, rank−1, 1,
/// …, rank−2]` (the identity below rank 3).
pub fn to_channels_first(rank: usize) -> Vec<usize> {
    if rank < 3 {
        return (0..rank).collect();
    }
    [0, rank - 1].into_iter().chain(1..rank - 1).collect()
}

/// The permutation from ONNX's weight `[K, C/group, kernel…]` to
/// channels last `[kernel…, C/group, K]` (the identity below rank 3).
pub fn weight_to_channels_last(rank: usize) -> Vec<usize> {
    if rank < 3 {
        return (0..rank).collect();
    }
    (2..rank).chain([1, 0]).collect()
}

/// The permutation from a channels-last weight back to ONNX's.
pub fn weight_to_channels_first(rank: usize) -> Vec<usize> {
    if rank < 3 {
        return (0..rank).collect();
    }
    [rank - 1, rank - 2]
        .into_iter()
        .chain(0..rank - 2)
        .collect()
}

/// `shape` permuted: dimension `i` of the result is `shape[perm[i]]`.
pub fn permuted(shape: &[usize], perm: &[usize]) -> Vec<usize> {
    perm.iter().map(|&p| shape[p]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_round_trip() {
        assert_eq!(channels_last(&[1, 64, 56, 28]), [1, 56, 28, 64]);
        assert_eq!(channels_first(&[1, 56, 28, 64]), [1, 64, 56, 28]);
        assert_eq!(to_channels_last(4), [0, 2, 3, 1]);
        assert_eq!(to_channels_first(4), [0, 3, 1, 2]);
        assert_eq!(weight_to_channels_last(4), [2, 3, 1, 0]);
        let w = [32, 16, 3, 5];
        let last = permuted(&w, &weight_to_channels_last(4));
        assert_eq!(last, [3, 5, 16, 32]);
        assert_eq!(weight_channels_first(&last), w);
        for rank in 0..6 {
            let shape: Vec<usize> = (2..rank + 2).collect();
            assert_eq!(channels_first(&channels_last(&shape)), shape);
            let w_last = permuted(&shape, &weight_to_channels_last(rank));
            assert_eq!(weight_channels_first(&w_last), shape);
        }
    }
}
