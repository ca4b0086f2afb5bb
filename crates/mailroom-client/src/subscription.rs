//! Live-channel subscriptions over WebSocket.

use bytes::Bytes;
use futures_util::StreamExt as _;
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use crate::timeouts::within;
use crate::{Client, ClientError, TimeoutLimit};

/// The most bytes one read from the socket takes.
///
/// The WebSocket layer zeroes this much of its read buffer on every read attempt, and a
/// subscriber makes about two attempts per message it receives, so the library default
/// of 128 KiB made zeroing memory most of a live subscriber's CPU time. 16 KiB still
/// takes a dozen 1 KiB messages per read; larger messages arrive over several reads.
const READ_BUFFER_BYTES: usize = 16 << 10;

/// Socket settings for a subscription.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SubscribeOptions {
    /// The socket's receive buffer (`SO_RCVBUF`) in bytes; `None` keeps the OS default.
    ///
    /// A small buffer makes a slow reader push back on the server sooner, which is how
    /// the demo and the tests provoke drops without sending megabytes.
    pub recv_buffer_bytes: Option<u32>,
}

/// A live-channel subscription: the messages the server's mailbox for this subscriber
/// received, in publish order. Dropping it disconnects and frees the slot.
#[derive(Debug)]
pub struct Subscription {
    stream: WebSocketStream<TcpStream>,
}

impl Subscription {
    /// The next message, or `None` once the channel was closed and everything queued for
    /// this subscriber has arrived.
    ///
    /// # Errors
    /// A WebSocket protocol or transport failure.
    pub async fn next(&mut self) -> Option<Result<Bytes, ClientError>> {
        loop {
            let frame = match self.stream.next().await? {
                Ok(frame) => frame,
                Err(error) => return Some(Err(error.into())),
            };
            match frame {
                Message::Text(text) => return Some(Ok(Bytes::from(text))),
                Message::Binary(bytes) => return Some(Ok(bytes)),
                Message::Close(_) => return None,
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
            }
        }
    }

    /// Closes the connection politely, freeing the slot on the server.
    ///
    /// # Errors
    /// A transport failure while sending the close frame.
    pub async fn close(mut self) -> Result<(), ClientError> {
        self.stream.close(None).await?;
        Ok(())
    }
}

pub(crate) async fn connect(
    client: &Client,
    channel: &str,
    options: SubscribeOptions,
) -> Result<Subscription, ClientError> {
    let config = WebSocketConfig::default().read_buffer_size(READ_BUFFER_BYTES);
    let path = Client::channel_path(channel, &["ws"])?;
    let stream = open_websocket(client, &path, None, options, config).await?;
    Ok(Subscription { stream })
}

/// The WebSocket handshake with the server's `path`, with the client's token, on a socket
/// with `options` and `TCP_NODELAY` (small frames go out at once); an HTTP answer instead
/// of the upgrade becomes the API error it carries. Connecting gets the client's connect
/// limit and the handshake its request limit; the open stream is not timed.
pub(crate) async fn open_websocket(
    client: &Client,
    path: &[&str],
    query: Option<&str>,
    options: SubscribeOptions,
    config: WebSocketConfig,
) -> Result<WebSocketStream<TcpStream>, ClientError> {
    let mut url = client.url(path)?;
    url.set_query(query);
    let host = url
        .host_str()
        .ok_or_else(|| ClientError::InvalidUrl(url.to_string()))?
        .to_owned();
    let port = url.port_or_known_default().unwrap_or(80);
    url.set_scheme("ws")
        .map_err(|()| ClientError::InvalidUrl(url.to_string()))?;

    let mut request = url.as_str().into_client_request()?;
    if let Some(token) = client.token() {
        let value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|e| ClientError::InvalidUrl(format!("token is not a header value: {e}")))?;
        request.headers_mut().insert("authorization", value);
    }

    let timeouts = client.timeouts();
    let connecting = open_socket(&host, port, options);
    let socket = within(TimeoutLimit::Connect, timeouts.connect, connecting).await?;
    socket
        .set_nodelay(true)
        .map_err(tokio_tungstenite::tungstenite::Error::Io)?;
    // The handshake's own error is judged below, so only the time limit fails here.
    let handshake = async {
        let upgrade = tokio_tungstenite::client_async_with_config(request, socket, Some(config));
        Ok::<_, ClientError>(upgrade.await)
    };
    match within(TimeoutLimit::Request, timeouts.request, handshake).await? {
        Ok((stream, _response)) => Ok(stream),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            Err(api_error_from_handshake(&response))
        }
        Err(error) => Err(error.into()),
    }
}

async fn open_socket(
    host: &str,
    port: u16,
    options: SubscribeOptions,
) -> Result<TcpStream, ClientError> {
    let mut last_error = None;
    let addresses = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| ClientError::InvalidUrl(format!("{host}: {e}")))?;
    for address in addresses {
        let socket = if address.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        };
        let attempt = async {
            let socket = socket?;
            if let Some(bytes) = options.recv_buffer_bytes {
                socket.set_recv_buffer_size(bytes)?;
            }
            socket.connect(address).await
        };
        match attempt.await {
            Ok(stream) => return Ok(stream),
            Err(error) => last_error = Some(error),
        }
    }
    let error = last_error.unwrap_or_else(|| std::io::Error::other("no address"));
    Err(tokio_tungstenite::tungstenite::Error::Io(error).into())
}

/// A refused handshake carries the server's JSON error body, like any other call.
fn api_error_from_handshake(
    response: &tokio_tungstenite::tungstenite::http::Response<Option<Vec<u8>>>,
) -> ClientError {
    let body = response.body().as_deref().unwrap_or_default();
    ClientError::from_answer(response.status().as_u16(), body)
}
