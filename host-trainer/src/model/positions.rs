//! Position bookkeeping of Qwen2.5-VL, as plain integers (no tensors).
//!
//! - [`mrope_positions`]: the (temporal, height, width) rotary positions of a
//!   token sequence, by transformers' `get_rope_index` rule for images: text
//!   tokens count up on all three rows; an image's tokens sit at
//!   `start + (0, row, column)` of its merged grid; the text after it resumes at
//!   `start + max(rows, columns)`.
//! - [`patch_positions`]: each vision patch's (row, column), in the
//!   processor's patch order (2×2 merge groups).
//! - [`Windows`]: the reordering of merged tokens into attention windows and
//!   the window lengths, for the vision blocks that attend within windows.
//!
//! Videos are not handled: BTL works on screenshots.

/// An image's grid of patches: frames (1 for an image), rows, columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    pub t: i64,
    pub h: i64,
    pub w: i64,
}

impl Grid {
    pub fn new(t: i64, h: i64, w: i64) -> Self {
        Self { t, h, w }
    }

    /// Number of vision patches (rows of pixel_values).
    pub fn patches(&self) -> i64 {
        self.t * self.h * self.w
    }

    /// Number of image tokens in the prompt (patches merged `merge × merge`).
    pub fn tokens(&self, merge: i64) -> i64 {
        self.patches() / (merge * merge)
    }

    /// A grid the vision tower can take: positive sizes, rows and columns a multiple of `merge`.
    pub fn check(&self, merge: i64) -> Result<(), String> {
        if self.t <= 0 || self.h <= 0 || self.w <= 0 || self.h % merge != 0 || self.w % merge != 0 {
            return Err(format!(
                "image grid (t={}, h={}, w={}) must be positive with h and w multiples of the merge size {merge}",
                self.t, self.h, self.w
            ));
        }
        Ok(())
    }
}

/// M-RoPE positions of one sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MropePositions {
    /// Rows t, h, w; one column per token.
    pub rows: [Vec<i64>; 3],
    /// `max position + 1 - sequence length`: added to the plain index of each
    /// token generated after the prompt.
    pub delta: i64,
}

/// M-RoPE positions of `ids`. Each run of `image_token_id` takes the next grid
/// of `grids` and must have exactly its [`Grid::tokens`] tokens.
pub fn mrope_positions(
    ids: &[i64],
    image_token_id: i64,
    grids: &mut impl Iterator<Item = Grid>,
    merge: i64,
) -> Result<MropePositions, String> {
    let mut rows: [Vec<i64>; 3] = Default::default();
    for row in &mut rows {
        row.reserve(ids.len());
    }
    let mut next = 0_i64;
    let mut i = 0;
    while i < ids.len() {
        if ids[i] != image_token_id {
            for row in &mut rows {
                row.push(next);
            }
            next += 1;
            i += 1;
            continue;
        }
        let run = ids[i..]
            .iter()
            .take_while(|&&id| id == image_token_id)
            .count();
        let grid = grids.next().ok_or_else(|| {
            format!("image tokens at position {i} but no image grid is left for them")
        })?;
        grid.check(merge)?;
        let (gh, gw) = (grid.h / merge, grid.w / merge);
        if run as i64 != grid.t * gh * gw {
            return Err(format!(
                "{run} image tokens at position {i}, but the image's grid (t={}, h={}, w={}) needs {}",
                grid.t,
                grid.h,
                grid.w,
                grid.tokens(merge)
            ));
        }
        for t in 0..grid.t {
            for r in 0..gh {
                for c in 0..gw {
                    rows[0].push(next + t);
                    rows[1].push(next + r);
                    rows[2].push(next + c);
                }
            }
        }
        next += gh.max(gw);
        i += run;
    }
    let max = rows.iter().flatten().copied().max().unwrap_or(-1);
    Ok(MropePositions {
        rows,
        delta: max + 1 - ids.len() as i64,
    })
}

/// (row, column) of every patch of `grids`, in pixel_values order: the
/// processor emits patches by `merge × merge` groups, each group row-major.
pub fn patch_positions(grids: &[Grid], merge: i64) -> Vec<[i64; 2]> {
    let mut out = Vec::with_capacity(grids.iter().map(|g| g.patches() as usize).sum());
    for grid in grids {
        for _ in 0..grid.t {
            for br in 0..grid.h / merge {
                for bc in 0..grid.w / merge {
                    for r in 0..merge {
                        for c in 0..merge {
                            out.push([br * merge + r, bc * merge + c]);
                        }
                    }
                }
            }
        }
    }
    out
}

/// How the vision tower's windowed blocks see the merged tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Windows {
    /// Merged-token indices in window order: windows of `size × size` merged
    /// tokens, row-major over each frame, row-major inside each window.
    pub order: Vec<i64>,
    /// Number of patches in each non-empty window, in that order.
    pub lengths: Vec<i64>,
}

/// The windows of `grids` for windows of `size × size` merged tokens.
pub fn windows(grids: &[Grid], merge: i64, size: i64) -> Windows {
    let mut order = Vec::new();
    let mut lengths = Vec::new();
    let mut offset = 0;
    for grid in grids {
        let (gh, gw) = (grid.h / merge, grid.w / merge);
        for t in 0..grid.t {
            let frame = offset + t * gh * gw;
            for wr in 0..(gh + size - 1) / size {
                for wc in 0..(gw + size - 1) / size {
                    let before = order.len();
                    for r in wr * size..((wr + 1) * size).min(gh) {
                        for c in wc * size..((wc + 1) * size).min(gw) {
                            order.push(frame + r * gw + c);
                        }
                    }
                    lengths.push((order.len() - before) as i64 * merge * merge);
                }
            }
        }
        offset += grid.t * gh * gw;
    }
    Windows { order, lengths }
}

/// Patches per frame: the full-attention blocks attend within each frame.
pub fn frame_lengths(grids: &[Grid]) -> Vec<i64> {
    grids
        .iter()
        .flat_map(|g| std::iter::repeat_n(g.h * g.w, g.t as usize))
        .collect()
}

#[cfg(test)]
mod tests;
