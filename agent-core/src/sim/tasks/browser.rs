//! Browser tasks: search the web, open a given result of a search.
//!
//! The phone's search engine is a pure function of the query
//! ([`search_results`]), public like a real engine's pages are: checkers
//! recompute the URL a task asks for, and the oracle knows which title to
//! look for, as a person reading "the third result" would count them.

use super::oracle::{self, List};
use super::values::Draw;
use super::{OracleStep, Task, loose_eq, pick_or_make};
use crate::device::ui::UiNode;
use crate::sim::phone::{Key, Phone, PhoneState, SearchResult, search_results};
use rand::RngExt;

const PKG: &str = "com.btl.browser";
const LABEL: &str = "Browser";
const HINT: &str = "Search or type URL";

const QUERIES: [&str; 14] = [
    "weather in 北京",
    "best ramen in Tokyo",
    "how to bake sourdough",
    "café crème recipe",
    "München train station",
    "rust borrow checker",
    "jazz festivals this summer",
    "cheap flights to Lisbon",
    "São Paulo museums",
    "北京 烤鸭",
    "how tall is Mount Everest",
    "Zoë Kravitz movies",
    "electric bike reviews",
    "tide times Brighton",
];

/// A query of the pool, or made up (lowercase, as queries are typed).
fn sample_query(rng: &mut Draw) -> String {
    pick_or_make(rng, &QUERIES, |d| d.phrase(2..=4).to_lowercase())
}

const ORDINALS: [&str; 8] = [
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
];

fn finish_setup(phone: &mut Phone, query: &str) {
    let browser = &mut phone.state_mut().browser;
    browser.searches.retain(|q| !loose_eq(q, query));
    browser.visited.clear();
    if browser
        .last_query
        .as_deref()
        .is_some_and(|q| loose_eq(q, query))
    {
        browser.last_query = None;
    }
    phone.force_stop(PKG);
    phone.key(Key::Home);
}

/// The Browser page in front.
enum Page<'a> {
    /// The results page for the query, done loading.
    Results(List<'a>),
    /// A result page, at this address.
    Web(&'a str),
    /// The start page, or results for another query, or a query being
    /// typed: a search is still to be made.
    Search {
        search_box: &'a UiNode,
        button: &'a UiNode,
    },
    Other,
}

fn page<'a>(screen: &'a UiNode, query: &str) -> Page<'a> {
    if let Some(url) = oracle::text_of(screen, "url_bar") {
        return Page::Web(url);
    }
    let (Some(search_box), Some(button)) = (
        screen.find_by_id("search_box"),
        screen.find_by_id("search_button"),
    ) else {
        return Page::Other;
    };
    // A search hides the keyboard and drops the focus; a focused box is
    // being typed in, whatever page is under it.
    match List::find(screen, "results_list") {
        Some(list) if search_box.text == query && !search_box.focused => Page::Results(list),
        _ => Page::Search { search_box, button },
    }
}

/// The results page for `query` when it shows, else the next step to it.
fn search_oracle<'a>(screen: &'a UiNode, query: &str) -> Result<List<'a>, Box<OracleStep>> {
    if !oracle::in_app(screen, PKG) {
        return Err(Box::new(oracle::launch(screen, LABEL)));
    }
    let step = match page(screen, query) {
        Page::Results(list) => return Ok(list),
        Page::Search { search_box, button } => {
            oracle::fill(screen, search_box, HINT, query, "search")
                .unwrap_or_else(|| oracle::tap(screen, button, format!("Search for \"{query}\".")))
        }
        Page::Web(_) | Page::Other => oracle::back("Go back to the search page."),
    };
    Err(Box::new(step))
}

/// "Search the web for {query}."
pub(super) struct Search {
    query: String,
}

impl Search {
    pub fn sample(rng: &mut Draw) -> Search {
        Search {
            query: sample_query(rng),
        }
    }
}

impl Task for Search {
    fn name(&self) -> &'static str {
        "web_search"
    }

    fn goal(&self) -> String {
        format!("Search the web for \"{}\".", self.query)
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({ "query": self.query })
    }

    fn max_steps(&self) -> u32 {
        15
    }

    fn setup(&self, phone: &mut Phone) {
        finish_setup(phone, &self.query);
    }

    fn is_successful(&self, state: &PhoneState) -> bool {
        state
            .browser
            .searches
            .iter()
            .any(|q| loose_eq(q, &self.query))
    }

    fn oracle(&self, screen: &UiNode) -> Option<OracleStep> {
        search_oracle(screen, &self.query).err().map(|step| *step)
    }
}

/// "Open the {ordinal} search result for {query}."
pub(super) struct OpenResult {
    name: &'static str,
    query: String,
    /// 1 for the first result.
    rank: usize,
}

impl OpenResult {
    pub fn first(rng: &mut Draw) -> OpenResult {
        OpenResult {
            name: "web_open_first_result",
            query: sample_query(rng),
            rank: 1,
        }
    }

    /// Any rank but the first, often below the fold.
    pub fn nth(rng: &mut Draw) -> OpenResult {
        OpenResult {
            name: "web_open_nth_result",
            query: sample_query(rng),
            rank: rng.random_range(2..=ORDINALS.len()),
        }
    }

    /// The rank counted from 0, as results are listed.
    fn index(&self) -> usize {
        self.rank.saturating_sub(1)
    }

    fn ordinal(&self) -> &'static str {
        ORDINALS.get(self.index()).copied().unwrap_or("first")
    }

    fn result(&self) -> Option<SearchResult> {
        search_results(&self.query).into_iter().nth(self.index())
    }

    fn url(&self) -> Option<String> {
        self.result().map(|r| format!("https://{}", r.url))
    }
}

impl Task for OpenResult {
    fn name(&self) -> &'static str {
        self.name
    }

    fn goal(&self) -> String {
        format!(
            "Open the {} search result for \"{}\".",
            self.ordinal(),
            self.query
        )
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({ "query": self.query, "rank": self.rank })
    }

    fn max_steps(&self) -> u32 {
        20
    }

    fn setup(&self, phone: &mut Phone) {
        finish_setup(phone, &self.query);
    }

    fn is_successful(&self, state: &PhoneState) -> bool {
        self.url()
            .is_some_and(|url| state.browser.visited.contains(&url))
    }

    fn oracle(&self, screen: &UiNode) -> Option<OracleStep> {
        let want = self.result()?;
        let url = format!("https://{}", want.url);
        if oracle::in_app(screen, PKG)
            && let Page::Web(shown) = page(screen, &self.query)
        {
            return (shown != url).then(|| oracle::back("Go back to the search results."));
        }
        let list = match search_oracle(screen, &self.query) {
            Ok(list) => list,
            Err(step) => return Some(*step),
        };
        let results = search_results(&self.query);
        let rank_of = |item: &UiNode| {
            let title = oracle::text_of(item, "result_title")?;
            let url = oracle::text_of(item, "result_url")?;
            results
                .iter()
                .position(|r| r.title == title && r.url == url)
        };
        let what = format!("the {} result", self.ordinal());
        if let Some(item) = list
            .items
            .iter()
            .copied()
            .find(|i| rank_of(i) == Some(self.index()))
        {
            if list.clipped(item) {
                return Some(list.reveal(item, &what));
            }
            return Some(oracle::tap(
                screen,
                item,
                format!("Open {what}, \"{}\".", want.title),
            ));
        }
        let below = list
            .items
            .iter()
            .filter_map(|i| rank_of(i))
            .max()
            .is_none_or(|last| last < self.index());
        let way = if below { "down" } else { "up" };
        Some(list.scroll(below, format!("Scroll {way} to find {what}.")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::tasks::tests::blank_state;

    #[test]
    fn a_search_counts_once_submitted_in_any_case() {
        let task = Search {
            query: "weather in 北京".into(),
        };
        let mut state = blank_state();
        assert!(!task.is_successful(&state));
        state.browser.searches = vec!["weather in beijing".into(), "weather".into()];
        assert!(!task.is_successful(&state));
        state.browser.searches.push("Weather in 北京 ".into());
        assert!(task.is_successful(&state));
    }

    #[test]
    fn opening_a_result_needs_that_very_page() {
        let task = OpenResult {
            name: "web_open_nth_result",
            query: "rust borrow checker".into(),
            rank: 3,
        };
        let results = search_results("rust borrow checker");
        let url = |i: usize| format!("https://{}", results[i].url);
        let mut state = blank_state();
        state.browser.searches = vec!["rust borrow checker".into()];
        assert!(!task.is_successful(&state), "searching is not opening");
        state.browser.visited = vec![url(0), url(1), url(3)];
        assert!(!task.is_successful(&state), "neighbouring results");
        state.browser.visited.push(url(2));
        assert!(task.is_successful(&state));
    }
}
