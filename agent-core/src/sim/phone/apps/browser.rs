//! Browser (`com.btl.browser`): a search box (Enter or the Search button
//! submits), a results list and result pages, all offline.
//!
//! Results are a pure function of the query ([`search_results`]), so a task
//! can name the result to open and a checker can recompute its URL; every
//! submitted query and opened page is recorded in
//! [`BrowserState`](crate::sim::phone::BrowserState).

use super::{App, AppMsg, Effect, Enter, Stack};
use crate::hash::fnv1a;
use crate::sim::phone::render::wrapped_height;
use crate::sim::phone::scene::{Align, Column, Element, Glyph, Look, Msg as SceneMsg, Rect};
use crate::sim::phone::state::PhoneState;
use crate::sim::phone::widgets::{
    Cx, DIVIDER, PRIMARY, Row, SURFACE_BAR, TEXT, TEXT_2, content_root, edit_text, icon_button,
    label, rid, row, scroller, text_look,
};

pub(crate) const PKG: &str = "com.btl.browser";

const SEARCH_BOX: &str = "com.btl.browser:id/search_box";

/// One entry of a results page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchResult {
    pub title: String,
    /// Without scheme, as the results page shows it: `en.wikipedia.org/wiki/Tea`.
    pub url: String,
    pub snippet: String,
}

/// Result templates: title, URL, snippet; `{Q}` is the query capitalized,
/// `{q}` as typed, `{slug}`/`{plus}` URL forms of it.
const TEMPLATES: [(&str, &str, &str); 12] = [
    (
        "{Q} - Wikipedia",
        "en.wikipedia.org/wiki/{under}",
        "{Q} is covered by the free encyclopedia: history, meaning and related topics.",
    ),
    (
        "{Q}: latest news and updates",
        "news.example.com/topics/{slug}",
        "Breaking stories, analysis and live coverage about {q}.",
    ),
    (
        "What is {q}? A beginner's guide",
        "guide.example.org/{slug}",
        "Everything you need to know about {q}, explained step by step.",
    ),
    (
        "Top 10 facts about {q}",
        "facts.example.net/{slug}-facts",
        "Surprising facts about {q} that most people have never heard.",
    ),
    (
        "{Q} reviews and ratings",
        "reviews.example.com/{slug}",
        "Read honest reviews of {q} from thousands of users.",
    ),
    (
        "{Q} | Official site",
        "www.{slug}.example",
        "The official home of {q}. Find information, support and contact details.",
    ),
    (
        "Images of {q}",
        "images.example.com/search?q={plus}",
        "Browse high-quality photos and pictures of {q}.",
    ),
    (
        "{Q} near you",
        "maps.example.com/search/{plus}",
        "Find {q} nearby, with opening hours, directions and ratings.",
    ),
    (
        "How to get started with {q}",
        "howto.example.org/{slug}",
        "A practical tutorial on {q} with tips from experts.",
    ),
    (
        "{Q} forum discussions",
        "forum.example.net/t/{slug}",
        "Join the community conversation about {q}.",
    ),
    (
        "Buy {q} online",
        "shop.example.com/s?k={plus}",
        "Compare prices for {q} and get free delivery on eligible orders.",
    ),
    (
        "{Q} videos",
        "video.example.com/results?search_query={plus}",
        "Watch the most popular videos about {q}.",
    ),
];

/// How many results a page lists.
const RESULTS_PER_PAGE: usize = 8;

/// The results page for `query` (trimmed): always the same entries in the
/// same order for the same query.
pub fn search_results(query: &str) -> Vec<SearchResult> {
    let q = query.trim();
    if q.is_empty() {
        return Vec::new();
    }
    let lower = q.to_lowercase();
    let slug = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let under = q.split_whitespace().collect::<Vec<_>>().join("_");
    let plus = q.split_whitespace().collect::<Vec<_>>().join("+");
    let cap: String = {
        let mut chars = q.chars();
        chars
            .next()
            .map(|c| c.to_uppercase().chain(chars).collect())
            .unwrap_or_default()
    };
    let fill = |t: &str| {
        t.replace("{Q}", &cap)
            .replace("{q}", q)
            .replace("{slug}", &slug)
            .replace("{under}", &under)
            .replace("{plus}", &plus)
    };
    let mut order: Vec<usize> = (0..TEMPLATES.len()).collect();
    order.sort_by_key(|&i| fnv1a(&[lower.as_bytes(), &[i as u8]]));
    order
        .into_iter()
        .take(RESULTS_PER_PAGE)
        .map(|i| {
            let (title, url, snippet) = TEMPLATES[i];
            SearchResult {
                title: fill(title),
                url: fill(url),
                snippet: fill(snippet),
            }
        })
        .collect()
}

/// The paragraphs of a result page: long enough to need scrolling.
fn page_paragraphs(r: &SearchResult) -> Vec<String> {
    let topic = &r.title;
    [
        "{T}. This page collects what is known about the subject, from its origins to the present day.",
        "Background: the topic has been discussed for many years. Early sources describe it briefly; later work adds detail and context.",
        "Key points: there are several ways to approach it, and each has trade-offs. Readers new to it usually start with the basics.",
        "History: interest grew steadily, with notable milestones documented by journalists, researchers and enthusiasts alike.",
        "In practice: people encounter it in daily life more often than they expect, from conversations with friends to the news.",
        "Common questions: What is it? Why does it matter? How do I learn more? Each of these is answered in the sections below.",
        "Further reading: libraries and online archives hold many more references, including books, articles and interviews.",
        "Related topics: several neighbouring subjects share ideas with this one and are worth exploring next.",
        "Community: forums and local groups meet regularly to share tips, stories and recommendations.",
        "Last updated: this article is maintained by volunteers. Corrections and additions are welcome.",
    ]
    .iter()
    .map(|p| p.replace("{T}", topic))
    .collect()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Page {
    Home,
    Results(String),
    /// A result page: the query it came from and its rank.
    Web {
        query: String,
        rank: usize,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Msg {
    /// Submit the search box.
    Search,
    /// Search for a recent query again.
    Repeat(String),
    /// Open the result of this rank on the current results page.
    OpenResult(usize),
}

fn msg(m: Msg) -> SceneMsg {
    SceneMsg::App(AppMsg::Browser(m))
}

#[derive(Debug, Clone)]
pub(crate) struct Browser {
    stack: Stack<Page>,
    /// The search box text, shared by the home and results pages.
    input: String,
}

impl Default for Browser {
    fn default() -> Self {
        Browser {
            stack: Stack::new(Page::Home),
            input: String::new(),
        }
    }
}

impl Browser {
    pub fn update(&mut self, m: Msg, data: &mut PhoneState) -> Effect {
        match m {
            Msg::Search => self.search(data),
            Msg::Repeat(q) => {
                self.input = q;
                self.search(data);
            }
            Msg::OpenResult(rank) => {
                if let Page::Results(q) = self.stack.top() {
                    let q = q.clone();
                    if let Some(r) = search_results(&q).get(rank) {
                        data.browser.visited.push(format!("https://{}", r.url));
                        self.stack.push(Page::Web { query: q, rank });
                    }
                }
            }
        }
        Effect::HideKeyboard
    }

    fn search(&mut self, data: &mut PhoneState) {
        let q = self.input.trim().to_string();
        if q.is_empty() {
            return;
        }
        data.browser.last_query = Some(q.clone());
        data.browser.searches.push(q.clone());
        self.input = q.clone();
        self.stack.push(Page::Results(q));
    }

    /// The toolbar with the search box and the Search button.
    fn search_bar(&self, cx: &Cx) -> (Element, Rect) {
        let bar = cx.content.top(cx.dp(72.0));
        let button = Rect::xywh(
            bar.x2 - cx.dp(60.0),
            bar.y1 + cx.dp(12.0),
            cx.dp(48.0),
            cx.dp(48.0),
        );
        let field = Rect::new(
            bar.x1 + cx.dp(12.0),
            bar.y1 + cx.dp(10.0),
            button.x1 - cx.dp(4.0),
            bar.y2 - cx.dp(10.0),
        );
        let mut box_ = edit_text(
            cx,
            field,
            SEARCH_BOX.to_string(),
            &self.input,
            "Search or type URL",
            false,
        );
        box_.look.radius = field.h() / 2;
        let el = Element::new("android.widget.LinearLayout", bar)
            .id(rid(PKG, "toolbar"))
            .look(Look {
                fill: Some(SURFACE_BAR),
                ..Look::default()
            })
            .child(box_)
            .child(icon_button(
                button,
                rid(PKG, "search_button"),
                "Search",
                Glyph::Magnifier { color: TEXT },
                msg(Msg::Search),
            ));
        (el, cx.content.below(bar.h()))
    }

    fn home_page(&self, cx: &Cx, data: &PhoneState) -> Element {
        let (bar, body) = self.search_bar(cx);
        let mut col = Column::new(body, self.stack.scroll());
        let mut logo = text_look(cx, 40.0, PRIMARY);
        logo.bold = true;
        logo.align = Align::Center;
        let r = col.next(cx.dp(140.0));
        col.push(label(r, rid(PKG, "logo"), "Search", logo));
        let mut recent: Vec<&String> = Vec::new();
        for q in data.browser.searches.iter().rev() {
            if !recent.contains(&q) && recent.len() < 5 {
                recent.push(q);
            }
        }
        if !recent.is_empty() {
            let mut head = text_look(cx, 14.0, PRIMARY);
            head.bold = true;
            let r = col.next(cx.dp(40.0)).inset(cx.dp(16.0), 0);
            col.push(label(r, rid(PKG, "recent_header"), "Recent searches", head));
            for q in recent {
                let r = col.next(cx.dp(56.0));
                col.push(row(
                    cx,
                    r,
                    Row {
                        id: rid(PKG, "recent_query"),
                        title: q,
                        summary: None,
                        badge: None,
                        trailing: None,
                        on_tap: Some(msg(Msg::Repeat(q.clone()))),
                    },
                ));
            }
        }
        content_root(cx)
            .child(bar)
            .child(col.finish(scroller("android.widget.ScrollView", rid(PKG, "home"))))
    }

    fn results_page(&self, cx: &Cx, query: &str) -> Element {
        let (bar, body) = self.search_bar(cx);
        let mut col = Column::new(body, self.stack.scroll());
        let pad = cx.dp(16.0);
        let mut snippet = text_look(cx, 14.0, TEXT_2);
        snippet.wrap = true;
        snippet.valign = Align::Start;
        for (rank, r) in search_results(query).iter().enumerate() {
            let rect = col.next(cx.dp(120.0));
            let inner = rect.inset(pad, cx.dp(10.0));
            col.push(
                Element::new("android.widget.LinearLayout", rect)
                    .id(rid(PKG, "result_item"))
                    .on_tap(msg(Msg::OpenResult(rank)))
                    .look(Look {
                        divider: Some(DIVIDER),
                        ..Look::default()
                    })
                    .child(label(
                        inner.top(cx.dp(22.0)),
                        rid(PKG, "result_url"),
                        &r.url,
                        text_look(cx, 12.0, TEXT_2),
                    ))
                    .child(label(
                        inner.below(cx.dp(22.0)).top(cx.dp(30.0)),
                        rid(PKG, "result_title"),
                        &r.title,
                        text_look(cx, 18.0, [0x1A, 0x0D, 0xAB, 255]),
                    ))
                    .child(label(
                        inner.below(cx.dp(56.0)),
                        rid(PKG, "result_snippet"),
                        &r.snippet,
                        snippet.clone(),
                    )),
            );
        }
        content_root(cx).child(bar).child(col.finish(scroller(
            "androidx.recyclerview.widget.RecyclerView",
            rid(PKG, "results_list"),
        )))
    }

    fn web_page(&self, cx: &Cx, r: &SearchResult) -> Element {
        let bar_r = cx.content.top(cx.dp(64.0));
        let mut url_look = text_look(cx, 15.0, TEXT);
        url_look.pad = cx.dp(16.0);
        let url_r = bar_r.inset(cx.dp(12.0), cx.dp(10.0));
        let url = Element::new("android.widget.TextView", url_r)
            .id(rid(PKG, "url_bar"))
            .text(format!("https://{}", r.url))
            .look(Look {
                fill: Some([255, 255, 255, 255]),
                radius: url_r.h() / 2,
                text: Some(url_look),
                ..Look::default()
            });
        let bar = Element::new("android.widget.LinearLayout", bar_r)
            .id(rid(PKG, "toolbar"))
            .look(Look {
                fill: Some(SURFACE_BAR),
                ..Look::default()
            })
            .child(url);
        let body = cx.content.below(bar_r.h());
        let mut col = Column::new(body, self.stack.scroll());
        let pad = cx.dp(20.0);
        let width = body.w() - 2 * pad;
        let mut title = text_look(cx, 26.0, TEXT);
        title.bold = true;
        title.wrap = true;
        title.valign = Align::Start;
        let h = wrapped_height(&r.title, &title, width) + cx.dp(16.0);
        let rect = col.next(h).inset(pad, cx.dp(8.0));
        col.push(label(rect, rid(PKG, "page_title"), &r.title, title));
        for p in page_paragraphs(r) {
            let mut look = text_look(cx, 16.0, TEXT);
            look.wrap = true;
            look.valign = Align::Start;
            let h = wrapped_height(&p, &look, width) + cx.dp(16.0);
            let rect = col.next(h).inset(pad, cx.dp(8.0));
            col.push(label(rect, rid(PKG, "page_text"), p, look));
        }
        col.gap(cx.dp(24.0));
        content_root(cx)
            .child(bar)
            .child(col.finish(scroller("android.webkit.WebView", rid(PKG, "page_content"))))
    }
}

impl App for Browser {
    fn build(&self, cx: &Cx, data: &PhoneState) -> Element {
        match self.stack.top() {
            Page::Home => self.home_page(cx, data),
            Page::Results(q) => self.results_page(cx, q),
            Page::Web { query, rank } => match search_results(query).get(*rank) {
                Some(r) => self.web_page(cx, r),
                None => self.results_page(cx, query),
            },
        }
    }

    fn activity(&self) -> &'static str {
        super::MAIN_ACTIVITY
    }

    fn back(&mut self) -> bool {
        self.stack.pop()
    }

    fn field_mut(&mut self, id: &str) -> Option<&mut String> {
        let has_box = !matches!(self.stack.top(), Page::Web { .. });
        (id == SEARCH_BOX && has_box).then_some(&mut self.input)
    }

    fn enter(&mut self, id: &str, data: &mut PhoneState, _now_ms: u64) -> Enter {
        if id == SEARCH_BOX {
            self.search(data);
        }
        Enter::Done
    }

    fn scroll_mut(&mut self) -> &mut i32 {
        self.stack.scroll_mut()
    }
}
