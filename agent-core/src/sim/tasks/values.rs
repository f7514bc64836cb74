//! Where an instance's names, titles, queries and labels come from.
//!
//! The suite's templates draw them from small fixed pools, and the held-out
//! split names values of those pools that training never sees. A model
//! trained on the other pool values can memorise how each one looks on the
//! screen instead of learning to read; with a dozen first names, that is
//! what a small model does. An *open* draw ([`Split::TrainOpen`]) makes up
//! new pronounceable words for every instance instead, so the only way to
//! find "the contact Kelu Darivo" in a list is to read the list.
//!
//! [`Split::TrainOpen`]: super::Split::TrainOpen

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use std::ops::{Deref, DerefMut, RangeInclusive};

/// A task's random source, and whether its values are made up.
pub(crate) struct Draw {
    rng: ChaCha8Rng,
    open: bool,
}

impl Draw {
    /// Values from the templates' pools.
    pub fn pooled(rng: ChaCha8Rng) -> Draw {
        Draw { rng, open: false }
    }

    /// Made-up values where a template has a pool.
    pub fn open(rng: ChaCha8Rng) -> Draw {
        Draw { rng, open: true }
    }

    pub fn is_open(&self) -> bool {
        self.open
    }

    /// A made-up lowercase word of `syllables` syllables, mostly plain
    /// consonant-vowel ones; about one vowel in seven carries an accent, as
    /// the pools' names often do.
    pub fn word(&mut self, syllables: RangeInclusive<usize>) -> String {
        const ONSETS: [&str; 18] = [
            "b", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
            "ñ",
        ];
        const CLUSTERS: [&str; 8] = ["br", "dr", "gr", "kr", "pl", "sh", "st", "tr"];
        const VOWELS: [&str; 5] = ["a", "e", "i", "o", "u"];
        const ACCENTED: [&str; 8] = ["á", "é", "í", "ó", "ö", "ü", "å", "ø"];
        const DIPHTHONGS: [&str; 3] = ["ai", "ou", "ei"];
        const CODAS: [&str; 5] = ["n", "r", "s", "l", "k"];
        let count = self.rng.random_range(syllables);
        let mut word = String::new();
        for _ in 0..count {
            let onsets: &[&str] = if self.rng.random_ratio(1, 6) {
                &CLUSTERS
            } else {
                &ONSETS
            };
            word.push_str(self.one_of(onsets));
            let vowels: &[&str] = match self.rng.random_range(0..14) {
                0 | 1 => &ACCENTED,
                2 => &DIPHTHONGS,
                _ => &VOWELS,
            };
            word.push_str(self.one_of(vowels));
            if self.rng.random_ratio(1, 4) {
                word.push_str(self.one_of(&CODAS));
            }
        }
        word
    }

    fn one_of(&mut self, items: &[&'static str]) -> &'static str {
        items[self.rng.random_range(0..items.len())]
    }

    /// Two different made-up words of `syllables` syllables.
    pub fn two_words(&mut self, syllables: RangeInclusive<usize>) -> (String, String) {
        loop {
            let (a, b) = (self.word(syllables.clone()), self.word(syllables.clone()));
            if a != b {
                return (a, b);
            }
        }
    }

    /// A made-up name: a capitalised word of two or three syllables.
    pub fn name(&mut self) -> String {
        capitalised(&self.word(2..=3))
    }

    /// A made-up phrase of `words` words, the first capitalised; now and
    /// then one of them is a number, as in "Budget 200 euros".
    pub fn phrase(&mut self, words: RangeInclusive<usize>) -> String {
        let count = self.rng.random_range(words);
        let mut out: Vec<String> = Vec::with_capacity(count);
        for i in 0..count {
            let word = if i > 0 && self.rng.random_ratio(1, 8) {
                self.rng.random_range(2..1000u32).to_string()
            } else {
                self.word(1..=3)
            };
            out.push(if i == 0 { capitalised(&word) } else { word });
        }
        out.join(" ")
    }
}

/// `word` with its first letter upper-cased.
pub(crate) fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

// Templates draw numbers from the generator itself (`rng.random_range`).
impl Deref for Draw {
    type Target = ChaCha8Rng;
    fn deref(&self) -> &ChaCha8Rng {
        &self.rng
    }
}

impl DerefMut for Draw {
    fn deref_mut(&mut self) -> &mut ChaCha8Rng {
        &mut self.rng
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn made_up_words_are_new_every_time_and_shaped_like_words() {
        let mut draw = Draw::open(ChaCha8Rng::seed_from_u64(7));
        let names: Vec<String> = (0..500).map(|_| draw.name()).collect();
        let distinct: std::collections::HashSet<&String> = names.iter().collect();
        // Over 100 kinds of syllable, two or three of them.
        assert!(distinct.len() > 450, "{} distinct of 500", distinct.len());
        for name in &names {
            let first = name.chars().next().unwrap();
            assert!(first.is_uppercase(), "{name}");
            assert!(name.chars().skip(1).all(char::is_lowercase), "{name}");
            assert!((4..=24).contains(&name.chars().count()), "{name}");
        }
        assert!(names.iter().any(|n| !n.is_ascii()), "no accented letter");
        let phrase = draw.phrase(3..=3);
        assert_eq!(phrase.split(' ').count(), 3, "{phrase}");
    }

    #[test]
    fn the_same_seed_makes_up_the_same_words() {
        let make = || {
            let mut draw = Draw::open(ChaCha8Rng::seed_from_u64(3));
            (draw.name(), draw.phrase(1..=4))
        };
        assert_eq!(make(), make());
    }
}
