use proptest::prelude::*;

use super::*;

const TOKENS: CopyTokens = CopyTokens {
    ordinary: 50,
    source: [60, 61],
    copy: [62, 63],
    pad: 64,
};

fn section(
    sequences: usize,
    max_len: usize,
    max_copies: usize,
    max_noise: usize,
) -> InductionSection {
    InductionSection {
        sequences_per_step: sequences,
        max_len,
        max_copies,
        max_noise,
        ..InductionSection::default()
    }
}

/// Reads a sequence back by its marks: the string between the source
/// marks, and each copy between copy marks with what it must predict.
fn parts(ids: &[i64]) -> (Vec<i64>, Vec<Vec<i64>>) {
    let at = |mark: i64, from: usize| {
        ids[from..]
            .iter()
            .position(|&t| t == mark)
            .map(|p| p + from)
    };
    let open = at(TOKENS.source[0], 0).unwrap();
    let close = at(TOKENS.source[1], open).unwrap();
    let string = ids[open + 1..close].to_vec();
    let mut copies = Vec::new();
    let mut from = close;
    while let Some(start) = at(TOKENS.copy[0], from) {
        let end = at(TOKENS.copy[1], start).unwrap();
        copies.push(ids[start + 1..end].to_vec());
        from = end;
    }
    (string, copies)
}

proptest! {
    /// Every sequence is its string and one or more exact copies; the
    /// targets are the copies' tokens and closing marks, each the next
    /// token, and nothing else; rows are padded to one width.
    #[test]
    fn copies_and_targets_follow_the_layout(
        seed in any::<u64>(),
        sequences in 1usize..6,
        max_len in 1usize..12,
        max_copies in 1usize..4,
        max_noise in 0usize..10,
    ) {
        let s = section(sequences, max_len, max_copies, max_noise);
        let batch = copy_batch(&TOKENS, &s, seed);
        prop_assert_eq!(batch.ids.len(), sequences);
        let width = batch.ids[0].len();
        let mut learned = 0;
        for (ids, targets) in batch.ids.iter().zip(&batch.targets) {
            prop_assert_eq!(ids.len(), width);
            prop_assert_eq!(targets.len(), width);
            prop_assert_eq!(ids[0], TOKENS.pad);
            let (string, copies) = parts(ids);
            prop_assert!((1..=max_len).contains(&string.len()));
            prop_assert!((1..=max_copies).contains(&copies.len()));
            for copy in &copies {
                prop_assert_eq!(copy, &string);
            }
            prop_assert!(string.iter().all(|&t| (0..TOKENS.ordinary).contains(&t)));
            // The positions whose next token is a copied one or a closing
            // copy mark, found from the ids alone.
            let mut expected = vec![IGNORE; width];
            let mut inside = false;
            for i in 1..ids.len() {
                if ids[i] == TOKENS.copy[0] {
                    inside = true;
                } else if inside {
                    expected[i - 1] = ids[i];
                    inside = ids[i] != TOKENS.copy[1];
                }
            }
            prop_assert_eq!(targets, &expected);
            learned += copies.len() * (string.len() + 1);
        }
        prop_assert_eq!(batch.learned(), learned);
        // The same seed draws the same batch; other seeds other ones. One
        // other seed alone may draw the same: a batch of one single-token
        // string has only as many draws as the vocabulary has tokens.
        prop_assert_eq!(&copy_batch(&TOKENS, &s, seed), &batch);
        prop_assert!((1..=8u64).any(|k| copy_batch(&TOKENS, &s, seed ^ k).ids != batch.ids));
    }
}

/// The fixture's tokenizer: its ordinary tokens end where its added
/// tokens begin, and the marks are Qwen's.
#[test]
fn tokens_come_from_the_qwen_tokenizer() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/tiny-qwen25vl/tokenizer.json"
    );
    let tokenizer = tokenizers::Tokenizer::from_file(path).unwrap();
    let tokens = CopyTokens::from_tokenizer(&tokenizer).unwrap();
    let id = |t: &str| i64::from(tokenizer.token_to_id(t).unwrap());
    assert_eq!(tokens.ordinary, id("<|endoftext|>"));
    assert_eq!(tokens.pad, id("<|endoftext|>"));
    assert_eq!(
        tokens.source,
        [id("<|object_ref_start|>"), id("<|object_ref_end|>")]
    );
    assert_eq!(tokens.copy, [id("<|box_start|>"), id("<|box_end|>")]);
    // Every id below `ordinary` is a plain vocabulary entry.
    for t in 0..tokens.ordinary as u32 {
        let text = tokenizer.id_to_token(t).unwrap();
        assert!(!text.starts_with("<|"), "{t}: {text}");
    }
}
