//! Test-time voting: several sampled answers for one screen, grouped by what
//! they would do, and the action of the largest group executed.
//!
//! Answers agree when they would have the same effect: taps (or long
//! presses) on the same screen element, the same text typed, a swipe the
//! same way, the same key. Points are compared by region rather than by
//! pixel, because two samples rarely pick the same pixel of a button; the
//! region is the smallest element of the UI tree under the point, or, on a
//! device without a tree, a disc of [`RADIUS_FRACTION`] of the shorter
//! side of the model frame around the group's first point. From the winning
//! group the executed answer is the medoid for points (the member closest
//! to all others, never an averaged point no sample chose) and the first
//! member otherwise. Ties between groups go to the group sampled first.
//!
//! Pure: no device, no policy; tested as a table.

use crate::device::ui::UiNode;
use crate::protocol::{Action, FrameMap, Point};
use serde::{Deserialize, Serialize};

/// Without a UI tree, points closer than this fraction of the model frame's
/// shorter side are taken to aim at the same thing (about a finger's width
/// on a phone screen).
pub const RADIUS_FRACTION: f64 = 0.05;

/// How a step's vote went, in indices into the step's attempts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoteRecord {
    /// The candidates holding a valid action, grouped by agreement, the
    /// winning group first.
    pub clusters: Vec<Vec<usize>>,
    /// The candidate that was executed.
    pub chosen: usize,
}

/// Groups `candidates` (attempt index, action) and picks the consensus;
/// `None` when there are none.
pub fn vote(
    candidates: &[(usize, &Action)],
    frame: &FrameMap,
    ui_tree: Option<&UiNode>,
) -> Option<VoteRecord> {
    let radius = RADIUS_FRACTION * f64::from(frame.model.width.min(frame.model.height));
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (at, (_, action)) in candidates.iter().enumerate() {
        let joined = groups.iter_mut().find(|group| {
            let (_, first) = candidates[group[0]];
            agree(first, action, frame, ui_tree, radius)
        });
        match joined {
            Some(group) => group.push(at),
            None => groups.push(vec![at]),
        }
    }
    // Stable: equal sizes keep the order of their first members.
    groups.sort_by_key(|g| std::cmp::Reverse(g.len()));
    let winner = groups.first()?;
    let chosen = medoid(winner, candidates);
    Some(VoteRecord {
        clusters: groups
            .iter()
            .map(|g| g.iter().map(|&i| candidates[i].0).collect())
            .collect(),
        chosen: candidates[chosen].0,
    })
}

fn agree(a: &Action, b: &Action, frame: &FrameMap, ui_tree: Option<&UiNode>, radius: f64) -> bool {
    match (a, b) {
        (Action::Tap { point_2d: p }, Action::Tap { point_2d: q })
        | (Action::LongPress { point_2d: p }, Action::LongPress { point_2d: q }) => {
            same_region(*p, *q, frame, ui_tree, radius)
        }
        (Action::Type { text: s }, Action::Type { text: t }) => s.trim() == t.trim(),
        (Action::Swipe { direction: d }, Action::Swipe { direction: e }) => d == e,
        _ => std::mem::discriminant(a) == std::mem::discriminant(b),
    }
}

fn same_region(
    p: Point,
    q: Point,
    frame: &FrameMap,
    ui_tree: Option<&UiNode>,
    radius: f64,
) -> bool {
    match ui_tree {
        Some(root) => {
            let region = |p: Point| {
                let d = frame.to_device(p);
                smallest_under(root, i64::from(d.x), i64::from(d.y))
            };
            match (region(p), region(q)) {
                (Some(a), Some(b)) => std::ptr::eq(a, b),
                _ => distance(p, q) <= radius,
            }
        }
        None => distance(p, q) <= radius,
    }
}

/// The smallest element whose bounds hold the device point (edges of the
/// far side excluded, as Android hit-tests).
fn smallest_under(node: &UiNode, x: i64, y: i64) -> Option<&UiNode> {
    let [x1, y1, x2, y2] = node.bounds.map(i64::from);
    if !(x1 <= x && x < x2 && y1 <= y && y < y2) {
        return None;
    }
    node.children
        .iter()
        .filter_map(|child| smallest_under(child, x, y))
        .min_by_key(|n| n.area())
        .filter(|n| n.area() <= node.area())
        .or(Some(node))
}

fn distance(p: Point, q: Point) -> f64 {
    (p.x - q.x).hypot(p.y - q.y)
}

/// The group member with the least total distance to the others (the
/// first on ties); the first member for actions without a point.
fn medoid(group: &[usize], candidates: &[(usize, &Action)]) -> usize {
    let point = |i: usize| candidates[i].1.point();
    if group.iter().any(|&i| point(i).is_none()) {
        return group[0];
    }
    let cost = |i: usize| -> f64 {
        group
            .iter()
            .filter_map(|&j| Some(distance(point(i)?, point(j)?)))
            .sum()
    };
    let mut best = group[0];
    for &i in &group[1..] {
        if cost(i) < cost(best) {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Direction, Size};

    /// A 1000x2000 device whose model frame (max_pixels large enough) is
    /// 1008x1988 (multiples of 28, rounded), so x maps back by 1000/1008.
    fn frame() -> FrameMap {
        FrameMap::new(Size::new(1000, 2000), 4_000_000).unwrap()
    }

    fn tap(x: f64, y: f64) -> Action {
        Action::Tap {
            point_2d: Point::new(x, y),
        }
    }

    fn node(bounds: [i32; 4], children: Vec<UiNode>) -> UiNode {
        UiNode {
            bounds,
            children,
            ..UiNode::default()
        }
    }

    /// Two buttons side by side in a full-screen container.
    fn screen() -> UiNode {
        node(
            [0, 0, 1000, 2000],
            vec![node(
                [0, 0, 1000, 400],
                vec![
                    node([0, 0, 500, 200], vec![]),
                    node([500, 0, 1000, 200], vec![]),
                ],
            )],
        )
    }

    fn run(actions: &[Action], tree: Option<&UiNode>) -> VoteRecord {
        let c: Vec<(usize, &Action)> = actions.iter().enumerate().collect();
        vote(&c, &frame(), tree).unwrap()
    }

    #[test]
    fn taps_on_the_same_button_outvote_a_tap_on_its_neighbour() {
        let actions = [tap(600.0, 100.0), tap(100.0, 100.0), tap(990.0, 150.0)];
        let v = run(&actions, Some(&screen()));
        assert_eq!(v.clusters, vec![vec![0, 2], vec![1]]);
        // Two members: equal total distance, the first wins.
        assert_eq!(v.chosen, 0);
    }

    #[test]
    fn near_points_across_an_element_border_disagree_with_a_tree() {
        // 498 and 506 model px -> device 494 and 502: either side of x=500.
        let actions = [tap(498.0, 100.0), tap(506.0, 100.0)];
        let v = run(&actions, Some(&screen()));
        assert_eq!(v.clusters, vec![vec![0], vec![1]]);
        // Without a tree, 8 px apart is well inside 0.05 * 1008 = 50.4 px.
        let v = run(&actions, None);
        assert_eq!(v.clusters, vec![vec![0, 1]]);
    }

    #[test]
    fn the_medoid_is_executed_not_an_outlier_of_the_group() {
        // All in the left button; 300 is the middle of 100, 300, 480:
        // costs 200+380=580, 200+180=380, 380+180=560.
        let actions = [tap(100.0, 50.0), tap(300.0, 50.0), tap(480.0, 50.0)];
        let v = run(&actions, Some(&screen()));
        assert_eq!(v.chosen, 1);
    }

    #[test]
    fn radius_decides_without_a_tree() {
        // 50 px apart joins (<= 50.4); 51 px does not.
        assert_eq!(
            run(&[tap(100.0, 100.0), tap(150.0, 100.0)], None).clusters,
            vec![vec![0, 1]]
        );
        assert_eq!(
            run(&[tap(100.0, 100.0), tap(151.0, 100.0)], None).clusters,
            vec![vec![0], vec![1]]
        );
    }

    #[test]
    fn non_point_actions_agree_by_their_arguments() {
        let swipe = |d| Action::Swipe { direction: d };
        let typed = |t: &str| Action::Type { text: t.into() };
        let actions = [
            swipe(Direction::Up),
            typed("hello"),
            swipe(Direction::Down),
            typed(" hello "),
            Action::Back,
            typed("hello"),
            swipe(Direction::Up),
        ];
        let v = run(&actions, None);
        assert_eq!(
            v.clusters,
            vec![vec![1, 3, 5], vec![0, 6], vec![2], vec![4]]
        );
        assert_eq!(v.chosen, 1);
    }

    #[test]
    fn a_tap_and_a_long_press_on_one_spot_are_different_actions() {
        let long = Action::LongPress {
            point_2d: Point::new(100.0, 100.0),
        };
        let v = run(&[tap(100.0, 100.0), long], Some(&screen()));
        assert_eq!(v.clusters, vec![vec![0], vec![1]]);
    }

    #[test]
    fn ties_go_to_the_group_sampled_first_and_indices_are_the_callers() {
        let a = tap(100.0, 100.0);
        let b = Action::Home;
        let c: Vec<(usize, &Action)> = vec![(7, &b), (9, &a)];
        let v = vote(&c, &frame(), Some(&screen())).unwrap();
        assert_eq!(v.clusters, vec![vec![7], vec![9]]);
        assert_eq!(v.chosen, 7);
        assert_eq!(vote(&[], &frame(), None), None);
    }
}
