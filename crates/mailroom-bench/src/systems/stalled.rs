//! Counting what a stalled raw-socket subscriber still holds once it starts reading.

use std::time::Duration;

use anyhow::Result;
use tokio::io::AsyncReadExt as _;
use tokio::net::TcpStream;

/// Reads `stream` until `idle` passes without data or the peer closes it, counting each
/// occurrence of `marker` (one per message in the protocol). Returns the count and whether
/// the connection was closed (or reset) by the broker.
///
/// # Errors
/// Never for transport failures (a reset means "disconnected"); kept fallible for callers.
pub async fn count_marker(
    mut stream: TcpStream,
    marker: &[u8],
    idle: Duration,
) -> Result<(u64, bool)> {
    let mut count = 0u64;
    let mut carry: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let read = match tokio::time::timeout(idle, stream.read(&mut chunk)).await {
            Err(_elapsed) => return Ok((count, false)),
            Ok(Err(_reset)) => return Ok((count, true)),
            Ok(Ok(0)) => return Ok((count, true)),
            Ok(Ok(read)) => read,
        };
        carry.extend_from_slice(&chunk[..read]);
        let mut start = 0;
        while let Some(found) = find(&carry[start..], marker) {
            count += 1;
            start += found + marker.len();
        }
        // Keep a tail that might hold the start of a marker split across reads.
        let keep_from = carry.len().saturating_sub(marker.len() - 1).max(start);
        carry.drain(..keep_from);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt as _;

    // Proves markers split across reads are counted once each, and a closed peer is
    // reported as disconnected.
    #[tokio::test]
    async fn counts_markers_across_reads() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let writer = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            for piece in [&b"xxMS"[..], b"G a\r\nMSG", b" b\r\nM", b"SG c"] {
                socket.write_all(piece).await.unwrap();
                socket.flush().await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        let stream = TcpStream::connect(address).await.unwrap();
        let (count, closed) = count_marker(stream, b"MSG ", Duration::from_secs(5))
            .await
            .unwrap();
        writer.await.unwrap();
        assert_eq!((count, closed), (3, true));
    }
}
