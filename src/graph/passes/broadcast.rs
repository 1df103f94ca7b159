//! How a constant operand broadcasts against the tensor it meets, as the
//! passes that move per-channel values around (BN folding, pointwise
//! convolutions as matrix products) need to know it.

/// Whether an operand of shape `shape` broadcasts against a tensor of
/// shape `target` (numpy rules, right-aligned) as one value per channel:
/// it reaches axis 1 of `target`, holds `target[1]` values there and 1
/// along every other dimension (`[K, 1, 1]`, `[1, K, 1, 1]` against
/// `[N, K, H, W]`; not `[K]`, which lines up with the last axis).
pub(super) fn broadcasts_per_channel(shape: &[usize], target: &[usize]) -> bool {
    let Some(&channels) = target.get(1) else {
        return false;
    };
    // Where `shape`'s first dimension lines up in `target`.
    let Some(offset) = target.len().checked_sub(shape.len()) else {
        return false;
    };
    offset <= 1
        && shape.iter().enumerate().all(|(d, &extent)| {
            if offset + d == 1 {
                extent == channels
            } else {
                extent == 1
            }
        })
}

#[cfg(test)]
mod tests {
    use super::broadcasts_per_channel;

    #[test]
    fn per_channel_shapes_are_recognised() {
        let y = [1, 8, 5, 5];
        for shape in [&[8, 1, 1][..], &[1, 8, 1, 1]] {
            assert!(broadcasts_per_channel(shape, &y), "{shape:?}");
        }
        for shape in [
            &[8][..],
            &[1, 8],
            &[1, 8, 1],
            &[],
            &[8, 5, 1],
            &[2, 8, 1, 1],
            &[1, 1, 8, 1, 1],
        ] {
            assert!(!broadcasts_per_channel(shape, &y), "{shape:?}");
        }
        // A rank-2 target: `[K]` is per channel there.
        assert!(broadcasts_per_channel(&[8], &[3, 8]));
        assert!(!broadcasts_per_channel(&[8], &[8]));
    }
}
