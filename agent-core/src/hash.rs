//! Fixed hashes for seeds and orders that must mean the same in every build
//! and run (std's hasher is randomised per process). Pure.

/// FNV-1a (64-bit) of the concatenation of `parts`.
pub fn fnv1a(parts: &[&[u8]]) -> u64 {
    parts
        .iter()
        .flat_map(|part| part.iter())
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// SplitMix64's output function: spreads nearby inputs (counters, seeds
/// plus offsets) to unrelated 64-bit values.
pub fn splitmix64(z: u64) -> u64 {
    let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// SplitMix64's increment, the golden ratio in 64 bits.
pub const SPLITMIX64_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

#[cfg(test)]
mod tests {
    use super::{SPLITMIX64_GAMMA, fnv1a, splitmix64};

    /// The first outputs of Vigna's reference `splitmix64.c` from state 0:
    /// each call adds the gamma to the state, then mixes it.
    #[test]
    fn splitmix64_matches_the_reference_generator() {
        assert_eq!(splitmix64(SPLITMIX64_GAMMA), 0xE220_A839_7B1D_CDAF);
        assert_eq!(
            splitmix64(SPLITMIX64_GAMMA.wrapping_mul(2)),
            0x6E78_9E6A_A1B9_65F4
        );
    }

    /// Reference values of FNV-1a 64 (the published test vectors of
    /// Fowler, Noll and Vo: "" and "a").
    #[test]
    fn matches_the_reference_vectors() {
        assert_eq!(fnv1a(&[]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(&[b"a"]), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(&[b"fo", b"obar"]), fnv1a(&[b"foobar"]));
        assert_eq!(fnv1a(&[b"foobar"]), 0x8594_4171_f739_67e8);
    }
}
