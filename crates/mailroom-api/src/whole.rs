//! Serde helpers for integer fields that also accept whole-number floats such as `3.0`:
//! JSON Schema calls those integers, so clients generated from the OpenAPI document may
//! send them. Fractions, negatives and out-of-range values are still refused.
//!
//! ```
//! #[derive(serde::Deserialize)]
//! struct Body {
//!     #[serde(deserialize_with = "mailroom_api::whole::deserialize")]
//!     n: u32,
//! }
//! let body: Body = serde_json::from_str(r#"{"n": 2.0}"#).unwrap();
//! assert_eq!(body.n, 2);
//! assert!(serde_json::from_str::<Body>(r#"{"n": 2.5}"#).is_err());
//! ```

use serde::de::Deserializer;
use serde::Deserialize as _;

/// The largest float that converts to a `u64` without saturating.
const U64_LIMIT_F64: f64 = 18_446_744_073_709_551_616.0;

fn convert<E: serde::de::Error, T: TryFrom<u64>>(number: serde_json::Number) -> Result<T, E> {
    let value = number.as_u64().or_else(|| {
        number
            .as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < U64_LIMIT_F64)
            .map(|f| f as u64)
    });
    let value =
        value.ok_or_else(|| E::custom(format!("expected a non-negative integer, got {number}")))?;
    T::try_from(value).map_err(|_| E::custom(format!("{value} is out of range")))
}

/// Deserializes a required integer field.
///
/// # Errors
/// Anything but a non-negative whole number that fits `T`.
pub fn deserialize<'de, D: Deserializer<'de>, T: TryFrom<u64>>(d: D) -> Result<T, D::Error> {
    convert(serde_json::Number::deserialize(d)?)
}

/// Deserializes an optional integer field (`null` or absent is `None`; pair it with
/// `#[serde(default)]`).
///
/// # Errors
/// As for [`deserialize`].
pub fn deserialize_option<'de, D: Deserializer<'de>, T: TryFrom<u64>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    match Option::<serde_json::Number>::deserialize(d)? {
        None => Ok(None),
        Some(number) => convert::<D::Error, T>(number).map(Some),
    }
}

/// Deserializes an integer field where `null` means something of its own: absent is
/// `None` (pair it with `#[serde(default)]`), `null` is `Some(None)`, a number
/// `Some(Some(n))`.
///
/// ```
/// #[derive(serde::Deserialize)]
/// struct Body {
///     #[serde(default, deserialize_with = "mailroom_api::whole::deserialize_nullable")]
///     n: Option<Option<u64>>,
/// }
/// let parse = |json| serde_json::from_str::<Body>(json).unwrap().n;
/// assert_eq!((parse("{}"), parse(r#"{"n":null}"#), parse(r#"{"n":3.0}"#)), (None, Some(None), Some(Some(3))));
/// ```
///
/// # Errors
/// As for [`deserialize`].
pub fn deserialize_nullable<'de, D: Deserializer<'de>, T: TryFrom<u64>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    deserialize_option(d).map(Some)
}
