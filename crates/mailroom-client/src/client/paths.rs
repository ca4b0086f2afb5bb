//! The client's paths and URLs: each call's path written from its segments, the name
//! checks of the paths under a topic, group or channel, and the authority every call's
//! URI carries.

use http::uri::Authority;
use mailroom_api::NameKind;
use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
use url::Url;

use super::Client;
use crate::ClientError;

impl Client {
    /// The path of `segments` under the base URL's, each segment percent-encoded as the
    /// URL standard encodes a path segment: what [`url`](Self::url)'s path would be,
    /// without building and serializing a whole URL per call.
    pub(crate) fn path(&self, segments: &[&str]) -> String {
        let mut path = String::with_capacity(self.base_path.len() + 64);
        path.push_str(&self.base_path);
        for segment in segments {
            path.push('/');
            path.extend(utf8_percent_encode(segment, PATH_SEGMENT));
        }
        path
    }

    /// The URL of `segments` under the base URL, each segment percent-encoded.
    pub(crate) fn url(&self, segments: &[&str]) -> Result<Url, ClientError> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| ClientError::InvalidUrl(self.base.to_string()))?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }

    /// The path `v1/topics/{topic}/{tail...}`, once `topic` passes the name rule.
    pub(crate) fn topic_path<'a>(
        topic: &'a str,
        tail: &[&'a str],
    ) -> Result<Vec<&'a str>, ClientError> {
        ClientError::check_name(NameKind::Topic, topic)?;
        let mut path = vec!["v1", "topics", topic];
        path.extend_from_slice(tail);
        Ok(path)
    }

    /// The path `v1/topics/{topic}/groups/{group}/{tail...}`, once both names pass the
    /// name rule.
    pub(crate) fn group_path<'a>(
        topic: &'a str,
        group: &'a str,
        tail: &[&'a str],
    ) -> Result<Vec<&'a str>, ClientError> {
        ClientError::check_name(NameKind::Group, group)?;
        let mut path = Self::topic_path(topic, &["groups", group])?;
        path.extend_from_slice(tail);
        Ok(path)
    }

    /// The path `v1/channels/{channel}/{tail...}`, once `channel` passes the name rule.
    pub(crate) fn channel_path<'a>(
        channel: &'a str,
        tail: &[&'a str],
    ) -> Result<Vec<&'a str>, ClientError> {
        ClientError::check_name(NameKind::Channel, channel)?;
        let mut path = vec!["v1", "channels", channel];
        path.extend_from_slice(tail);
        Ok(path)
    }
}

/// The URL standard's percent-encode set for a path segment of an `http` URL (the path
/// set, then `/`, `%` and, for special schemes, `\\`), as `url` encodes them.
const PATH_SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'<')
    .add(b'>')
    .add(b'`')
    .add(b'#')
    .add(b'?')
    .add(b'{')
    .add(b'}')
    .add(b'/')
    .add(b'%')
    .add(b'\\');

/// `base`'s host and its port unless it is the default: what hyper's pool keys a
/// connection by and sends as `Host`.
pub(super) fn authority_of(base: &Url) -> Result<Authority, ClientError> {
    let invalid =
        || ClientError::InvalidUrl(format!("{base}: expected an http:// URL with a host"));
    let host = base.host_str().ok_or_else(invalid)?;
    let text = match base.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    text.parse().map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves names are percent-encoded into single path segments, so a hostile name can
    // never address a different endpoint.
    #[test]
    fn url_encodes_each_segment() {
        let client = Client::new("http://127.0.0.1:7070/").unwrap();
        let url = client.url(&["v1", "topics", "a/b?c"]).unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:7070/v1/topics/a%2Fb%3Fc");
    }

    proptest::proptest! {
        // Proves a call's path is the path `url` would make of the same segments under
        // the same base, with or without a base path and its trailing `/`: the direct
        // writer encodes exactly as the URL standard does. (Tabs and line breaks, which
        // `url` drops, and `%`, whose dot forms it reads as `.`, are not in the names the
        // calls send: the name rule refuses them.)
        #[test]
        fn paths_are_what_url_would_make(
            base in proptest::sample::select(vec![
                "http://127.0.0.1:7070",
                "http://127.0.0.1:7070/",
                "http://[::1]:7070/under/",
                "http://example.test/under",
            ]),
            segments in proptest::collection::vec("[^\t\n\r%]{1,12}", 1..6),
        ) {
            proptest::prop_assume!(segments.iter().all(|s| s != "." && s != ".."));
            let client = Client::new(base).unwrap();
            let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
            let url = client.url(&segments).unwrap();
            proptest::prop_assert_eq!(client.path(&segments), url.path());
        }
    }

    // Proves a call's authority is the base URL's host, with its port only when it is not
    // the default.
    #[test]
    fn the_authority_is_the_base_host_and_port() {
        let cases = [
            ("http://127.0.0.1:7070", "127.0.0.1:7070"),
            ("http://example.test/", "example.test"),
            ("http://[::1]:9/", "[::1]:9"),
        ];
        for (base, authority) in cases {
            let client = Client::new(base).unwrap();
            assert_eq!(client.authority().as_str(), authority, "{base}");
        }
    }
}
