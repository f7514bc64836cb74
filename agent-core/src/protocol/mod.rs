//! The Blink-Think-Link protocol: what the model is asked (prompts), what it
//! answers (the three tagged parts and the action space), how answers are
//! read and written, and the model frame its coordinates live in.
//!
//! Everything here is pure: no I/O, no clocks, no randomness.

mod action;
mod geometry;
mod parse;
pub mod prompt;
mod pyliteral;
mod render;

pub use action::{Action, BBox, BtlOutput, Direction, Link, Point, Roi};
pub use geometry::{
    DevicePoint, FACTOR, FrameMap, MAX_ASPECT_RATIO, MIN_PIXELS, ResizeError, Size,
    TRAINING_MAX_PIXELS, smart_resize, smart_resize_with,
};
pub use parse::{
    ParseError, ParseErrorKind, ParseMode, Parsed, Part, Tolerance, ToleranceKind, parse,
    parse_link_json,
};
pub use prompt::{Profile, Prompt, ScreenElement, Task};
pub use render::{RenderError, render, to_python_json};

#[cfg(test)]
mod tests;
