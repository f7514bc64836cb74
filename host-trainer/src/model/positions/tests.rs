//! Hand-worked examples and invariants of the position rules.

use proptest::prelude::*;

use super::*;

const IMG: i64 = 99;

fn positions(ids: &[i64], grids: &[Grid]) -> Result<MropePositions, String> {
    mrope_positions(ids, IMG, &mut grids.iter().copied(), 2)
}

#[test]
fn text_only_counts_up_on_every_row() {
    let p = positions(&[5, 6, 7, 8], &[]).unwrap();
    for row in &p.rows {
        assert_eq!(row, &[0, 1, 2, 3]);
    }
    assert_eq!(p.delta, 0);
}

#[test]
fn one_image_between_text() {
    // 3 text tokens, a 4×6-patch image (2×3 merged tokens), 2 text tokens.
    let ids = [1, 2, 3, IMG, IMG, IMG, IMG, IMG, IMG, 4, 5];
    let p = positions(&ids, &[Grid::new(1, 4, 6)]).unwrap();
    assert_eq!(p.rows[0], [0, 1, 2, 3, 3, 3, 3, 3, 3, 6, 7]);
    assert_eq!(p.rows[1], [0, 1, 2, 3, 3, 3, 4, 4, 4, 6, 7]);
    assert_eq!(p.rows[2], [0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7]);
    // text resumes at 3 + max(2, 3) = 6; max 7 + 1 - 11 tokens
    assert_eq!(p.delta, -3);
}

#[test]
fn transformers_example_from_the_scouting_notes() {
    // 300×500 image → grid 22×36 → 11×18 = 198 tokens between 5 + 5 text
    // tokens (vision_start/end included); transformers 5.23 gives image rows
    // t = 5, h = 5..15, w = 5..22, text after it 23..27 and rope_delta −180.
    let mut ids = vec![1; 5];
    ids.extend([IMG; 198]);
    ids.extend([1; 5]);
    let p = positions(&ids, &[Grid::new(1, 22, 36)]).unwrap();
    let image = 5..203;
    assert!(p.rows[0][image.clone()].iter().all(|&t| t == 5));
    assert_eq!(p.rows[1][5], 5);
    assert_eq!(p.rows[1][202], 15);
    assert_eq!(p.rows[2][5..23], (5..23).collect::<Vec<_>>()[..]);
    assert_eq!(p.rows[0][203..], [23, 24, 25, 26, 27]);
    assert_eq!(p.delta, -180);
}

#[test]
fn two_images_take_their_grids_in_order() {
    let mut ids = vec![1, IMG]; // 2×2 patches = 1 token
    ids.push(2);
    ids.extend([IMG; 4]); // 4×4 patches = 2×2 tokens
    ids.push(3);
    let p = positions(&ids, &[Grid::new(1, 2, 2), Grid::new(1, 4, 4)]).unwrap();
    assert_eq!(p.rows[0], [0, 1, 2, 3, 3, 3, 3, 5]);
    assert_eq!(p.rows[1], [0, 1, 2, 3, 3, 4, 4, 5]);
    assert_eq!(p.rows[2], [0, 1, 2, 3, 4, 3, 4, 5]);
}

#[test]
fn image_token_count_must_match_the_grid() {
    let err = positions(&[1, IMG, IMG, 2], &[Grid::new(1, 4, 6)]).unwrap_err();
    assert_eq!(
        err,
        "2 image tokens at position 1, but the image's grid (t=1, h=4, w=6) needs 6"
    );
    let err = positions(&[1, IMG], &[]).unwrap_err();
    assert_eq!(
        err,
        "image tokens at position 1 but no image grid is left for them"
    );
    let err = positions(&[IMG], &[Grid::new(1, 3, 2)]).unwrap_err();
    assert!(err.contains("multiples of the merge size 2"), "{err}");
}

#[test]
fn patches_come_in_merge_groups() {
    let p = patch_positions(&[Grid::new(1, 4, 4)], 2);
    assert_eq!(
        p[..8],
        [
            [0, 0],
            [0, 1],
            [1, 0],
            [1, 1],
            [0, 2],
            [0, 3],
            [1, 2],
            [1, 3]
        ]
    );
    assert_eq!(p[8], [2, 0]);
    assert_eq!(p.len(), 16);
}

#[test]
fn windows_of_a_3_by_5_merged_grid() {
    // 6×10 patches, windows of 2×2 merged tokens (merged token k = row·5 + col)
    let w = windows(&[Grid::new(1, 6, 10)], 2, 2);
    assert_eq!(w.order, [0, 1, 5, 6, 2, 3, 7, 8, 4, 9, 10, 11, 12, 13, 14]);
    assert_eq!(w.lengths, [16, 16, 8, 8, 8, 4]);
}

#[test]
fn a_second_image_continues_the_indices() {
    let w = windows(&[Grid::new(1, 2, 2), Grid::new(1, 2, 4)], 2, 4);
    assert_eq!(w.order, [0, 1, 2]);
    assert_eq!(w.lengths, [4, 8]);
    assert_eq!(
        frame_lengths(&[Grid::new(1, 2, 2), Grid::new(2, 2, 4)]),
        [4, 8, 8]
    );
}

fn grid_strategy() -> impl Strategy<Value = Grid> {
    (1..3_i64, 1..12_i64, 1..12_i64).prop_map(|(t, h, w)| Grid::new(t, 2 * h, 2 * w))
}

/// Images have one frame (the processor repeats it for the temporal patch).
fn image_grid_strategy() -> impl Strategy<Value = Grid> {
    (1..12_i64, 1..12_i64).prop_map(|(h, w)| Grid::new(1, 2 * h, 2 * w))
}

proptest! {
    #[test]
    fn window_order_is_a_permutation(grids in prop::collection::vec(grid_strategy(), 1..4), size in 1..6_i64) {
        let w = windows(&grids, 2, size);
        let total: i64 = grids.iter().map(|g| g.tokens(2)).sum();
        let mut sorted = w.order.clone();
        sorted.sort_unstable();
        prop_assert_eq!(sorted, (0..total).collect::<Vec<_>>());
        prop_assert_eq!(w.lengths.iter().sum::<i64>(), total * 4);
        prop_assert!(w.lengths.iter().all(|&l| l > 0 && l <= size * size * 4));
    }

    #[test]
    fn text_positions_increase_by_one_and_delta_matches(
        pieces in prop::collection::vec(prop_oneof![(1..5_usize).prop_map(Err), image_grid_strategy().prop_map(Ok)], 0..6)
    ) {
        let mut ids = Vec::new();
        let mut grids = Vec::new();
        for piece in &pieces {
            match piece {
                Err(n) => ids.extend(std::iter::repeat_n(1, *n)),
                Ok(g) => {
                    // a separator, as vision_start is in real prompts
                    ids.push(7);
                    ids.extend(std::iter::repeat_n(IMG, g.tokens(2) as usize));
                    ids.push(7);
                    grids.push(*g);
                }
            }
        }
        let p = positions(&ids, &grids).unwrap();
        for row in &p.rows {
            prop_assert_eq!(row.len(), ids.len());
        }
        let max = p.rows.iter().flatten().copied().max().unwrap_or(-1);
        prop_assert_eq!(p.delta, max + 1 - ids.len() as i64);
        // the text token after any token is at least one past every earlier position
        for i in 1..ids.len() {
            if ids[i] != IMG {
                let earlier = p.rows.iter().map(|r| r[..i].iter().copied().max().unwrap()).max().unwrap();
                prop_assert_eq!(p.rows[0][i], earlier + 1);
                prop_assert!(p.rows[0][i] == p.rows[1][i] && p.rows[1][i] == p.rows[2][i]);
            }
        }
    }
}
