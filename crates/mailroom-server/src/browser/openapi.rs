//! What the OpenAPI document says of the browser rules: the 403 `forbidden_origin`
//! answer of every writing operation and stream, and the `ticket` parameter of streams.

use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Required, ResponseBuilder};
use utoipa::Modify;

use super::credentials::TICKET_PARAMETER;
use super::origins::STREAM_ROUTES;

/// Adds the 403 answer and the stream `ticket` parameter to the document.
#[derive(Debug, Clone, Copy)]
pub struct BrowserRules;

fn forbidden_origin(operation: &mut Operation) {
    let response = ResponseBuilder::new()
        .description("A browser request from an origin that is not allowed (forbidden_origin)")
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .build();
    operation
        .responses
        .responses
        .insert("403".to_owned(), RefOr::T(response));
}

impl Modify for BrowserRules {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for (path, item) in openapi.paths.paths.iter_mut() {
            let writes = [
                &mut item.put,
                &mut item.post,
                &mut item.patch,
                &mut item.delete,
            ];
            for operation in writes.into_iter().flatten() {
                forbidden_origin(operation);
            }
            if !STREAM_ROUTES.contains(&path.as_str()) {
                continue;
            }
            let Some(get) = item.get.as_mut() else {
                continue;
            };
            forbidden_origin(get);
            let ticket = ParameterBuilder::new()
                .name(TICKET_PARAMETER)
                .parameter_in(ParameterIn::Query)
                .required(Required::False)
                .description(Some(
                    "A stream ticket from POST /v1/tickets, in place of the token (single use)",
                ))
                .schema(Some(
                    utoipa::openapi::ObjectBuilder::new()
                        .schema_type(utoipa::openapi::schema::Type::String),
                ))
                .build();
            get.parameters.get_or_insert_with(Vec::new).push(ticket);
        }
    }
}
