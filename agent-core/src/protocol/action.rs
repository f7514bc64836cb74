//! The values a BTL answer carries: points, boxes, regions of interest, the
//! action space of `<link>` and the whole parsed answer.
//!
//! Serde forms follow the official JSON keys (`bbox_2d`, `label`, `Plan`,
//! `Action`, `function`, `point_2d`, `text`, `direction`), so trajectories and
//! training samples written by btl read back in the official tooling.
//! Coordinates are `f64` in the model frame; whole numbers are written without
//! a fraction (`663`, not `663.0`), as Python's `json.dumps` writes ints.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A point `[x, y]` in pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
}

impl Point {
    pub fn new(x: f64, y: f64) -> Self {
        Self { x, y }
    }
}

/// A box `[x1, y1, x2, y2]` in pixels, top-left then bottom-right corner.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BBox {
    pub x1: f64,
    pub y1: f64,
    pub x2: f64,
    pub y2: f64,
}

impl BBox {
    pub fn new(x1: f64, y1: f64, x2: f64, y2: f64) -> Self {
        Self { x1, y1, x2, y2 }
    }

    pub fn area(&self) -> f64 {
        (self.x2 - self.x1) * (self.y2 - self.y1)
    }

    /// Intersection over union as the official reward computes it: the
    /// intersection clamps each side at zero, the union is the sum of the two
    /// (possibly degenerate) areas minus the intersection, and a zero union
    /// gives 0.
    pub fn iou(&self, other: &BBox) -> f64 {
        let w = (self.x2.min(other.x2) - self.x1.max(other.x1)).max(0.0);
        let h = (self.y2.min(other.y2) - self.y1.max(other.y1)).max(0.0);
        let intersection = w * h;
        let union = self.area() + other.area() - intersection;
        if union == 0.0 {
            0.0
        } else {
            intersection / union
        }
    }

    /// Whether `p` lies strictly inside (points on an edge are outside).
    pub fn contains_strictly(&self, p: Point) -> bool {
        self.x1 < p.x && p.x < self.x2 && self.y1 < p.y && p.y < self.y2
    }

    pub fn center(&self) -> Point {
        Point::new((self.x1 + self.x2) / 2.0, (self.y1 + self.y2) / 2.0)
    }
}

/// A region of interest from `<blink>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Roi {
    #[serde(rename = "bbox_2d")]
    pub bbox: BBox,
    pub label: String,
}

/// Swipe direction: the way the finger moves (`up` reveals what is below).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Up,
    Down,
    Left,
    Right,
}

impl Direction {
    pub const ALL: [Direction; 4] = [Self::Up, Self::Down, Self::Left, Self::Right];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Down => "down",
            Self::Left => "left",
            Self::Right => "right",
        }
    }
}

/// One action of the `<link>` part. `Wait` and `Finish` belong to the
/// `btl-extended` profile only; the parser accepts them in any profile and
/// [`crate::protocol::Profile::allows`] decides whether they may run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "function")]
pub enum Action {
    Tap {
        point_2d: Point,
    },
    LongPress {
        point_2d: Point,
    },
    Type {
        text: String,
    },
    Swipe {
        direction: Direction,
    },
    Back,
    Home,
    Wait,
    Finish {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer: Option<String>,
    },
}

impl Action {
    /// The official `function` name.
    pub fn function(&self) -> &'static str {
        match self {
            Self::Tap { .. } => "Tap",
            Self::LongPress { .. } => "LongPress",
            Self::Type { .. } => "Type",
            Self::Swipe { .. } => "Swipe",
            Self::Back => "Back",
            Self::Home => "Home",
            Self::Wait => "Wait",
            Self::Finish { .. } => "Finish",
        }
    }

    /// The screen point the action targets, for Tap and LongPress.
    pub fn point(&self) -> Option<Point> {
        match self {
            Self::Tap { point_2d } | Self::LongPress { point_2d } => Some(*point_2d),
            _ => None,
        }
    }
}

/// The `<link>` part: a planned action (navigation) or a bare point (grounding).
#[derive(Debug, Clone, PartialEq)]
pub enum Link {
    Action { plan: String, action: Action },
    Point(Point),
}

impl Link {
    pub fn point(&self) -> Option<Point> {
        match self {
            Self::Action { action, .. } => action.point(),
            Self::Point(p) => Some(*p),
        }
    }

    /// The `<link>` body's JSON list holding this link, keys in the official
    /// order; a sample's `solution` is the same text.
    pub fn to_json(&self) -> String {
        super::render::to_python_json(&[LinkItem::from(self)])
    }
}

/// The item of the `<link>` JSON list, in its official key order.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum LinkItem<'a> {
    Action {
        #[serde(rename = "Plan")]
        plan: &'a str,
        #[serde(rename = "Action")]
        action: &'a Action,
    },
    Point {
        point_2d: Point,
    },
}

impl<'a> From<&'a Link> for LinkItem<'a> {
    fn from(link: &'a Link) -> Self {
        match link {
            Link::Action { plan, action } => Self::Action { plan, action },
            Link::Point(p) => Self::Point { point_2d: *p },
        }
    }
}

/// A whole parsed BTL answer.
#[derive(Debug, Clone, PartialEq)]
pub struct BtlOutput {
    pub blink: Vec<Roi>,
    pub think: String,
    pub link: Link,
}

/// Largest magnitude below which every whole `f64` is an exact integer.
const EXACT_INT_LIMIT: f64 = 9_007_199_254_740_992.0;

fn serialize_coord<S: Serializer>(v: f64, s: S) -> Result<S::Ok, S::Error> {
    if v.fract() == 0.0 && v.abs() < EXACT_INT_LIMIT {
        s.serialize_i64(v as i64)
    } else {
        s.serialize_f64(v)
    }
}

struct Coord(f64);

impl Serialize for Coord {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_coord(self.0, s)
    }
}

fn deserialize_coords<'de, D: Deserializer<'de>, const N: usize>(
    d: D,
    what: &str,
) -> Result<[f64; N], D::Error> {
    let values = Vec::<f64>::deserialize(d)
        .map_err(|e| D::Error::custom(format!("{what} must be a list of {N} numbers: {e}")))?;
    <[f64; N]>::try_from(values)
        .map_err(|v| D::Error::custom(format!("{what} must have {N} numbers, found {}", v.len())))
}

impl Serialize for Point {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        [Coord(self.x), Coord(self.y)].serialize(s)
    }
}

impl<'de> Deserialize<'de> for Point {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let [x, y] = deserialize_coords::<D, 2>(d, "a point")?;
        Ok(Point { x, y })
    }
}

impl Serialize for BBox {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        [
            Coord(self.x1),
            Coord(self.y1),
            Coord(self.x2),
            Coord(self.y2),
        ]
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for BBox {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let [x1, y1, x2, y2] = deserialize_coords::<D, 4>(d, "a box")?;
        Ok(BBox { x1, y1, x2, y2 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_use_the_official_json_keys() {
        let cases = [
            (
                Action::Tap {
                    point_2d: Point::new(663.0, 1135.0),
                },
                r#"{"function":"Tap","point_2d":[663,1135]}"#,
            ),
            (
                Action::LongPress {
                    point_2d: Point::new(1.5, 2.0),
                },
                r#"{"function":"LongPress","point_2d":[1.5,2]}"#,
            ),
            (
                Action::Type {
                    text: "Los Angeles".into(),
                },
                r#"{"function":"Type","text":"Los Angeles"}"#,
            ),
            (
                Action::Swipe {
                    direction: Direction::Up,
                },
                r#"{"function":"Swipe","direction":"up"}"#,
            ),
            (Action::Back, r#"{"function":"Back"}"#),
            (Action::Home, r#"{"function":"Home"}"#),
            (Action::Wait, r#"{"function":"Wait"}"#),
            (Action::Finish { answer: None }, r#"{"function":"Finish"}"#),
            (
                Action::Finish {
                    answer: Some("42".into()),
                },
                r#"{"function":"Finish","answer":"42"}"#,
            ),
        ];
        for (action, json) in cases {
            assert_eq!(serde_json::to_string(&action).unwrap(), json);
            assert_eq!(serde_json::from_str::<Action>(json).unwrap(), action);
        }
    }

    #[test]
    fn a_point_needs_exactly_two_numbers() {
        let err = serde_json::from_str::<Point>("[1, 2, 3]").unwrap_err();
        assert!(
            err.to_string()
                .contains("a point must have 2 numbers, found 3")
        );
        let err = serde_json::from_str::<Point>(r#"["1", 2]"#).unwrap_err();
        assert!(
            err.to_string()
                .contains("a point must be a list of 2 numbers")
        );
    }

    // IoU of [0,0,10,10] and [5,0,15,10]: intersection 5*10 = 50,
    // union 100 + 100 - 50 = 150, so 1/3.
    #[test]
    fn iou_by_hand() {
        let a = BBox::new(0.0, 0.0, 10.0, 10.0);
        let b = BBox::new(5.0, 0.0, 15.0, 10.0);
        assert_eq!(a.iou(&b), 50.0 / 150.0);
        assert_eq!(a.iou(&a), 1.0);
        assert_eq!(a.iou(&BBox::new(20.0, 20.0, 30.0, 30.0)), 0.0);
        let dot = BBox::new(3.0, 3.0, 3.0, 3.0);
        assert_eq!(dot.iou(&dot), 0.0, "zero union gives 0");
    }

    #[test]
    fn edges_are_outside() {
        let b = BBox::new(614.0, 1094.0, 720.0, 1182.0);
        assert!(b.contains_strictly(Point::new(663.0, 1135.0)));
        assert!(!b.contains_strictly(Point::new(720.0, 1100.0)));
        assert!(!b.contains_strictly(Point::new(700.0, 1094.0)));
    }
}
