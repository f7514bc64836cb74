//! What the `framebuffer:` adb service sends: a header of little-endian
//! u32s (AOSP's `fbinfo`), then the pixels. Version 1 has 13 fields,
//! version 2 adds the colour space after the bits per pixel (14). The
//! pixels are in the layout the header's channel offsets and lengths give:
//! RGBA_8888, RGBX_8888, BGRA_8888, RGB_888 or RGB_565 from a phone's
//! `screencap`.
//!
//! The header comes from the device, so nothing in it is trusted before
//! it is checked: the screen size goes through [`check_screen`] and the
//! pixel data's size must be what the size and depth make, so a header
//! cannot make the reader allocate more than the largest screen takes.

use super::{DeviceError, check_screen};
use image::RgbaImage;

const OPERATION: &str = "framebuffer";

/// One colour channel's place in a pixel, in bits from the least
/// significant end of the pixel read as a little-endian number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Channel {
    offset: u32,
    length: u32,
}

/// A `framebuffer:` header, checked: [`Self::parse`] is the only way to
/// make one, so its depth, channels and size are always ones
/// [`Self::decode`] can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FramebufferHeader {
    bits_per_pixel: u32,
    width: u32,
    height: u32,
    red: Channel,
    green: Channel,
    blue: Channel,
    /// Length 0 for a screen without alpha (RGBX, RGB): opaque.
    alpha: Channel,
}

fn refused(reason: String) -> DeviceError {
    DeviceError::Protocol {
        operation: OPERATION.into(),
        reason,
    }
}

/// The header's whole length in bytes, version field included, from its
/// first four bytes (the version).
pub fn header_len(version: [u8; 4]) -> Result<usize, DeviceError> {
    match u32::from_le_bytes(version) {
        1 => Ok(13 * 4),
        2 => Ok(14 * 4),
        v => Err(refused(format!(
            "header version {v} is neither 1 nor 2, the two adb has"
        ))),
    }
}

impl FramebufferHeader {
    /// Reads and checks a whole header (`bytes` as long as [`header_len`]
    /// says).
    pub fn parse(bytes: &[u8]) -> Result<Self, DeviceError> {
        let version_bytes: [u8; 4] = bytes
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| refused(format!("a header of {} bytes has no version", bytes.len())))?;
        let length = header_len(version_bytes)?;
        if bytes.len() != length {
            return Err(refused(format!(
                "a version {} header is {length} bytes, not {}",
                u32::from_le_bytes(version_bytes),
                bytes.len()
            )));
        }
        let fields: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let version = fields[0];
        // Field `i` of version 1's layout. Version 2's colour space, after
        // the depth, says how to read the colours, not where they are;
        // the pixels are taken as they come.
        let field = |i: usize| fields[if version == 2 && i >= 2 { i + 1 } else { i }];
        let [bpp, size, width, height, ro, rl, bo, bl, go, gl, ao, al] =
            std::array::from_fn(|i| field(i + 1));
        let channel = |offset, length| Channel { offset, length };
        let header = Self {
            bits_per_pixel: bpp,
            width,
            height,
            red: channel(ro, rl),
            green: channel(go, gl),
            blue: channel(bo, bl),
            alpha: channel(ao, al),
        };
        if ![16, 24, 32].contains(&bpp) {
            return Err(refused(format!(
                "{bpp} bits per pixel is none of 16, 24 and 32, the depths screencap sends"
            )));
        }
        check_screen(OPERATION, width, height)?;
        for (name, c, least) in [
            ("red", header.red, 1),
            ("green", header.green, 1),
            ("blue", header.blue, 1),
            ("alpha", header.alpha, 0),
        ] {
            if c.length < least
                || c.length > 8
                || u64::from(c.offset) + u64::from(c.length) > u64::from(bpp)
            {
                return Err(refused(format!(
                    "the {name} channel at bit {} of length {} does not fit a {bpp}-bit pixel \
                     with {least} to 8 bits",
                    c.offset, c.length
                )));
            }
        }
        if u64::from(size) != header.pixel_bytes() as u64 {
            return Err(refused(format!(
                "the header says {size} bytes of pixels, where {width}x{height} at {bpp} bits \
                 a pixel is {}",
                header.pixel_bytes()
            )));
        }
        Ok(header)
    }

    /// The screen's width and height in pixels.
    pub fn dimensions(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    /// The bytes of pixels that follow the header: at most 128 MiB
    /// ([`super::MAX_SCREEN_PIXELS`] at four bytes).
    pub fn pixel_bytes(&self) -> usize {
        self.width as usize * self.height as usize * (self.bits_per_pixel as usize / 8)
    }

    /// The pixels as RGBA8888. `pixels` must be [`Self::pixel_bytes`]
    /// long.
    pub fn decode(&self, mut pixels: Vec<u8>) -> Result<RgbaImage, DeviceError> {
        if pixels.len() != self.pixel_bytes() {
            return Err(refused(format!(
                "{} bytes of pixels arrived where the header promised {}",
                pixels.len(),
                self.pixel_bytes()
            )));
        }
        let byte = |offset| Channel { offset, length: 8 };
        let rgb_in_order = self.bits_per_pixel == 32
            && [self.red, self.green, self.blue] == [byte(0), byte(8), byte(16)];
        // RGBA_8888 and RGBX_8888, what phones send: the bytes are the
        // image already, and a pixel at a time costs more than the
        // transfer.
        if rgb_in_order && self.alpha == byte(24) {
            return Ok(self.image(pixels));
        }
        if rgb_in_order && self.alpha.length == 0 {
            pixels
                .iter_mut()
                .skip(3)
                .step_by(4)
                .for_each(|a| *a = u8::MAX);
            return Ok(self.image(pixels));
        }
        let step = self.bits_per_pixel as usize / 8;
        let mut rgba = Vec::with_capacity(self.width as usize * self.height as usize * 4);
        for pixel in pixels.chunks_exact(step) {
            let value = pixel
                .iter()
                .rev()
                .fold(0u32, |v, &byte| (v << 8) | u32::from(byte));
            rgba.extend([self.red, self.green, self.blue].map(|c| eight_bits(value, c)));
            rgba.push(if self.alpha.length == 0 {
                u8::MAX
            } else {
                eight_bits(value, self.alpha)
            });
        }
        Ok(self.image(rgba))
    }

    fn image(&self, rgba: Vec<u8>) -> RgbaImage {
        RgbaImage::from_raw(self.width, self.height, rgba)
            .expect("four bytes for every pixel of the checked size")
    }
}

/// A channel of `value` widened to 8 bits by repeating its bits, as Skia
/// widens RGB_565 when `screencap -p` encodes it, so the two paths give
/// the same pixels: 5-bit 3 (00011) is 24 (00011000), 31 is 255.
fn eight_bits(value: u32, c: Channel) -> u8 {
    let v = (value >> c.offset) & ((1u32 << c.length) - 1);
    let (mut wide, mut bits) = (0u32, 0);
    while bits < 8 {
        wide = (wide << c.length) | v;
        bits += c.length;
    }
    (wide >> (bits - 8)) as u8
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header_bytes(fields: &[u32]) -> Vec<u8> {
        fields.iter().flat_map(|f| f.to_le_bytes()).collect()
    }

    /// A version 2 header as AOSP's framebuffer service writes it for
    /// RGBA_8888: red, green, blue, alpha in memory order.
    fn rgba_v2(width: u32, height: u32) -> Vec<u32> {
        vec![
            2,
            32,
            1,
            width * height * 4,
            width,
            height,
            0,
            8,
            16,
            8,
            8,
            8,
            24,
            8,
        ]
    }

    #[test]
    fn rgba_v2_decodes_byte_for_byte() {
        let header = FramebufferHeader::parse(&header_bytes(&rgba_v2(2, 1))).unwrap();
        let image = header.decode(vec![1, 2, 3, 4, 250, 251, 252, 253]).unwrap();
        assert_eq!(image.into_raw(), [1, 2, 3, 4, 250, 251, 252, 253]);
    }

    /// By hand: BGRA_8888 keeps blue in the first byte; RGBX_8888's alpha
    /// length 0 is opaque; RGB_565's 0xF800 is full red, 0x07E0 full green,
    /// 0x0010 is blue 10000 widened to 10000100 (132) and 0x0003 blue
    /// 00011 to 00011000 (24), Skia's `(v << 3) | (v >> 2)`.
    #[test]
    fn other_layouts_screencap_sends() {
        let bgra = [1, 32, 4, 1, 1, 16, 8, 0, 8, 8, 8, 24, 8];
        let h = FramebufferHeader::parse(&header_bytes(&bgra)).unwrap();
        assert_eq!(
            h.decode(vec![10, 20, 30, 40]).unwrap().into_raw(),
            [30, 20, 10, 40]
        );

        let rgbx = [1, 32, 12, 3, 1, 0, 8, 16, 8, 8, 8, 24, 0];
        let h = FramebufferHeader::parse(&header_bytes(&rgbx)).unwrap();
        assert_eq!(
            h.decode(vec![10, 20, 30, 0, 1, 2, 3, 4, 5, 6, 7, 8])
                .unwrap()
                .into_raw(),
            [10, 20, 30, 255, 1, 2, 3, 255, 5, 6, 7, 255]
        );

        let rgb565 = [1, 16, 8, 4, 1, 11, 5, 0, 5, 5, 6, 0, 0];
        let h = FramebufferHeader::parse(&header_bytes(&rgb565)).unwrap();
        let pixels = [0xF800u16, 0x07E0, 0x0010, 0x0003]
            .map(u16::to_le_bytes)
            .concat();
        assert_eq!(
            h.decode(pixels).unwrap().into_raw(),
            [
                255, 0, 0, 255, 0, 255, 0, 255, 0, 0, 132, 255, 0, 0, 24, 255
            ]
        );

        let rgb888 = [1, 24, 3, 1, 1, 0, 8, 16, 8, 8, 8, 0, 0];
        let h = FramebufferHeader::parse(&header_bytes(&rgb888)).unwrap();
        assert_eq!(h.decode(vec![7, 8, 9]).unwrap().into_raw(), [7, 8, 9, 255]);
    }

    #[test]
    fn headers_no_screen_has_are_refused_in_words() {
        let reason = |fields: &[u32]| match FramebufferHeader::parse(&header_bytes(fields)) {
            Err(DeviceError::Protocol { operation, reason }) => {
                assert_eq!(operation, "framebuffer");
                reason
            }
            other => panic!("{other:?}"),
        };
        let mut huge = rgba_v2(1, 1);
        huge[3] = u32::MAX;
        assert_eq!(
            reason(&huge),
            "the header says 4294967295 bytes of pixels, where 1x1 at 32 bits a pixel is 4"
        );
        let mut wide = rgba_v2(1, 1);
        wide[4] = 100_000;
        assert!(reason(&wide).contains("100000x1"), "{}", reason(&wide));
        let mut empty = rgba_v2(1, 1);
        empty[5] = 0;
        assert_eq!(reason(&empty), "a screen of 1x0 has no pixels");
        let mut deep = rgba_v2(1, 1);
        deep[1] = 64;
        assert!(reason(&deep).starts_with("64 bits per pixel"));
        let mut spilling = rgba_v2(1, 1);
        spilling[12] = 30;
        assert_eq!(
            reason(&spilling),
            "the alpha channel at bit 30 of length 8 does not fit a 32-bit pixel with 0 to 8 bits"
        );
        let mut no_red = rgba_v2(1, 1);
        no_red[7] = 0;
        assert!(reason(&no_red).starts_with("the red channel"));
        assert_eq!(
            reason(&[3, 0]),
            "header version 3 is neither 1 nor 2, the two adb has"
        );
        assert_eq!(
            reason(&rgba_v2(1, 1)[..13]),
            "a version 2 header is 56 bytes, not 52"
        );
        assert_eq!(reason(&[]), "a header of 0 bytes has no version");
    }

    #[test]
    fn pixels_short_of_the_header_s_promise_are_refused() {
        let header = FramebufferHeader::parse(&header_bytes(&rgba_v2(2, 2))).unwrap();
        let e = header.decode(vec![0; 15]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unexpected reply to framebuffer: 15 bytes of pixels arrived where the header \
             promised 16"
        );
    }

    /// Headers near the valid ones: either version, depths and channel
    /// places around the legal ones, sizes that are right half the time.
    fn near_valid_header() -> impl Strategy<Value = Vec<u32>> {
        let channel = || (0u32..34, 0u32..10);
        (
            1u32..=2,
            prop_oneof![Just(16u32), Just(24), Just(32), 0u32..64],
            (1u32..5, 1u32..5, any::<bool>(), any::<u32>()),
            [channel(), channel(), channel(), channel()],
        )
            .prop_map(|(version, bpp, (w, h, right, size), channels)| {
                let size = if right { w * h * bpp / 8 } else { size };
                let mut fields = vec![version, bpp];
                if version == 2 {
                    fields.push(1);
                }
                fields.extend([size, w, h]);
                fields.extend(channels.iter().flat_map(|&(o, l)| [o, l]));
                fields
            })
    }

    proptest! {
        /// A header near the valid ones is checked or refused, never a
        /// panic; a checked one promises exactly its screen's pixels and
        /// decodes them to an image of its size.
        #[test]
        fn any_header_is_checked(fields in near_valid_header()) {
            // Size, width and height follow the depth, and version 2's
            // colour space before them.
            let at = if fields[0] == 2 { 3 } else { 2 };
            let (size, w, h_px) = (fields[at], fields[at + 1], fields[at + 2]);
            if let Ok(h) = FramebufferHeader::parse(&header_bytes(&fields)) {
                prop_assert_eq!(h.dimensions(), (w, h_px));
                prop_assert_eq!(h.pixel_bytes() as u32, size);
                prop_assert_eq!(size, w * h_px * fields[1] / 8);
                let image = h.decode(vec![0xA5; h.pixel_bytes()]).unwrap();
                prop_assert_eq!(image.dimensions(), (w, h_px));
            }
        }

        /// Arbitrary bytes never panic the parser.
        #[test]
        fn any_bytes_are_checked(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = FramebufferHeader::parse(&bytes);
        }

        /// RGBA in memory order comes back as it went; the same pixels
        /// sent as BGRA come back with red and blue swapped.
        #[test]
        fn rgba_and_bgra_round_trip(
            (width, height, rgba) in (1u32..6, 1u32..6).prop_flat_map(|(w, h)| {
                (Just(w), Just(h), proptest::collection::vec(any::<u8>(), (w * h * 4) as usize))
            })
        ) {
            let h = FramebufferHeader::parse(&header_bytes(&rgba_v2(width, height))).unwrap();
            prop_assert_eq!(h.decode(rgba.clone()).unwrap().into_raw(), rgba.clone());
            let mut bgra = rgba_v2(width, height);
            bgra[6] = 16;
            bgra[8] = 0;
            let h = FramebufferHeader::parse(&header_bytes(&bgra)).unwrap();
            let swapped: Vec<u8> = rgba
                .chunks_exact(4)
                .flat_map(|p| [p[2], p[1], p[0], p[3]])
                .collect();
            prop_assert_eq!(h.decode(rgba).unwrap().into_raw(), swapped);
        }
    }
}
