//! Pixels: draws a scene's elements into an `RgbaImage`, with anti-aliased
//! shapes and text rasterized by `ab_glyph` from the bundled DejaVu Sans.
//!
//! The fonts are compiled in (`assets/fonts/`, license beside them) so a
//! render never depends on the host's fonts and the same scene always gives
//! the same bytes. Every element is drawn inside its own rectangle clipped by
//! its ancestors, the very bounds the UI tree reports.

use super::scene::{Align, Color, Element, Glyph, Rect, TextLook};
use super::widgets::{OUTLINE, PRIMARY, WHITE};
use ab_glyph::{Font, FontRef, GlyphId, PxScale, PxScaleFont, ScaleFont, point};
use image::{Rgba, RgbaImage};
use std::sync::LazyLock;

static REGULAR_TTF: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");
static BOLD_TTF: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans-Bold.ttf");

/// Regular and bold faces; `None` only if the bundled files were corrupt,
/// in which case text is left out rather than the render failing.
static FONTS: LazyLock<Option<(FontRef<'static>, FontRef<'static>)>> = LazyLock::new(|| {
    Some((
        FontRef::try_from_slice(REGULAR_TTF).ok()?,
        FontRef::try_from_slice(BOLD_TTF).ok()?,
    ))
});

fn font(bold: bool) -> Option<&'static FontRef<'static>> {
    FONTS.as_ref().map(|(r, b)| if bold { b } else { r })
}

/// ab_glyph scales by line height; Android sizes text by the em square.
fn px_scale(font: &FontRef, em: f32) -> PxScale {
    let upem = font.units_per_em().unwrap_or(2048.0);
    PxScale::from(em * font.height_unscaled() / upem)
}

/// Width in pixels of `text` set at `em` pixels.
pub(crate) fn text_width(text: &str, em: f32, bold: bool) -> f32 {
    let mut pen = Pen::new(em, bold);
    text.chars().for_each(|c| pen.push(c));
    pen.width()
}

/// Text measured as it is set, one character after the other: a line
/// grows, or is cut, without being measured again from its start (which
/// made a long text field quadratic). Its widths are [`text_width`]'s to
/// the bit, the same sums in the same order.
#[derive(Clone, Copy)]
struct Pen {
    face: Option<PxScaleFont<&'static FontRef<'static>>>,
    em: f32,
    chars: usize,
    width: f32,
    prev: Option<GlyphId>,
}

impl Pen {
    fn new(em: f32, bold: bool) -> Self {
        Self {
            face: font(bold).map(|f| f.as_scaled(px_scale(f, em))),
            em,
            chars: 0,
            width: 0.0,
            prev: None,
        }
    }

    fn push(&mut self, c: char) {
        self.chars += 1;
        if let Some(face) = &self.face {
            let id = face.glyph_id(c);
            if let Some(p) = self.prev {
                self.width += face.kern(p, id);
            }
            self.width += face.h_advance(id);
            self.prev = Some(id);
        }
    }

    fn width(&self) -> f32 {
        match self.face {
            Some(_) => self.width,
            None => self.em * 0.55 * self.chars as f32,
        }
    }

    /// The width with `c` set after what is set.
    fn width_with(mut self, c: char) -> f32 {
        self.push(c);
        self.width()
    }
}

/// Whether the bundled regular face has a glyph for `c`.
#[cfg(test)]
pub(crate) fn has_glyph(c: char) -> bool {
    font(false).is_some_and(|f| f.glyph_id(c).0 != 0)
}

/// Draws `root` on a white screen of `width`×`height`.
pub(crate) fn render(root: &Element, width: u32, height: u32) -> RgbaImage {
    let mut canvas = Canvas {
        img: RgbaImage::from_pixel(width, height, Rgba(WHITE)),
    };
    let screen = Rect::new(0, 0, width as i32, height as i32);
    canvas.element(root, screen);
    canvas.img
}

struct Canvas {
    img: RgbaImage,
}

/// Coverage of a pixel by a shape whose signed distance at its centre is
/// `d` (negative inside): a one-pixel ramp gives the anti-aliased edge.
fn coverage(d: f32) -> f32 {
    (0.5 - d).clamp(0.0, 1.0)
}

/// Signed distance from `(px, py)` to a rounded rectangle.
fn rrect_distance(px: f32, py: f32, r: Rect, radius: f32) -> f32 {
    let cx = (r.x1 + r.x2) as f32 / 2.0;
    let cy = (r.y1 + r.y2) as f32 / 2.0;
    let hw = r.w() as f32 / 2.0;
    let hh = r.h() as f32 / 2.0;
    let radius = radius.min(hw).min(hh).max(0.0);
    let qx = (px - cx).abs() - (hw - radius);
    let qy = (py - cy).abs() - (hh - radius);
    let outside = (qx.max(0.0).powi(2) + qy.max(0.0).powi(2)).sqrt();
    outside + qx.max(qy).min(0.0) - radius
}

impl Canvas {
    fn blend(&mut self, x: i32, y: i32, c: Color, cov: f32) {
        if x < 0 || y < 0 || x >= self.img.width() as i32 || y >= self.img.height() as i32 {
            return;
        }
        let a = cov * f32::from(c[3]) / 255.0;
        if a <= 0.0 {
            return;
        }
        let p = self.img.get_pixel_mut(x as u32, y as u32);
        if a >= 1.0 {
            *p = Rgba([c[0], c[1], c[2], 255]);
            return;
        }
        for (dst, src) in p.0.iter_mut().zip(c).take(3) {
            *dst = (f32::from(src) * a + f32::from(*dst) * (1.0 - a)).round() as u8;
        }
        p.0[3] = 255;
    }

    /// Calls `f(x, y)` for each pixel of `r` inside `clip` and the image,
    /// blending `f`'s colour and coverage.
    fn shade(&mut self, r: Rect, clip: Rect, mut f: impl FnMut(f32, f32) -> Option<(Color, f32)>) {
        let img = Rect::new(0, 0, self.img.width() as i32, self.img.height() as i32);
        let area = r.intersect(clip).intersect(img);
        for y in area.y1..area.y2 {
            for x in area.x1..area.x2 {
                if let Some((c, cov)) = f(x as f32 + 0.5, y as f32 + 0.5) {
                    self.blend(x, y, c, cov);
                }
            }
        }
    }

    fn fill_rrect(&mut self, r: Rect, radius: f32, c: Color, clip: Rect) {
        if radius <= 0.0 {
            self.shade(r, clip, |_, _| Some((c, 1.0)));
        } else {
            self.shade(r, clip, |x, y| {
                Some((c, coverage(rrect_distance(x, y, r, radius))))
            });
        }
    }

    fn stroke_rrect(&mut self, r: Rect, radius: f32, width: i32, c: Color, clip: Rect) {
        let inner = r.inset(width, width);
        let inner_radius = (radius - width as f32).max(0.0);
        self.shade(r, clip, |x, y| {
            let outer = coverage(rrect_distance(x, y, r, radius));
            let inside = if inner.is_empty() {
                0.0
            } else {
                coverage(rrect_distance(x, y, inner, inner_radius))
            };
            Some((c, (outer - inside).max(0.0)))
        });
    }

    fn fill_circle(&mut self, cx: f32, cy: f32, radius: f32, c: Color, clip: Rect) {
        let r = Rect::new(
            (cx - radius - 1.0) as i32,
            (cy - radius - 1.0) as i32,
            (cx + radius + 2.0) as i32,
            (cy + radius + 2.0) as i32,
        );
        self.shade(r, clip, |x, y| {
            let d = ((x - cx).powi(2) + (y - cy).powi(2)).sqrt() - radius;
            Some((c, coverage(d)))
        });
    }

    /// A thick line segment with round ends.
    fn line(
        &mut self,
        (x1, y1): (f32, f32),
        (x2, y2): (f32, f32),
        width: f32,
        c: Color,
        clip: Rect,
    ) {
        let half = width / 2.0;
        let r = Rect::new(
            (x1.min(x2) - half - 1.0) as i32,
            (y1.min(y2) - half - 1.0) as i32,
            (x1.max(x2) + half + 2.0) as i32,
            (y1.max(y2) + half + 2.0) as i32,
        );
        let (dx, dy) = (x2 - x1, y2 - y1);
        let len2 = (dx * dx + dy * dy).max(1e-6);
        self.shade(r, clip, |x, y| {
            let t = (((x - x1) * dx + (y - y1) * dy) / len2).clamp(0.0, 1.0);
            let d = ((x - x1 - t * dx).powi(2) + (y - y1 - t * dy).powi(2)).sqrt() - half;
            Some((c, coverage(d)))
        });
    }

    /// Draws one line of text starting at `x` with its baseline at `y`,
    /// clipped.
    fn text_run(
        &mut self,
        text: &str,
        (x, y): (f32, f32),
        em: f32,
        bold: bool,
        c: Color,
        clip: Rect,
    ) {
        let Some(font) = font(bold) else {
            return;
        };
        let scale = px_scale(font, em);
        let scaled = font.as_scaled(scale);
        let mut pen = x;
        let mut prev: Option<GlyphId> = None;
        for ch in text.chars() {
            let id = scaled.glyph_id(ch);
            if let Some(p) = prev {
                pen += scaled.kern(p, id);
            }
            let glyph = id.with_scale_and_position(scale, point(pen, y));
            pen += scaled.h_advance(id);
            prev = Some(id);
            if let Some(outlined) = font.outline_glyph(glyph) {
                let b = outlined.px_bounds();
                let (ox, oy) = (b.min.x as i32, b.min.y as i32);
                outlined.draw(|gx, gy, cov| {
                    let (px, py) = (ox + gx as i32, oy + gy as i32);
                    if clip.contains(px, py) {
                        self.blend(px, py, c, cov);
                    }
                });
            }
        }
    }

    fn element(&mut self, e: &Element, clip: Rect) {
        let visible = e.rect.intersect(clip);
        if visible.is_empty() {
            return;
        }
        let look = &e.look;
        let radius = look.radius as f32;
        match (look.fill, look.gradient) {
            (Some(top), Some(bottom)) => {
                let (y1, h) = (e.rect.y1 as f32, e.rect.h().max(1) as f32);
                self.shade(e.rect, visible, |_, y| {
                    let t = ((y - y1) / h).clamp(0.0, 1.0);
                    let mix =
                        |i: usize| (f32::from(top[i]) * (1.0 - t) + f32::from(bottom[i]) * t) as u8;
                    Some(([mix(0), mix(1), mix(2), 255], 1.0))
                });
            }
            (Some(fill), None) => self.fill_rrect(e.rect, radius, fill, visible),
            _ => {}
        }
        if let Some((c, w)) = look.stroke {
            self.stroke_rrect(e.rect, radius, w, c, visible);
        }
        if let Some(c) = look.divider {
            self.fill_rrect(e.rect.bottom(1), 0.0, c, visible);
        }
        self.glyph(&look.glyph, e.rect, visible);
        if let Some(t) = &look.text {
            self.text_block(&e.text, t, e.rect, visible);
        }
        for child in &e.children {
            self.element(child, visible);
        }
    }

    fn text_block(&mut self, text: &str, t: &TextLook, rect: Rect, clip: Rect) {
        let Some(font) = font(t.bold) else {
            return;
        };
        let scaled = font.as_scaled(px_scale(font, t.size));
        let box_ = rect.inset(t.pad, 0);
        let width = box_.w().max(1) as f32;
        let lines = if t.wrap {
            wrap(text, t.size, t.bold, width)
        } else {
            vec![ellipsize(&text.replace('\n', " "), t.size, t.bold, width)]
        };
        let line_h = line_height(t.size);
        let block_h = line_h * lines.len() as f32;
        let top = match t.valign {
            // A multi-line field's padding applies above its text as well.
            Align::Start => (box_.y1 + t.pad) as f32,
            Align::Center => box_.y1 as f32 + (box_.h() as f32 - block_h) / 2.0,
            Align::End => box_.y2 as f32 - block_h,
        };
        // Centre the ink of each line in its slot: ascent and descent of
        // the face, not the em box, decide where the baseline goes.
        let ascent = scaled.ascent();
        let descent = scaled.descent();
        let baseline_in_slot = (line_h + ascent + descent) / 2.0;
        let mut end = (box_.x1 as f32, top + baseline_in_slot);
        for (i, line) in lines.iter().enumerate() {
            let w = text_width(line, t.size, t.bold);
            let x = match t.align {
                Align::Start => box_.x1 as f32,
                Align::Center => box_.x1 as f32 + (width - w) / 2.0,
                Align::End => box_.x2 as f32 - w,
            };
            let baseline = top + line_h * i as f32 + baseline_in_slot;
            if t.shadow {
                let off = (t.size / 16.0).max(1.0);
                self.text_run(
                    line,
                    (x + off, baseline + off),
                    t.size,
                    t.bold,
                    [0, 0, 0, 0x90],
                    clip,
                );
            }
            self.text_run(line, (x, baseline), t.size, t.bold, t.color, clip);
            end = (if t.hint { x } else { x + w }, baseline);
        }
        if t.cursor {
            let (x, baseline) = if t.hint || lines.is_empty() {
                (box_.x1 as f32, top + baseline_in_slot)
            } else {
                end
            };
            let w = (t.size / 12.0).max(2.0);
            let r = Rect::new(
                x as i32 + 1,
                (baseline - ascent) as i32,
                (x + w) as i32 + 1,
                (baseline - descent * 0.6) as i32,
            );
            self.fill_rrect(r, 0.0, PRIMARY, clip);
        }
    }

    fn glyph(&mut self, g: &Glyph, r: Rect, clip: Rect) {
        let (cx, cy) = (
            r.x1 as f32 + r.w() as f32 / 2.0,
            r.y1 as f32 + r.h() as f32 / 2.0,
        );
        let side = r.w().min(r.h()) as f32;
        match g {
            Glyph::None => {}
            Glyph::Switch { on } => {
                let h = side.min(r.w() as f32 * 0.6);
                let track = r.centered(r.w(), h as i32);
                let radius = h / 2.0;
                if *on {
                    self.fill_rrect(track, radius, PRIMARY, clip);
                    self.fill_circle(track.x2 as f32 - radius, cy, h * 0.36, WHITE, clip);
                } else {
                    self.fill_rrect(track, radius, [0xE7, 0xE0, 0xEC, 255], clip);
                    self.stroke_rrect(track, radius, (h / 16.0).max(1.0) as i32, OUTLINE, clip);
                    self.fill_circle(track.x1 as f32 + radius, cy, h * 0.25, OUTLINE, clip);
                }
            }
            Glyph::CheckBox { on } => {
                let s = (side * 0.6) as i32;
                let b = r.centered(s, s);
                let radius = (s / 8) as f32;
                if *on {
                    self.fill_rrect(b, radius, PRIMARY, clip);
                    let s = s as f32;
                    let (x, y) = (b.x1 as f32, b.y1 as f32);
                    let w = s / 8.0;
                    self.line(
                        (x + s * 0.22, y + s * 0.52),
                        (x + s * 0.42, y + s * 0.72),
                        w,
                        WHITE,
                        clip,
                    );
                    self.line(
                        (x + s * 0.42, y + s * 0.72),
                        (x + s * 0.8, y + s * 0.3),
                        w,
                        WHITE,
                        clip,
                    );
                } else {
                    self.fill_rrect(b, radius, WHITE, clip);
                    self.stroke_rrect(b, radius, (s / 10).max(1), OUTLINE, clip);
                }
            }
            Glyph::SeekBar { fraction, pad } => {
                let x1 = (r.x1 + pad) as f32;
                let x2 = (r.x2 - pad) as f32;
                let at = x1 + (x2 - x1) * fraction.clamp(0.0, 1.0);
                let th = (side / 8.0).max(2.0);
                self.line((x1, cy), (x2, cy), th, [0xE7, 0xE0, 0xEC, 255], clip);
                self.line((x1, cy), (at, cy), th, PRIMARY, clip);
                self.fill_circle(at, cy, side * 0.22, PRIMARY, clip);
            }
            Glyph::Badge {
                color,
                letter,
                size,
                top,
            } => {
                let radius = *size as f32 / 2.0;
                let ccy = if *top { r.y1 as f32 + radius } else { cy };
                self.fill_circle(cx, ccy, radius, *color, clip);
                let em = radius * 0.95;
                let w = text_width(letter, em, true);
                self.text_run(
                    letter,
                    (cx - w / 2.0, ccy + em * 0.36),
                    em,
                    true,
                    WHITE,
                    clip,
                );
            }
            Glyph::Symbol { text, size, color } => {
                let w = text_width(text, *size, false);
                self.text_run(
                    text,
                    (cx - w / 2.0, cy + size * 0.36),
                    *size,
                    false,
                    *color,
                    clip,
                );
            }
            Glyph::Trash { color } => {
                let s = side * 0.42;
                let (x, y) = (cx - s / 2.0, cy - s / 2.0);
                let lid = Rect::new(
                    (x - s * 0.1) as i32,
                    y as i32,
                    (x + s * 1.1) as i32,
                    (y + s * 0.14) as i32,
                );
                self.fill_rrect(lid, 1.0, *color, clip);
                let handle = Rect::new(
                    (cx - s * 0.18) as i32,
                    (y - s * 0.12) as i32,
                    (cx + s * 0.18) as i32,
                    y as i32 + 1,
                );
                self.fill_rrect(handle, 1.0, *color, clip);
                let body = Rect::new(
                    (x + s * 0.08) as i32,
                    (y + s * 0.22) as i32,
                    (x + s * 0.92) as i32,
                    (y + s) as i32,
                );
                self.fill_rrect(body, s * 0.1, *color, clip);
            }
            Glyph::Magnifier { color } => {
                let s = side * 0.4;
                let (ox, oy) = (cx - s * 0.15, cy - s * 0.15);
                let w = (s / 6.0).max(2.0);
                self.fill_circle(ox, oy, s * 0.38, *color, clip);
                self.fill_circle(ox, oy, s * 0.38 - w, WHITE, clip);
                self.line(
                    (ox + s * 0.27, oy + s * 0.27),
                    (cx + s * 0.45, cy + s * 0.45),
                    w * 1.2,
                    *color,
                    clip,
                );
            }
            Glyph::Wifi { color } => {
                // A quarter disc with its point down, Android's Wi-Fi shape,
                // sized so its corners stay inside the icon's width.
                let radius = r.w() as f32 * 0.68;
                let (ox, oy) = (cx, cy + radius * 0.45);
                self.shade(r, clip, |x, y| {
                    let (dx, dy) = (x - ox, oy - y);
                    let d = (dx * dx + dy * dy).sqrt();
                    let inside_angle = dy > 0.0 && dx.abs() <= dy;
                    inside_angle.then(|| (*color, coverage(d - radius)))
                });
            }
            Glyph::Bluetooth { color } => {
                let h = side * 0.7;
                let (top, bottom, w) = (cy - h / 2.0, cy + h / 2.0, h * 0.25);
                let line = (side / 12.0).max(1.5);
                self.line((cx, top), (cx, bottom), line, *color, clip);
                self.line((cx, top), (cx + w, top + h / 4.0), line, *color, clip);
                self.line(
                    (cx + w, top + h / 4.0),
                    (cx - w, top + h * 0.75),
                    line,
                    *color,
                    clip,
                );
                self.line((cx, bottom), (cx + w, bottom - h / 4.0), line, *color, clip);
                self.line(
                    (cx + w, bottom - h / 4.0),
                    (cx - w, top + h / 4.0),
                    line,
                    *color,
                    clip,
                );
            }
            Glyph::Battery { level, color } => {
                let h = side * 0.8;
                let w = h * 0.5;
                let body = Rect::new(
                    (cx - w / 2.0) as i32,
                    (cy - h / 2.0) as i32 + 2,
                    (cx + w / 2.0) as i32,
                    (cy + h / 2.0) as i32,
                );
                let nub = Rect::new(
                    (cx - w / 5.0) as i32,
                    body.y1 - 3,
                    (cx + w / 5.0) as i32,
                    body.y1,
                );
                self.fill_rrect(nub, 0.0, *color, clip);
                let line = (w / 8.0).max(2.0) as i32;
                self.stroke_rrect(body, 2.0, line, *color, clip);
                let inner = body.inset(line + 1, line + 1);
                let filled = (inner.h() as f32 * f32::from((*level).min(100)) / 100.0) as i32;
                self.fill_rrect(inner.bottom(filled), 0.0, *color, clip);
            }
            Glyph::Photo { seed } => self.photo(*seed, r, clip),
        }
    }

    /// A little landscape whose colours and shapes come from `seed`, so each
    /// photo is recognizably different and always drawn the same.
    fn photo(&mut self, seed: u64, r: Rect, clip: Rect) {
        let pick = |shift: u32, lo: u8, hi: u8| -> u8 {
            let span = u64::from(hi - lo) + 1;
            lo + ((seed >> shift) % span) as u8
        };
        let frac = |shift: u32, lo: u8, hi: u8| f32::from(pick(shift, lo, hi)) / 100.0;
        let sky_top: Color = [pick(0, 20, 120), pick(8, 80, 170), pick(16, 150, 240), 255];
        let sky_bottom: Color = [
            pick(24, 200, 255),
            pick(32, 150, 220),
            pick(40, 120, 200),
            255,
        ];
        let ground: Color = [pick(48, 30, 110), pick(52, 90, 160), pick(56, 40, 90), 255];
        let hill: Color = [pick(4, 60, 120), pick(12, 60, 110), pick(20, 80, 140), 255];
        let (x1, y1, w, h) = (
            r.x1 as f32,
            r.y1 as f32,
            r.w().max(1) as f32,
            r.h().max(1) as f32,
        );
        let area = clip.intersect(r);
        self.shade(r, area, |_, y| {
            let t = ((y - y1) / h).clamp(0.0, 1.0);
            let mix =
                |i: usize| (f32::from(sky_top[i]) * (1.0 - t) + f32::from(sky_bottom[i]) * t) as u8;
            Some(([mix(0), mix(1), mix(2), 255], 1.0))
        });
        if pick(60, 0, 3) > 0 {
            let sun = [255, 236, 170, 255];
            self.fill_circle(
                x1 + w * frac(36, 15, 85),
                y1 + h * frac(44, 12, 30),
                w.min(h) * frac(30, 6, 12),
                sun,
                area,
            );
        }
        let peaks = [
            (frac(28, 15, 55), frac(34, 20, 40)),
            (frac(42, 55, 90), frac(50, 30, 50)),
        ];
        let two = pick(58, 0, 1) == 1;
        let horizon = y1 + h * frac(18, 60, 80);
        self.shade(r, area, |x, y| {
            if y > horizon {
                return Some((ground, 1.0));
            }
            let above = |(px, py): (f32, f32)| y > y1 + h * py + (x - (x1 + w * px)).abs() * 0.9;
            (above(peaks[0]) || (two && above(peaks[1]))).then_some((hill, 1.0))
        });
    }
}

fn line_height(em: f32) -> f32 {
    (em * 1.3).ceil()
}

/// Height in pixels of `text` wrapped as `t` draws it in a box `width`
/// wide, padding included, so layouts can size paragraphs to fit.
pub(crate) fn wrapped_height(text: &str, t: &TextLook, width: i32) -> i32 {
    let inner = (width - 2 * t.pad).max(1) as f32;
    let lines = wrap(text, t.size, t.bold, inner).len() as f32;
    (lines * line_height(t.size)).ceil() as i32 + 2 * t.pad
}

/// `text` cut to fit `width`, ending in "…" when cut: its longest start,
/// without trailing spaces, that fits with the "…" (nothing when not even
/// the "…" fits).
fn ellipsize(text: &str, em: f32, bold: bool, width: f32) -> String {
    if text_width(text, em, bold) <= width {
        return text.to_string();
    }
    let mut pen = Pen::new(em, bold);
    // The start of the first n characters, trimmed, and its pen.
    let mut kept = (0, pen);
    let mut longest = None;
    for (i, c) in text.char_indices() {
        if kept.1.width_with('…') <= width {
            longest = Some(kept.0);
        }
        pen.push(c);
        if !c.is_whitespace() {
            kept = (i + c.len_utf8(), pen);
        }
    }
    longest.map_or_else(String::new, |end| format!("{}…", &text[..end]))
}

/// `text` broken into lines no wider than `width`, at spaces when possible
/// and inside long words otherwise; explicit newlines are kept.
fn wrap(text: &str, em: f32, bold: bool, width: f32) -> Vec<String> {
    let mut lines = Vec::new();
    for para in text.split('\n') {
        let mut line = String::new();
        let mut pen = Pen::new(em, bold);
        for word in para.split(' ') {
            let mut with_word = pen;
            if !line.is_empty() {
                with_word.push(' ');
            }
            word.chars().for_each(|c| with_word.push(c));
            if with_word.width() <= width {
                if !line.is_empty() {
                    line.push(' ');
                }
                line.push_str(word);
                pen = with_word;
                continue;
            }
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
                pen = Pen::new(em, bold);
            }
            for ch in word.chars() {
                let mut with_char = pen;
                with_char.push(ch);
                if with_char.width() > width && pen.chars > 0 {
                    lines.push(std::mem::take(&mut line));
                    pen = Pen::new(em, bold);
                    pen.push(ch);
                } else {
                    pen = with_char;
                }
                line.push(ch);
            }
        }
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The longest cut of `text` that fits with "…", found by trying every
    /// cut from the longest, each measured whole.
    fn ellipsized_by_trying(text: &str, em: f32, bold: bool, width: f32) -> String {
        if text_width(text, em, bold) <= width {
            return text.to_string();
        }
        let chars: Vec<char> = text.chars().collect();
        (0..chars.len())
            .rev()
            .map(|n| format!("{}…", chars[..n].iter().collect::<String>().trim_end()))
            .find(|candidate| text_width(candidate, em, bold) <= width)
            .unwrap_or_default()
    }

    /// Lines of `text` as the definition reads: words join a line while the
    /// whole line, measured again, fits; a word too wide for a line of its
    /// own is broken between characters, at least one to a line.
    fn wrapped_by_measuring(text: &str, em: f32, bold: bool, width: f32) -> Vec<String> {
        let mut lines = Vec::new();
        for para in text.split('\n') {
            let mut line = String::new();
            for word in para.split(' ') {
                let candidate = if line.is_empty() {
                    word.to_string()
                } else {
                    format!("{line} {word}")
                };
                if text_width(&candidate, em, bold) <= width {
                    line = candidate;
                    continue;
                }
                if !line.is_empty() {
                    lines.push(std::mem::take(&mut line));
                }
                for ch in word.chars() {
                    line.push(ch);
                    if text_width(&line, em, bold) > width && line.chars().count() > 1 {
                        line.pop();
                        lines.push(std::mem::take(&mut line));
                        line.push(ch);
                    }
                }
            }
            lines.push(line);
        }
        lines
    }

    fn text() -> impl Strategy<Value = String> {
        // Narrow and wide letters, spaces, line breaks, a combining accent
        // (no advance of its own), CJK and a glyph the face lacks.
        proptest::collection::vec(
            proptest::sample::select(vec![
                'i', 'W', 'a', ' ', ' ', '\n', '\u{301}', '北', '🙂', '.',
            ]),
            0..40,
        )
        .prop_map(|chars| chars.into_iter().collect())
    }

    proptest! {
        #[test]
        fn a_cut_is_the_longest_that_fits(text in text(), em in 8.0f32..40.0, bold: bool, width in 1.0f32..300.0) {
            let text = text.replace('\n', " ");
            prop_assert_eq!(ellipsize(&text, em, bold, width), ellipsized_by_trying(&text, em, bold, width));
        }

        #[test]
        fn lines_break_where_measuring_them_whole_breaks_them(text in text(), em in 8.0f32..40.0, bold: bool, width in 1.0f32..300.0) {
            prop_assert_eq!(wrap(&text, em, bold, width), wrapped_by_measuring(&text, em, bold, width));
        }
    }
}
