use proptest::prelude::*;

use super::*;

/// Text of every kind a string may hold: plain runs short and long, every control
/// character, quotes, backslashes, DEL and non-ASCII. The writers' tests draw their
/// strings from it.
pub(crate) fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => "[a-z0-9 ._/-]{0,40}",
        1 => (0u8..0x20).prop_map(|b| char::from(b).to_string()),
        1 => Just("\"".to_owned()),
        1 => Just("\\".to_owned()),
        1 => Just("\u{7f}é漢🦀".to_owned()),
    ];
    proptest::collection::vec(piece, 0..6).prop_map(|pieces| pieces.concat())
}

/// What [`first_special`] must answer, byte by byte.
fn first_special_by_bytes(text: &[u8]) -> Option<usize> {
    text.iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
}

// Proves the word-at-a-time search and the long strings' search stop where a byte-wise
// one does: a quote, a backslash or a control character at every position of texts
// shorter and longer than the word-wise part, in a word and in a word's tail, with a
// second special byte after it (which a missed first one would run on to), bytes above
// 0x7f beside it (which a borrow could flag wrongly), and lengths cut off after it.
#[test]
fn the_first_quote_backslash_or_control_character_is_found_wherever_it_stands() {
    for len in 0..(WORDWISE_BYTES + 72) {
        for first in [b'"', b'\\', 0x00, 0x01, 0x1f] {
            for filler in [b'a', b' ', 0x21, 0x7f, 0x80, 0xff] {
                for at in 0..len {
                    let mut text = vec![filler; len + 1];
                    text[at] = first;
                    text[len] = b'"';
                    // Cut off at it, just after it, a word after it, and at the end.
                    let ends = [at, at + 1, at + 9, len, len + 1];
                    for end in ends.into_iter().filter(|&end| end <= len + 1) {
                        let text = &text[..end];
                        assert_eq!(
                            first_special(text),
                            first_special_by_bytes(text),
                            "{text:?}"
                        );
                    }
                }
                assert_eq!(first_special(&vec![filler; len]), None);
            }
        }
    }
}

proptest! {
    // Proves it on any bytes, several special ones among them.
    #[test]
    fn first_special_agrees_with_a_byte_wise_search(
        text in proptest::collection::vec(
            prop_oneof![4 => 0x20u8..0x7f, 1 => Just(b'"'), 1 => Just(b'\\'),
                1 => 0u8..0x20, 1 => 0x80u8..=0xff],
            0..150,
        ),
    ) {
        prop_assert_eq!(first_special(&text), first_special_by_bytes(&text));
    }
}
