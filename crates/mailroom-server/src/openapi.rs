//! The OpenAPI document, generated from the routes and their handlers' annotations so it
//! cannot drift from what the server serves: the router and the document are built from
//! one list of routes (`utoipa_axum`'s `OpenApiRouter`), so a route cannot be served and
//! left out of the document, or documented and not served.

use std::sync::LazyLock;

use utoipa::openapi::path::Operation;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{Content, Ref, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use crate::error::ErrorBody;
use crate::names::Name;
use crate::routes::{consume_stream, publish_stream};

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
        BinaryBodies.modify(&mut document);
        AllOptionalBodiesOptional.modify(&mut document);
        ServerErrorsListed.modify(&mut document);
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
    components(schemas(
        ErrorBody,
        Name,
        publish_stream::StreamConfirmation,
        publish_stream::TextFrames,
        consume_stream::ServerFrame,
        consume_stream::Settlement
    )),
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

/// The operations of a path, whichever methods it has.
fn operations(item: &mut utoipa::openapi::PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.patch,
    ]
    .into_iter()
    .flatten()
}

/// Describes every `application/octet-stream` body, sent or answered, as
/// `{"type": "string", "format": "binary"}`: what client generators read as "bytes"
/// (a bare string makes them send text, and cannot carry any byte).
struct BinaryBodies;

impl Modify for BinaryBodies {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let binary = || {
            RefOr::T(Schema::Object(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::Binary)))
                    .build(),
            ))
        };
        for item in openapi.paths.paths.values_mut() {
            for operation in operations(item) {
                if let Some(body) = operation.request_body.as_mut() {
                    if let Some(content) = body.content.get_mut(OCTET_STREAM) {
                        content.schema = Some(binary());
                    }
                }
                for response in operation.responses.responses.values_mut() {
                    if let RefOr::T(response) = response {
                        if let Some(content) = response.content.get_mut(OCTET_STREAM) {
                            content.schema = Some(binary());
                        }
                    }
                }
            }
        }
    }
}

const OCTET_STREAM: &str = "application/octet-stream";

/// Lists on every operation the answers any call may get besides its own: 500
/// `internal` (a bug or a failed task), 501 (`not_supported` by the backend) and 503
/// (`store_failed`: the store is fail-stop; `store_unavailable`: its database cannot be
/// reached), each with the error body, so generated clients decode them as errors
/// instead of failing on an undocumented status.
struct ServerErrorsListed;

impl Modify for ServerErrorsListed {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let answers = [
            (
                "500",
                "`internal`: the server failed (a bug, a failed task), or \
                 `storage_error`: a disk read or write failed",
            ),
            (
                "501",
                "`not_supported`: the broker's backend does not support this call yet",
            ),
            (
                "503",
                "`store_failed`: the store is fail-stop after a failed write or sync, or \
                 `store_unavailable`: the PostgreSQL store cannot be reached now",
            ),
        ];
        for (path, item) in openapi.paths.paths.iter_mut() {
            // /healthz documents its own 503 body; the document itself cannot fail.
            if path == "/healthz" || path == "/openapi.json" {
                continue;
            }
            for operation in operations(item) {
                for (status, description) in answers {
                    let error = ResponseBuilder::new()
                        .description(description)
                        .content(
                            "application/json",
                            Content::new(Some(Ref::from_schema_name("ErrorBody"))),
                        )
                        .build();
                    operation
                        .responses
                        .responses
                        .entry(status.to_owned())
                        .or_insert(RefOr::T(error));
                }
            }
        }
    }
}

/// Marks a JSON request body optional where its schema requires no field: the server
/// takes an empty body there as `{}` (`body::parse`), so the document must not call it
/// required.
struct AllOptionalBodiesOptional;

impl Modify for AllOptionalBodiesOptional {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let Some(components) = openapi.components.as_ref() else {
            return;
        };
        let all_optional = |name: &str| match components.schemas.get(name) {
            Some(RefOr::T(Schema::Object(object))) => object.required.is_empty(),
            _ => false,
        };
        let mut optional = Vec::new();
        for (path, item) in &openapi.paths.paths {
            for (method, operation) in [("put", &item.put), ("post", &item.post)] {
                let Some(body) = operation.as_ref().and_then(|op| op.request_body.as_ref()) else {
                    continue;
                };
                let schema = body
                    .content
                    .get("application/json")
                    .and_then(|content| content.schema.as_ref());
                if let Some(RefOr::Ref(reference)) = schema {
                    let name = reference.ref_location.rsplit('/').next().unwrap_or("");
                    if all_optional(name) {
                        optional.push((path.clone(), method));
                    }
                }
            }
        }
        for (path, method) in optional {
            let Some(item) = openapi.paths.paths.get_mut(&path) else {
                continue;
            };
            let operation = if method == "put" {
                &mut item.put
            } else {
                &mut item.post
            };
            if let Some(body) = operation.as_mut().and_then(|op| op.request_body.as_mut()) {
                body.required = Some(utoipa::openapi::Required::False);
            }
        }
    }
}
