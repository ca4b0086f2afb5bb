//! One HTTP exchange: send a request, read the whole answer within its time limit, and
//! turn an error status into the server's typed error.

use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt as _;
use serde::de::DeserializeOwned;

use crate::call::Call;
use crate::error::HttpError;
use crate::timeouts::within;
use crate::{Client, ClientError, TimeoutLimit};

/// A successful answer, read to its end within the request's time limit.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) body: Bytes,
}

impl Client {
    /// Sends the request and reads the whole answer within the request time limit,
    /// turning an error status into [`ClientError::Api`].
    pub(crate) async fn send(&self, request: Call) -> Result<Answer, ClientError> {
        self.send_within(request, self.timeouts().request).await
    }

    /// As [`send`](Self::send), with `limit` for the request instead of the client's
    /// (a long poll's wait plus the request limit).
    pub(crate) async fn send_within(
        &self,
        request: Call,
        limit: Duration,
    ) -> Result<Answer, ClientError> {
        let request = request.into_request(self.authority())?;
        let exchange = async {
            let response = self
                .http()
                .request(request)
                .await
                .map_err(HttpError::from)?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(HttpError::from)?;
            Ok::<_, HttpError>((status, body.to_bytes()))
        };
        let (status, body) = within(TimeoutLimit::Request, limit, exchange)
            .await
            .map_err(|error| self.connect_timeout_named(error))?;
        if status.is_success() {
            return Ok(Answer { status, body });
        }
        Err(ClientError::from_answer(status.as_u16(), &body))
    }

    /// The connector enforces the connect limit inside the connection pool and reports
    /// it as a connect error caused by a timeout; this names it like every other limit.
    fn connect_timeout_named(&self, error: ClientError) -> ClientError {
        match error {
            ClientError::Http(http) if http.is_connect() && http.timed_out() => {
                ClientError::Timeout {
                    limit: TimeoutLimit::Connect,
                    after: self.timeouts().connect,
                }
            }
            other => other,
        }
    }

    /// Sends the request and decodes the answer's JSON body.
    pub(crate) async fn json<T: DeserializeOwned>(&self, request: Call) -> Result<T, ClientError> {
        Self::decode(&self.send(request).await?)
    }

    /// The JSON body of `answer`.
    pub(crate) fn decode<T: DeserializeOwned>(answer: &Answer) -> Result<T, ClientError> {
        serde_json::from_slice(&answer.body)
            .map_err(|e| ClientError::UnexpectedResponse(e.to_string()))
    }
}
