//! The OpenAPI document, generated from the routes and their handlers' annotations so it
//! cannot drift from what the server serves: the router and the document are built from
//! one list of routes (`utoipa_axum`'s `OpenApiRouter`), so a route cannot be served and
//! left out of the document, or documented and not served.

use std::sync::LazyLock;

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::error::ErrorBody;
use crate::names::Name;
use crate::routes::publish_stream;

/// The API's OpenAPI document: its paths come from the routes themselves
/// ([`routes`](crate::routes::routes), the one list of them, each with its
/// `#[utoipa::path]`), the rest from [`ApiDoc`]. Built once.
///
/// ```
/// let doc = mailroom_server::openapi::document();
/// assert!(doc.paths.paths.contains_key("/v1/topics/{topic}/groups/{group}/poll"));
/// ```
pub fn document() -> &'static utoipa::openapi::OpenApi {
    static DOCUMENT: LazyLock<utoipa::openapi::OpenApi> = LazyLock::new(|| {
        // The body limits do not show in the document, so any payload limit will do.
        let routes = crate::routes::routes(crate::config::Config::default().payload_bytes_max);
        let mut document = ApiDoc::openapi();
        document.merge(routes.v1.merge(routes.operations).into_openapi());
        BearerOnV1.modify(&mut document);
        RawBodiesOptional.modify(&mut document);
        crate::browser::openapi::BrowserRules.modify(&mut document);
        document
    });
    &DOCUMENT
}

/// What the document says besides its paths: the title, the shared schemas and the tags.
#[derive(Debug, OpenApi)]
#[openapi(
    info(title = "mailroom", description = "A message broker: durable topics with exact \
        consumer-group delivery state, and best-effort live channels. Every error is \
        {\"error\": \"<stable code>\", \"message\": \"...\"}."),
    components(schemas(ErrorBody, Name, publish_stream::StreamConfirmation)),
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
