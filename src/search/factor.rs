//! Sampling tile sizes: factorisations of a loop extent into inner tile
//! factors, mostly perfect (the product divides the extent, no guards), now
//! and then not (a power of two that does not divide, guarded).

use rand::{Rng, RngExt};

/// Largest innermost tile factor sampled (the vector and register level).
pub const MAX_INNERMOST_FACTOR: i64 = 64;

/// Probability of sampling a non-perfect tiling.
const NON_PERFECT: f64 = 0.1;

/// The divisors of `n` (ascending).
pub fn divisors(n: i64) -> Vec<i64> {
    let mut small = Vec::new();
    let mut large = Vec::new();
    let mut d = 1;
    while d * d <= n {
        if n % d == 0 {
            small.push(d);
            if d * d != n {
                large.push(n / d);
            }
        }
        d += 1;
    }
    small.extend(large.into_iter().rev());
    small
}

/// `parts` inner factors (outer to inner) for a loop of `extent`, whose
/// product is at most `extent`; the outer loop takes the rest.
pub fn sample_factors<R: Rng>(extent: i64, parts: usize, rng: &mut R) -> Vec<i64> {
    let extent = extent.max(1);
    let mut factors = vec![1i64; parts];
    if rng.random_bool(NON_PERFECT) {
        let mut product = 1i64;
        for i in (0..parts).rev() {
            let cap = if i + 1 == parts {
                MAX_INNERMOST_FACTOR
            } else {
                extent
            };
            let options: Vec<i64> = (0..7)
                .map(|p| 1i64 << p)
                .filter(|&f| f <= cap && product * f <= extent)
                .collect();
            let f = options[rng.random_range(0..options.len())];
            factors[i] = f;
            product *= f;
        }
        return factors;
    }
    let mut remaining = extent;
    for i in (0..parts).rev() {
        let cap = if i + 1 == parts {
            MAX_INNERMOST_FACTOR
        } else {
            remaining
        };
        let options: Vec<i64> = divisors(remaining)
            .into_iter()
            .filter(|&d| d <= cap)
            .collect();
        let f = options[rng.random_range(0..options.len())];
        factors[i] = f;
        remaining /= f;
    }
    factors
}

/// A register tile for one axis of a multi-level tiling: every level 1
/// but the innermost, a divisor of `extent` among `allowed` ones. Falls
/// back to [`sample_factors`] when `extent` has no such divisor.
pub fn sample_register_tile<R: Rng>(
    extent: i64,
    parts: usize,
    allowed: impl Fn(i64) -> bool,
    rng: &mut R,
) -> Vec<i64> {
    let options: Vec<i64> = divisors(extent.max(1))
        .into_iter()
        .filter(|&d| allowed(d))
        .collect();
    if options.is_empty() || parts == 0 {
        return sample_factors(extent, parts, rng);
    }
    let mut factors = vec![1i64; parts];
    factors[parts - 1] = options[rng.random_range(0..options.len())];
    factors
}

/// The depth of a micro-kernel call (its kc): a divisor of `extent`
/// between [`MIN_KERNEL_DEPTH`] and [`MAX_KERNEL_DEPTH`] when there is one
/// (each call then amortises loading and storing its accumulator tile, and
/// its panels stay in cache); the whole extent when it is shorter than the
/// range; else (a long extent with no divisor in the range, a prime) a
/// power of two in the range, whose last block is the kernel's edge.
pub fn sample_kernel_depth<R: Rng>(extent: i64, rng: &mut R) -> i64 {
    sample_depth_in(extent, MIN_KERNEL_DEPTH, MAX_KERNEL_DEPTH, rng)
}

/// The depth of one reduction chunk of a micro-kernel call whose
/// reduction runs outside the tiles it accumulates (each chunk of the
/// packed operand is reused by every tile while it is in L1): as
/// [`sample_kernel_depth`], between [`MIN_KERNEL_CHUNK`] and
/// [`MAX_KERNEL_CHUNK`].
pub fn sample_kernel_chunk<R: Rng>(extent: i64, rng: &mut R) -> i64 {
    sample_depth_in(extent, MIN_KERNEL_CHUNK, MAX_KERNEL_CHUNK, rng)
}

/// A divisor of `extent` in `min..=max`, the whole extent when shorter
/// than `min`, else a power of two times `min` up to `max`.
fn sample_depth_in<R: Rng>(extent: i64, min: i64, max: i64, rng: &mut R) -> i64 {
    let extent = extent.max(1);
    let in_range: Vec<i64> = divisors(extent)
        .into_iter()
        .filter(|&d| (min..=max).contains(&d))
        .collect();
    if !in_range.is_empty() {
        return in_range[rng.random_range(0..in_range.len())];
    }
    if extent < min {
        return extent;
    }
    let powers: Vec<i64> = (0..).map(|p| min << p).take_while(|&d| d <= max).collect();
    powers[rng.random_range(0..powers.len())]
}

/// The shortest chunk [`sample_kernel_chunk`] samples when the extent
/// allows.
pub const MIN_KERNEL_CHUNK: i64 = 16;
/// The longest chunk [`sample_kernel_chunk`] samples (ResNet-50's
/// 512-channel 3×3 convolution over 7×7 inside the model, one core: chunks
/// of 32 channels 5.3 ms for its two nodes, 64 5.7, 128 5.9; the whole
/// 512 per call 6.3).
pub const MAX_KERNEL_CHUNK: i64 = 128;

/// The shortest micro-kernel call depth sampled when the extent allows
/// (matmul 1024³ on one core: kc 32 ran at 0.93–0.99× the gemm crate, kc
/// 128–512 at 0.99–1.14×: each call reloads and stores its C tile).
pub const MIN_KERNEL_DEPTH: i64 = 128;
/// The longest micro-kernel call depth sampled.
pub const MAX_KERNEL_DEPTH: i64 = 512;

/// One factor of `extent` for a cache block, which is best one tile or
/// every tile: 1 or the whole extent with probability `extreme` each,
/// otherwise a divisor at random.
pub fn sample_block<R: Rng>(extent: i64, extreme: f64, rng: &mut R) -> i64 {
    let roll: f64 = rng.random_range(0.0..1.0);
    if roll < extreme {
        1
    } else if roll < 2.0 * extreme {
        extent.max(1)
    } else {
        sample_factors(extent, 1, rng)[0]
    }
}

/// Moves a factor between two levels of a tiling (the outer loop counts as
/// level 0), keeping perfect tilings perfect; resamples non-perfect ones.
pub fn mutate_factors<R: Rng>(extent: i64, factors: &[i64], rng: &mut R) -> Vec<i64> {
    let product: i64 = factors.iter().product();
    if product <= 0 || extent % product != 0 {
        return sample_factors(extent, factors.len(), rng);
    }
    // Levels: the outer loop's extent, then the factors.
    let mut levels = vec![extent / product];
    levels.extend_from_slice(factors);
    for _ in 0..8 {
        let from = rng.random_range(0..levels.len());
        let to = rng.random_range(0..levels.len());
        if from == to || levels[from] == 1 {
            continue;
        }
        let ds: Vec<i64> = divisors(levels[from])
            .into_iter()
            .filter(|&d| d > 1)
            .collect();
        let d = ds[rng.random_range(0..ds.len())];
        let moved = levels[to] * d;
        if to + 1 == levels.len() && moved > MAX_INNERMOST_FACTOR {
            continue;
        }
        levels[from] /= d;
        levels[to] = moved;
        return levels[1..].to_vec();
    }
    sample_factors(extent, factors.len(), rng)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn a_long_extent_without_a_divisor_in_range_gets_a_full_depth_with_an_edge() {
        let mut rng = StdRng::seed_from_u64(5);
        for _ in 0..50 {
            let d = sample_kernel_depth(1031, &mut rng);
            assert!([128, 256, 512].contains(&d), "{d} for the prime 1031");
        }
        assert_eq!(
            sample_kernel_depth(127, &mut rng),
            127,
            "shorter than the range"
        );
    }

    #[test]
    fn kernel_depths_divide_and_stay_in_range() {
        let mut rng = StdRng::seed_from_u64(3);
        for extent in [1024, 768, 100, 7, 1] {
            for _ in 0..50 {
                let d = sample_kernel_depth(extent, &mut rng);
                assert_eq!(extent % d, 0, "{d} divides {extent}");
                assert!(d <= MAX_KERNEL_DEPTH);
                let any_in_range = divisors(extent)
                    .iter()
                    .any(|&x| (MIN_KERNEL_DEPTH..=MAX_KERNEL_DEPTH).contains(&x));
                assert!(!any_in_range || d >= MIN_KERNEL_DEPTH, "{d} of {extent}");
            }
        }
        assert_eq!(sample_kernel_depth(7, &mut rng), 7);
    }

    #[test]
    fn kernel_chunks_divide_and_stay_in_their_shorter_range() {
        let mut rng = StdRng::seed_from_u64(4);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let d = sample_kernel_chunk(512, &mut rng);
            assert_eq!(512 % d, 0, "{d} divides 512");
            assert!((MIN_KERNEL_CHUNK..=MAX_KERNEL_CHUNK).contains(&d), "{d}");
            seen.insert(d);
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![16, 32, 64, 128]);
        assert_eq!(
            sample_kernel_chunk(9, &mut rng),
            9,
            "shorter than the range"
        );
        let d = sample_kernel_chunk(257, &mut rng);
        assert!([16, 32, 64, 128].contains(&d), "{d} for the prime 257");
    }

    #[test]
    fn factors_fit_the_extent() {
        assert_eq!(divisors(12), vec![1, 2, 3, 4, 6, 12]);
        let mut rng = StdRng::seed_from_u64(1);
        for extent in [1, 7, 56, 64, 512, 1000] {
            for _ in 0..200 {
                let f = sample_factors(extent, 3, &mut rng);
                assert_eq!(f.len(), 3);
                assert!(f.iter().product::<i64>() <= extent, "{extent}: {f:?}");
                assert!(f[2] <= MAX_INNERMOST_FACTOR);
                let r = sample_register_tile(extent, 3, |d| d % 4 == 0, &mut rng);
                assert!(r.iter().product::<i64>() <= extent, "{extent}: {r:?}");
                if extent % 4 == 0 {
                    assert_eq!(&r[..2], &[1, 1], "{extent}: {r:?}");
                    assert_eq!((extent % r[2], r[2] % 4), (0, 0), "{extent}: {r:?}");
                }
                let b = sample_block(extent, 0.25, &mut rng);
                assert!((1..=extent).contains(&b), "{extent}: {b}");
                let m = mutate_factors(extent, &f, &mut rng);
                assert!(m.iter().product::<i64>() <= extent, "{extent}: {m:?}");
                assert!(m.iter().all(|&x| x >= 1));
            }
        }
    }
}
