//! The OpenAPI document, generated from the handlers' annotations so it cannot drift
//! from the routes it describes.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::error::ErrorBody;
use crate::names::Name;
use crate::routes::{
    batch, channels, dead_letters, deliveries, group_control, groups, ops, publish_stream, topics,
};

/// The API's OpenAPI document.
///
/// ```
/// use utoipa::OpenApi as _;
/// let doc = mailroom_server::openapi::ApiDoc::openapi();
/// assert!(doc.paths.paths.contains_key("/v1/topics/{topic}/groups/{group}/poll"));
/// ```
#[derive(Debug, OpenApi)]
#[openapi(
    info(title = "mailroom", description = "A message broker: durable topics with exact \
        consumer-group delivery state, and best-effort live channels. Every error is \
        {\"error\": \"<stable code>\", \"message\": \"...\"}."),
    paths(
        topics::create_topic, topics::list_topics, topics::topic_info, topics::publish,
        topics::publish_batch, topics::delete_topic, publish_stream::publish_stream,
        groups::create_group, groups::group_info, groups::delete_group, deliveries::poll,
        deliveries::poll_raw, deliveries::ack, deliveries::nack, dead_letters::dead_letters,
        group_control::touch, group_control::redrive, group_control::purge,
        batch::poll_batch, batch::ack_batch, batch::nack_batch,
        channels::create_channel, channels::list_channels, channels::channel_info_route,
        channels::publish_channel, channels::close_channel, channels::subscribe_ws,
        channels::subscribe_events,
        ops::healthz, ops::metrics, ops::openapi,
    ),
    components(schemas(ErrorBody, Name, publish_stream::StreamConfirmation)),
    modifiers(&BearerOnV1, &RawBodiesOptional),
    tags(
        (name = "topics", description = "Durable, retained topics"),
        (name = "groups", description = "Consumer groups: poll, ack, nack (release, reject), \
            their batch forms and long poll, touch, dead letters, redrive, purge"),
        (name = "channels", description = "Live, best-effort fan-out"),
        (name = "operations", description = "Health, metrics, this document"),
    )
)]
pub struct ApiDoc;

/// Declares the bearer token and requires it on every `/v1` operation.
struct BearerOnV1;

impl Modify for BearerOnV1 {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        for (path, item) in openapi.paths.paths.iter_mut() {
            if !path.starts_with("/v1") {
                continue;
            }
            let operations = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
            ];
            for operation in operations.into_iter().flatten() {
                // Optional as documented: the token is only needed when one is configured.
                operation.security = Some(vec![
                    SecurityRequirement::new("bearer", Vec::<String>::new()),
                    SecurityRequirement::default(),
                ]);
            }
        }
    }
}

/// Endpoints whose body may be left out: the raw-body publishes take any bytes, the empty
/// message included; a poll without a body is the anonymous consumer; a redrive or purge
/// without a body covers every dead letter.
struct RawBodiesOptional;

impl Modify for RawBodiesOptional {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for path in [
            "/v1/topics/{topic}/messages",
            "/v1/channels/{channel}/messages",
            "/v1/topics/{topic}/groups/{group}/poll",
            "/v1/topics/{topic}/groups/{group}/poll/raw",
            "/v1/topics/{topic}/groups/{group}/dead-letters/redrive",
            "/v1/topics/{topic}/groups/{group}/dead-letters/purge",
        ] {
            let post = openapi
                .paths
                .paths
                .get_mut(path)
                .and_then(|item| item.post.as_mut());
            if let Some(body) = post.and_then(|operation| operation.request_body.as_mut()) {
                body.required = Some(utoipa::openapi::Required::False);
            }
        }
    }
}
