//! Comparing the store with a model: the store's reads are taken once ([`StoreViews`]) and
//! held against each candidate model.

use mailroom_store::Store;

use crate::action::TOPICS;
use crate::model::Models;
use crate::store_side;

/// Where each topic's log starts (retention moves it on).
pub type Starts = [u64; TOPICS.len()];

/// What the store shows: its topics, and each topic's reads with where its log starts.
#[derive(Debug)]
pub struct StoreViews {
    topics: Vec<String>,
    views: Vec<Option<(u64, Vec<String>)>>,
}

impl StoreViews {
    /// Reads everything the comparison looks at, in the model's order.
    pub fn read(store: &Store) -> StoreViews {
        StoreViews {
            topics: store.topics(),
            views: (0..TOPICS.len())
                .map(|t| store_side::inspect(store, t))
                .collect(),
        }
    }

    /// Compares these reads with `models` at `now` (the model's reads are part of its
    /// history: they apply due expiries); answers where each log starts. `starts`: where
    /// they started at the last comparison. `lenient`: a read may fail, never differ.
    ///
    /// # Errors
    ///
    /// The first difference.
    pub fn compare(
        &self,
        models: &mut Models,
        now: u64,
        starts: &Starts,
        lenient: bool,
    ) -> Result<Starts, String> {
        if self.topics != models.topic_names() {
            return Err(format!(
                "topics {:?}, the model {:?}",
                self.topics,
                models.topic_names()
            ));
        }
        let mut new_starts = [0; TOPICS.len()];
        for (t, view) in self.views.iter().enumerate() {
            let Some((start, got)) = view else {
                continue;
            };
            let (start, name) = (*start, TOPICS[t]);
            if start < starts[t] && starts[t] <= models.len(t) {
                return Err(format!(
                    "{name}: the log went back from start {} to {start}",
                    starts[t]
                ));
            }
            if let Some(floor) = models.floor(t) {
                if start > floor {
                    return Err(format!(
                        "{name}: retention removed up to {start}, a group is at {floor}"
                    ));
                }
            }
            let expected = models.inspect(t, now, start);
            for (got, expected) in got.iter().zip(&expected) {
                if got != expected && !(lenient && got.contains("FAULT")) {
                    return Err(format!("{name}: store `{got}`, model `{expected}`"));
                }
            }
            if got.len() != expected.len() {
                return Err(format!(
                    "{name}: {} reads, the model {}",
                    got.len(),
                    expected.len()
                ));
            }
            new_starts[t] = start;
        }
        Ok(new_starts)
    }
}
