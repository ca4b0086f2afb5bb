//! The states the store may be in. An operation that failed under a fault may have
//! happened, not happened, or (a batch publish) happened in part; recovery decides, and
//! what it decided may show only later (a touch that was lost shows when the lease runs
//! out). So the simulation keeps every model still consistent with what the store has
//! shown, applies each action to all of them, and drops those that disagree.

use mailroom::topic::DeliveryId;

use crate::action::Action;
use crate::compare::{Starts, StoreViews};
use crate::model::{Histories, Models, Outcome};
use crate::wire::on_the_wire;

/// The most candidate states kept at once. More is a run with many unresolved failures
/// in a row; the newest forks are then not kept, and a failure says so.
const CANDIDATES_MAX: usize = 16;

/// The candidate models, the first the one the run believes most (the longest-lived).
#[derive(Debug)]
pub struct Candidates {
    list: Vec<Models>,
    /// Whether forks were ever dropped for [`CANDIDATES_MAX`].
    pub truncated: bool,
}

impl Default for Candidates {
    fn default() -> Self {
        Candidates {
            list: vec![Models::default()],
            truncated: false,
        }
    }
}

/// Whether an answer says the action changed nothing, so a failed attempt at it has only
/// one outcome.
fn changed_nothing(action: &Action, answer: &Outcome) -> bool {
    let Outcome::Answer(text) = answer else {
        return false;
    };
    !text.starts_with("Ok(")
        || matches!(
            action,
            Action::Retention | Action::Checkpoint | Action::Sync | Action::Advance(_)
        )
        || matches!(
            (action, text.as_str()),
            (Action::Poll(..), "Ok(None)")
                | (Action::PollBatch(..), "Ok([])")
                | (Action::Redrive(..) | Action::Purge(..), "Ok(0)")
                | (Action::CreateTopic(_), "Ok(false)")
        )
}

/// The proper prefixes of a batch that failed, as actions: its records are written one
/// after another, and a power cut keeps a prefix of the unsynced writes (confirming a
/// batch is all or nothing; surviving one is not). `answer`: what the whole batch would
/// have answered, so a poll's prefixes stop at what it would have handed out.
fn prefixes(action: &Action, answer: &Outcome) -> Vec<Action> {
    let handed = match answer {
        Outcome::Answer(text) => text.matches("Delivery {").count(),
        Outcome::Fault(_) => 0,
    };
    match action {
        Action::PublishBatch(t, payloads) => (1..payloads.len())
            .map(|kept| Action::PublishBatch(*t, payloads[..kept].to_vec()))
            .collect(),
        Action::PollBatch(t, g, c, _) => (1..handed)
            .map(|kept| Action::PollBatch(*t, *g, *c, kept))
            .collect(),
        Action::AckBatch(t, g, ids) => (1..ids.len())
            .map(|kept| Action::AckBatch(*t, *g, ids[..kept].to_vec()))
            .collect(),
        Action::NackBatch(t, g, ids, options) => (1..ids.len())
            .map(|kept| Action::NackBatch(*t, *g, ids[..kept].to_vec(), options.clone()))
            .collect(),
        Action::AckThenPoll(t, g, ids, c, _) => {
            let acks = (1..=ids.len()).map(|kept| Action::AckBatch(*t, *g, ids[..kept].to_vec()));
            let polls = (1..handed).map(|kept| Action::AckThenPoll(*t, *g, ids.clone(), *c, kept));
            acks.chain(polls).collect()
        }
        _ => Vec::new(),
    }
}

impl Candidates {
    /// Every candidate's histories, to fork from if the next action fails.
    pub fn histories(&self) -> Vec<Histories> {
        self.list.iter().map(Models::histories).collect()
    }

    /// Every candidate rebuilt, for checks that must not change the run's models.
    pub fn scratch(&self) -> Vec<Models> {
        self.list
            .iter()
            .map(|m| Models::rebuild(&m.histories()))
            .collect()
    }

    /// Applies `action` to every candidate; keeps those whose answer is `got` and
    /// answers the deliveries it handed out. `wire`: `got` came over HTTP, where a
    /// refusal shows as its status and code (`wire::on_the_wire`).
    ///
    /// # Errors
    ///
    /// No candidate answers `got`.
    pub fn answered(
        &mut self,
        now: u64,
        action: &Action,
        got: &Outcome,
        wire: bool,
    ) -> Result<Option<Vec<DeliveryId>>, String> {
        let mut answers = Vec::new();
        let mut handed = None;
        self.list.retain_mut(|models| {
            let (expected, ids) = models.apply(now, action);
            let expected = if wire {
                on_the_wire(action, &expected)
            } else {
                expected
            };
            let kept = &expected == got;
            if kept && handed.is_none() {
                handed = ids;
            }
            answers.push(expected);
            kept
        });
        if self.list.is_empty() {
            return Err(format!(
                "{action:?} answered {got:?}, the model {}{}",
                answers
                    .iter()
                    .map(|a| format!("{a:?}"))
                    .collect::<Vec<_>>()
                    .join(" or "),
                self.truncation()
            ));
        }
        Ok(handed)
    }

    /// `action` failed: every candidate forks into its outcomes (done, not done, and for
    /// a batch each proper prefix). `before`: the candidates' histories before it.
    pub fn failed(&mut self, before: Vec<Histories>, now: u64, action: &Action) {
        let mut list = Vec::new();
        for history in before {
            let mut done = Models::rebuild(&history);
            let (answer, _) = done.apply(now, action);
            let one_outcome = changed_nothing(action, &answer);
            list.push(done);
            if one_outcome {
                continue;
            }
            list.push(Models::rebuild(&history));
            for part in prefixes(action, &answer) {
                let mut models = Models::rebuild(&history);
                models.apply(now, &part);
                list.push(models);
            }
        }
        if list.len() > CANDIDATES_MAX {
            list.truncate(CANDIDATES_MAX);
            self.truncated = true;
        }
        self.list = list;
    }

    /// Compares `views` with every candidate, keeping those that match; answers where
    /// the logs start.
    ///
    /// # Errors
    ///
    /// No candidate matches.
    pub fn compare(
        &mut self,
        views: &StoreViews,
        now: u64,
        starts: &Starts,
    ) -> Result<Starts, String> {
        let mut mismatches = Vec::new();
        let mut new_starts = None;
        self.list
            .retain_mut(|models| match views.compare(models, now, starts, false) {
                Ok(starts) => {
                    new_starts.get_or_insert(starts);
                    true
                }
                Err(mismatch) => {
                    mismatches.push(mismatch);
                    false
                }
            });
        new_starts.ok_or_else(|| self.no_match(mismatches))
    }

    /// Whether `views` (of a store stopped by a fault, or of a damaged copy) match some
    /// candidate, allowing failed reads; changes no candidate.
    ///
    /// # Errors
    ///
    /// No candidate matches.
    pub fn check_lenient(
        &self,
        views: &StoreViews,
        now: u64,
        starts: &Starts,
    ) -> Result<(), String> {
        let mut mismatches = Vec::new();
        for mut models in self.scratch() {
            match views.compare(&mut models, now, starts, true) {
                Ok(_) => return Ok(()),
                Err(mismatch) => mismatches.push(mismatch),
            }
        }
        Err(self.no_match(mismatches))
    }

    fn no_match(&self, mut mismatches: Vec<String>) -> String {
        let truncation = self.truncation();
        match mismatches.len() {
            1 => format!("{}{truncation}", mismatches.remove(0)),
            _ => format!(
                "matches no outcome of the operations that failed:\n  {}{truncation}",
                mismatches.join("\n  ")
            ),
        }
    }

    fn truncation(&self) -> &'static str {
        if self.truncated {
            " (some outcomes of failed operations were not kept: too many at once)"
        } else {
            ""
        }
    }

    /// How many candidate states there are.
    pub fn len(&self) -> usize {
        self.list.len()
    }
}
