//! Struct fields that accept a JSON object only.
//!
//! serde's derived `Deserialize` for a struct also accepts a sequence, filling the fields
//! in order, so `{"retention": [null, null]}` would pass for `{"retention": {}}` though
//! the schema says object. These helpers refuse anything but a map (or, for the optional
//! form, `null`) and hand the map to the derived implementation, so errors inside it
//! keep their field path.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// Reads a `T` from a JSON object; any other JSON value is refused.
///
/// ```
/// #[derive(serde::Deserialize, Debug, PartialEq)]
/// struct Inner { a: Option<u8> }
/// #[derive(serde::Deserialize, Debug)]
/// struct Body { #[serde(deserialize_with = "mailroom_api::object::deserialize")] inner: Inner }
/// assert_eq!(serde_json::from_str::<Body>(r#"{"inner":{"a":1}}"#).unwrap().inner, Inner { a: Some(1) });
/// assert!(serde_json::from_str::<Body>(r#"{"inner":[1]}"#).is_err());
/// ```
///
/// # Errors
/// A value that is not an object, or the object's own errors.
pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    d.deserialize_map(ObjectOnly(PhantomData))
}

/// Reads an optional `T` from a JSON object or `null` (a missing field needs
/// `#[serde(default)]` beside this).
///
/// ```
/// #[derive(serde::Deserialize, Debug, PartialEq)]
/// struct Inner { a: Option<u8> }
/// #[derive(serde::Deserialize, Debug)]
/// struct Body {
///     #[serde(default, deserialize_with = "mailroom_api::object::deserialize_option")]
///     inner: Option<Inner>,
/// }
/// assert_eq!(serde_json::from_str::<Body>(r#"{"inner":null}"#).unwrap().inner, None);
/// assert!(serde_json::from_str::<Body>(r#"{"inner":[null]}"#).is_err());
/// ```
///
/// # Errors
/// A value that is neither `null` nor an object, or the object's own errors.
pub fn deserialize_option<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    d.deserialize_option(OptionalObject(PhantomData))
}

/// Reads a list of `T`, each from a JSON object (`[{"offset":0,"attempt":1}]`, never
/// `[[0,1]]`).
///
/// ```
/// #[derive(serde::Deserialize, Debug, PartialEq)]
/// struct Item { a: u8 }
/// #[derive(serde::Deserialize, Debug)]
/// struct Body { #[serde(deserialize_with = "mailroom_api::object::deserialize_vec")] items: Vec<Item> }
/// assert_eq!(serde_json::from_str::<Body>(r#"{"items":[{"a":1}]}"#).unwrap().items, [Item { a: 1 }]);
/// assert!(serde_json::from_str::<Body>(r#"{"items":[[1]]}"#).is_err());
/// ```
///
/// # Errors
/// A value that is not an array, an item that is not an object, or an item's own errors.
pub fn deserialize_vec<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Vec<T>, D::Error> {
    let items = Vec::<Object<T>>::deserialize(d)?;
    Ok(items.into_iter().map(|Object(item)| item).collect())
}

/// Reads an optional list of `T` (each from a JSON object), or `null` (a missing field
/// needs `#[serde(default)]` beside this).
///
/// ```
/// #[derive(serde::Deserialize, Debug, PartialEq)]
/// struct Item { a: u8 }
/// #[derive(serde::Deserialize, Debug)]
/// struct Body {
///     #[serde(default, deserialize_with = "mailroom_api::object::deserialize_option_vec")]
///     items: Option<Vec<Item>>,
/// }
/// assert_eq!(serde_json::from_str::<Body>(r#"{"items":null}"#).unwrap().items, None);
/// assert!(serde_json::from_str::<Body>(r#"{"items":[[1]]}"#).is_err());
/// ```
///
/// # Errors
/// As for [`deserialize_vec`], for a value that is not `null`.
pub fn deserialize_option_vec<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Vec<T>>, D::Error> {
    let items = Option::<Vec<Object<T>>>::deserialize(d)?;
    Ok(items.map(|items| items.into_iter().map(|Object(item)| item).collect()))
}

/// A `T` read by [`deserialize`]: the item type of the list helpers.
struct Object<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize(d).map(Object)
    }
}

struct ObjectOnly<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectOnly<T> {
    type Value = T;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map))
    }
}

struct OptionalObject<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for OptionalObject<T> {
    type Value = Option<T>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object or null")
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        deserialize(d).map(Some)
    }
}
