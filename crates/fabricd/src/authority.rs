//! Accepting the `:authority` that common gRPC clients send over a Unix socket.
//!
//! The HTTP/2 layer (`h2`) resets every request whose `:authority` is not a valid URI authority
//! (PROTOCOL_ERROR). Over a Unix socket there is no host, and clients disagree on what to send:
//! `localhost` (grpc-go, tonic, grpcio before 1.57), the %-encoded socket path (gRPC C-core ≥
//! 1.57: grpcio, grpc++, Ruby, PHP), the path itself (grpc-java), nothing usable (empty). So
//! on the Unix socket listener, [`UnixAuthority`] sits between the socket and the HTTP/2
//! server: it decodes each HEADERS block the client sends (HPACK, `loona-hpack`), replaces an
//! `:authority` that is not a valid authority by `localhost`, and encodes the block again (its
//! own HPACK encoder, whose dynamic table the server's decoder follows). Every other frame
//! passes unchanged; what the server writes passes unchanged. A client whose header blocks
//! cannot be decoded, or which sends a header block over [`MAX_HEADER_BLOCK`] bytes, is
//! disconnected (the server would have ended it with COMPRESSION_ERROR anyway).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// Client connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Largest header block (HEADERS + CONTINUATION) accepted from a client, bytes.
pub const MAX_HEADER_BLOCK: usize = 256 * 1024;
/// Largest frame buffered whole; a larger one is refused by the server anyway (its
/// SETTINGS_MAX_FRAME_SIZE is 16 KiB).
const MAX_FRAME: usize = 1 << 20;
/// Size of the HEADERS / CONTINUATION frames written to the server (the HTTP/2 minimum of
/// SETTINGS_MAX_FRAME_SIZE, always accepted).
const OUT_FRAME: usize = 16 * 1024;
/// What an invalid `:authority` becomes.
const LOCALHOST: &[u8] = b"localhost";

const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// A header block being received: stream, END_STREAM, priority bytes, fragments.
struct Block {
    stream: [u8; 4],
    end_stream: bool,
    priority: Option<[u8; 5]>,
    fragments: Vec<u8>,
}

/// A Unix socket connection whose invalid `:authority` values become `localhost`.
pub struct UnixAuthority<IO> {
    io: IO,
    /// Bytes read from the client, not yet rewritten.
    input: Vec<u8>,
    /// Rewritten bytes for the server.
    output: Vec<u8>,
    output_at: usize,
    preface_seen: bool,
    block: Option<Block>,
    decoder: loona_hpack::Decoder<'static>,
    encoder: loona_hpack::Encoder<'static>,
    eof: bool,
}

impl<IO> UnixAuthority<IO> {
    pub fn new(io: IO) -> UnixAuthority<IO> {
        UnixAuthority {
            io,
            input: Vec::new(),
            output: Vec::new(),
            output_at: 0,
            preface_seen: false,
            block: None,
            decoder: loona_hpack::Decoder::new(),
            encoder: loona_hpack::Encoder::new(),
            eof: false,
        }
    }

    /// Moves every complete unit of `input` (the preface, then frames) to `output`.
    fn process(&mut self) -> io::Result<()> {
        if !self.preface_seen {
            let n = self.input.len().min(PREFACE.len());
            if self.input[..n] != PREFACE[..n] {
                // Not HTTP/2 with prior knowledge (the server serves nothing else).
                return Err(invalid("not an HTTP/2 connection preface"));
            }
            if n < PREFACE.len() {
                return Ok(());
            }
            self.output.extend_from_slice(PREFACE);
            self.input.drain(..PREFACE.len());
            self.preface_seen = true;
        }
        let mut at = 0;
        while self.input.len() >= at + 9 {
            let h = &self.input[at..at + 9];
            let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
            if len > MAX_FRAME {
                return Err(invalid("frame too large"));
            }
            if self.input.len() < at + 9 + len {
                break;
            }
            let (ty, flags) = (h[3], h[4]);
            let stream = [h[5], h[6], h[7], h[8]];
            let payload = at + 9..at + 9 + len;
            match (ty, self.block.is_some()) {
                (HEADERS, false) => {
                    let p = &self.input[payload];
                    let (mut start, mut end) = (0, p.len());
                    if flags & PADDED != 0 {
                        let pad = *p.first().ok_or_else(|| invalid("empty padded HEADERS"))? as usize;
                        start = 1;
                        end = end
                            .checked_sub(pad)
                            .filter(|&e| e >= start)
                            .ok_or_else(|| invalid("bad padding"))?;
                    }
                    let priority = if flags & PRIORITY != 0 {
                        let b: [u8; 5] = p
                            .get(start..start + 5)
                            .and_then(|s| s.try_into().ok())
                            .ok_or_else(|| invalid("short HEADERS priority"))?;
                        start += 5;
                        Some(b)
                    } else {
                        None
                    };
                    if start > end {
                        return Err(invalid("short HEADERS"));
                    }
                    self.block = Some(Block {
                        stream,
                        end_stream: flags & END_STREAM != 0,
                        priority,
                        fragments: p[start..end].to_vec(),
                    });
                    if flags & END_HEADERS != 0 {
                        self.rewrite_block()?;
                    }
                }
                (CONTINUATION, true) => {
                    let b = self.block.as_mut().expect("checked");
                    if b.stream != stream {
                        return Err(invalid("CONTINUATION of another stream"));
                    }
                    b.fragments.extend_from_slice(&self.input[payload]);
                    if b.fragments.len() > MAX_HEADER_BLOCK {
                        return Err(invalid("header block too large"));
                    }
                    if flags & END_HEADERS != 0 {
                        self.rewrite_block()?;
                    }
                }
                (_, true) => return Err(invalid("a frame inside a header block")),
                _ => self.output.extend_from_slice(&self.input[at..at + 9 + len]),
            }
            at += 9 + len;
        }
        self.input.drain(..at);
        Ok(())
    }

    /// Decodes the finished header block, fixes `:authority`, encodes it into `output`.
    fn rewrite_block(&mut self) -> io::Result<()> {
        let b = self.block.take().expect("a block");
        let mut headers = self
            .decoder
            .decode(&b.fragments)
            .map_err(|e| invalid(&format!("HPACK: {e}")))?;
        for (name, value) in &mut headers {
            if name.as_slice() == b":authority" && http::uri::Authority::try_from(value.as_slice()).is_err() {
                *value = LOCALHOST.to_vec();
            }
        }
        let block = self
            .encoder
            .encode(headers.iter().map(|(n, v)| (n.as_slice(), v.as_slice())));
        let mut first = Vec::with_capacity(5 + block.len().min(OUT_FRAME));
        if let Some(p) = b.priority {
            first.extend_from_slice(&p);
        }
        let room = OUT_FRAME - first.len();
        let (head, mut rest) = block.split_at(block.len().min(room));
        first.extend_from_slice(head);
        let mut flags = if b.end_stream { END_STREAM } else { 0 };
        if b.priority.is_some() {
            flags |= PRIORITY;
        }
        if rest.is_empty() {
            flags |= END_HEADERS;
        }
        self.frame(HEADERS, flags, b.stream, &first);
        while !rest.is_empty() {
            let (chunk, r) = rest.split_at(rest.len().min(OUT_FRAME));
            rest = r;
            let flags = if rest.is_empty() { END_HEADERS } else { 0 };
            self.frame(CONTINUATION, flags, b.stream, chunk);
        }
        Ok(())
    }

    fn frame(&mut self, ty: u8, flags: u8, stream: [u8; 4], payload: &[u8]) {
        self.output
            .extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
        self.output.push(ty);
        self.output.push(flags);
        self.output.extend_from_slice(&stream);
        self.output.extend_from_slice(payload);
    }
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("HTTP/2 from a Unix socket client: {what}"),
    )
}

impl<IO: AsyncRead + Unpin> AsyncRead for UnixAuthority<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.output_at < this.output.len() {
                let n = buf.remaining().min(this.output.len() - this.output_at);
                buf.put_slice(&this.output[this.output_at..this.output_at + n]);
                this.output_at += n;
                if this.output_at == this.output.len() {
                    this.output.clear();
                    this.output_at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; 16 * 1024];
            let mut rb = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.io).poll_read(cx, &mut rb) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) if rb.filled().is_empty() => {
                    // The client closed: what is left (a partial frame) goes as is.
                    this.eof = true;
                    let rest = std::mem::take(&mut this.input);
                    this.output.extend_from_slice(&rest);
                }
                Poll::Ready(Ok(())) => {
                    this.input.extend_from_slice(rb.filled());
                    this.process()?;
                }
            }
        }
    }
}

crate::connlimit::forward_write_half!(UnixAuthority);

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn frame(ty: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        f.push(ty);
        f.push(flags);
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// Reads everything the shim passes on, decoded: (type, flags, stream, payload or headers).
    fn frames(mut bytes: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
        assert!(bytes.starts_with(PREFACE));
        bytes = &bytes[PREFACE.len()..];
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
            let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
            out.push((bytes[3], bytes[4], stream, bytes[9..9 + len].to_vec()));
            bytes = &bytes[9 + len..];
        }
        out
    }

    #[tokio::test]
    async fn invalid_authorities_become_localhost_and_other_frames_pass() {
        let mut client_enc = loona_hpack::Encoder::new();
        let req = |authority: &'static [u8]| {
            vec![
                (&b":method"[..], &b"POST"[..]),
                (&b":scheme"[..], &b"http"[..]),
                (&b":path"[..], &b"/grpc.health.v1.Health/Check"[..]),
                (&b":authority"[..], authority),
            ]
        };
        let mut input = PREFACE.to_vec();
        input.extend(frame(0x4, 0, 0, &[]));
        // Padded, with priority, split into a CONTINUATION.
        let block = client_enc.encode(req(b"%2Frun%2Ffabricd%2Ffabricd.sock"));
        let mut payload = vec![2u8];
        payload.extend_from_slice(&[0, 0, 0, 0, 15]);
        payload.extend_from_slice(&block[..3]);
        payload.extend_from_slice(&[0, 0]);
        input.extend(frame(HEADERS, PADDED | PRIORITY, 1, &payload));
        input.extend(frame(CONTINUATION, END_HEADERS, 1, &block[3..]));
        input.extend(frame(0x0, END_STREAM, 1, &[0, 0, 0, 0, 0]));
        // Indexed from the client's dynamic table on the second request; a valid one is kept.
        input.extend(frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            3,
            &client_enc.encode(req(b"%2Frun%2Ffabricd%2Ffabricd.sock")),
        ));
        input.extend(frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            5,
            &client_enc.encode(req(b"localhost:50051")),
        ));
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let mut shim = UnixAuthority::new(server);
        client.write_all(&input).await.unwrap();
        drop(client);
        let mut seen = Vec::new();
        shim.read_to_end(&mut seen).await.unwrap();
        let got = frames(&seen);
        let mut dec = loona_hpack::Decoder::new();
        let mut authorities = Vec::new();
        for (ty, flags, stream, p) in &got {
            if *ty == HEADERS {
                let p = if flags & PRIORITY != 0 { &p[5..] } else { &p[..] };
                assert_ne!(flags & END_HEADERS, 0);
                let h = dec.decode(p).unwrap();
                let a = h.iter().find(|(n, _)| n == b":authority").unwrap();
                authorities.push((*stream, String::from_utf8(a.1.clone()).unwrap()));
            }
        }
        assert_eq!(
            authorities,
            vec![
                (1, "localhost".into()),
                (3, "localhost".into()),
                (5, "localhost:50051".into())
            ]
        );
        assert!(got
            .iter()
            .any(|(ty, f, s, p)| (*ty, *f, *s) == (0, END_STREAM, 1) && p == &[0, 0, 0, 0, 0]));
        assert_eq!(got[0].0, 0x4, "SETTINGS first");
        assert_eq!(got[1].3[..5], [0, 0, 0, 0, 15], "priority kept");
    }
}
