//! The model's answers in the form the HTTP side shows them: refusals as status and
//! code, a batch's refused items as their code.

use crate::action::Action;
use crate::model::Outcome;

/// The model's answer to `action` as the HTTP side shows it: a refused call as its
/// status and code (`unknown topic`, `Err(UnknownGroup ..)` and the like), and inside a
/// batch's results each refused item as `Err(<code>)`. Everything else is unchanged.
///
/// The server checks a request's own bounds before it looks the topic up, so a batch of
/// no deliveries or a poll of at most 0 is `400 invalid_argument` whether or not the
/// topic and group exist.
pub fn on_the_wire(action: &Action, expected: &Outcome) -> Outcome {
    let Outcome::Answer(text) = expected else {
        return expected.clone();
    };
    let out_of_bounds = match action {
        Action::PollBatch(.., max) | Action::AckThenPoll(.., max) => *max == 0,
        Action::AckBatch(_, _, ids) | Action::NackBatch(_, _, ids, _) => ids.is_empty(),
        _ => false,
    };
    if out_of_bounds {
        return Outcome::Answer("HTTP 400 invalid_argument".to_owned());
    }
    let refusals = [
        ("unknown topic", "HTTP 404 unknown_topic"),
        ("Err(UnknownGroup", "HTTP 404 unknown_group"),
        ("Err(GroupExists", "HTTP 409 group_exists"),
        ("Err(NotOwned", "HTTP 409 not_owned"),
        ("Err(InvalidArgument", "HTTP 400 invalid_argument"),
    ];
    for (prefix, wire) in refusals {
        if text.starts_with(prefix) {
            return Outcome::Answer(wire.to_owned());
        }
    }
    Outcome::Answer(collapse(text, "Err(NotOwned {", "Err(not_owned)"))
}

/// `text` with every parenthesised `opening...)` (balanced) replaced by `with`.
fn collapse(text: &str, opening: &str, with: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(opening) {
        out.push_str(&rest[..at]);
        let mut depth = 0usize;
        let mut end = rest.len();
        for (i, c) in rest[at..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = at + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push_str(with);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a batch's refused items collapse to their code and nothing else changes.
    #[test]
    fn refused_items_collapse_to_their_code() {
        let text = "Ok([Ok(()), Err(NotOwned { requested: DeliveryId { offset: 1, attempt: 1 }, \
                    current: Some(DeliveryId { offset: 1, attempt: 2 }) }), Ok(())])";
        assert_eq!(
            collapse(text, "Err(NotOwned {", "Err(not_owned)"),
            "Ok([Ok(()), Err(not_owned), Ok(())])"
        );
        assert_eq!(
            on_the_wire(&Action::Sync, &Outcome::Answer("unknown topic".into())),
            Outcome::Answer("HTTP 404 unknown_topic".into())
        );
    }
}
