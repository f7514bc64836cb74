//! The `sync:` service, v1: STAT, LIST, SEND, RECV and QUIT, which carry
//! `adb push`, `adb pull` and `adb ls`.
//!
//! Requests are `id[4] + u32 LE + bytes` and form a byte stream that ignores
//! WRTE boundaries (adb 29 packs `SEND…DATA…DONE` into one WRTE; adb_client
//! splits a STAT header from its path), so [`RequestParser`] buffers bytes
//! and yields whole requests, mini-redis style.
//!
//! Replies go the other way in *whole* packets per WRTE: adb_client reads a
//! RECV reply assuming no DATA header straddles two WRTEs and that `DONE` is
//! the last 8 bytes of a WRTE. Only the v1 forms exist here because the
//! device does not advertise `stat_v2`/`ls_v2`/`sendrecv_v2`.

use super::service::blocking;
use super::stream::Stream;
use crate::sim::backend::{AdbBackend, DirEntry, FileStat};
use std::sync::Arc;
use thiserror::Error;

/// Largest DATA chunk in either direction: adb's `SYNC_DATA_MAX`.
const SYNC_DATA_MAX: usize = 64 * 1024;

/// Longest path a request may carry: adb's own limit (`1024`).
const MAX_PATH_LEN: u32 = 1024;

/// Largest file a SEND may upload. The phone keeps files in memory, so a
/// bigger upload is a runaway host, not a use case.
const MAX_UPLOAD_BYTES: usize = 256 * 1024 * 1024;

/// One sync request from the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Stat(String),
    List(String),
    /// `"path,mode"`.
    Send(String),
    Recv(String),
    Data(Vec<u8>),
    /// The upload is complete; the argument is the file's mtime.
    Done(u32),
    Quit,
}

/// A request the device cannot make sense of; the sync session ends.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SyncError {
    #[error("unknown sync request {0:?}")]
    Unknown(String),
    #[error("sync path of {0} bytes is longer than {MAX_PATH_LEN}")]
    PathTooLong(u32),
    #[error("sync DATA of {0} bytes is larger than {SYNC_DATA_MAX}")]
    DataTooLong(u32),
}

/// Reassembles requests from WRTE payloads split at arbitrary points.
#[derive(Debug, Default)]
pub struct RequestParser {
    buf: Vec<u8>,
    /// Bytes of `buf` already parsed; compacted on the next push so a WRTE
    /// full of small DATA requests costs one copy, not one per request.
    start: usize,
}

impl RequestParser {
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.drain(..self.start);
        self.start = 0;
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole request, `Ok(None)` if more bytes are needed.
    pub fn next_request(&mut self) -> Result<Option<Request>, SyncError> {
        let pending = &self.buf[self.start..];
        let Some((&[i0, i1, i2, i3, l0, l1, l2, l3], rest)) = pending.split_first_chunk::<8>()
        else {
            return Ok(None);
        };
        let id = [i0, i1, i2, i3];
        let arg = u32::from_le_bytes([l0, l1, l2, l3]);
        let limit = match &id {
            b"STAT" | b"LIST" | b"SEND" | b"RECV" if arg > MAX_PATH_LEN => {
                return Err(SyncError::PathTooLong(arg));
            }
            b"DATA" if arg as usize > SYNC_DATA_MAX => return Err(SyncError::DataTooLong(arg)),
            b"STAT" | b"LIST" | b"SEND" | b"RECV" | b"DATA" => arg as usize,
            b"DONE" | b"QUIT" => 0,
            _ => {
                return Err(SyncError::Unknown(
                    String::from_utf8_lossy(&id).into_owned(),
                ));
            }
        };
        let Some(body) = rest.get(..limit) else {
            return Ok(None);
        };
        let text = || String::from_utf8_lossy(body).into_owned();
        let request = match &id {
            b"STAT" => Request::Stat(text()),
            b"LIST" => Request::List(text()),
            b"SEND" => Request::Send(text()),
            b"RECV" => Request::Recv(text()),
            b"DATA" => Request::Data(body.to_vec()),
            b"DONE" => Request::Done(arg),
            _ => Request::Quit,
        };
        self.start += 8 + limit;
        Ok(Some(request))
    }
}

fn packet(id: &[u8; 4], fields: &[u32], tail: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + 4 * fields.len() + tail.len());
    out.extend_from_slice(id);
    for field in fields {
        out.extend_from_slice(&field.to_le_bytes());
    }
    out.extend_from_slice(tail);
    out
}

/// `STAT mode size mtime`; all zeros means "does not exist".
pub(super) fn stat_reply(stat: Option<FileStat>) -> Vec<u8> {
    let stat = stat.unwrap_or(FileStat {
        mode: 0,
        size: 0,
        mtime: 0,
    });
    packet(b"STAT", &[stat.mode, stat.size, stat.mtime], &[])
}

pub(super) fn dent(entry: &DirEntry) -> Vec<u8> {
    let s = entry.stat;
    let name = entry.name.as_bytes();
    packet(b"DENT", &[s.mode, s.size, s.mtime, name.len() as u32], name)
}

/// The end of a listing: a DENT-sized `DONE` with all fields zero.
pub(super) fn list_done() -> Vec<u8> {
    packet(b"DONE", &[0, 0, 0, 0], &[])
}

pub(super) fn data(chunk: &[u8]) -> Vec<u8> {
    packet(b"DATA", &[chunk.len() as u32], chunk)
}

pub(super) fn recv_done() -> Vec<u8> {
    packet(b"DONE", &[0], &[])
}

pub(super) fn okay() -> Vec<u8> {
    packet(b"OKAY", &[0], &[])
}

pub(super) fn fail(message: &str) -> Vec<u8> {
    packet(b"FAIL", &[message.len() as u32], message.as_bytes())
}

/// `strtoul(s, NULL, 0)` as adbd parses SEND modes: `0x` hex, leading `0`
/// octal, else decimal; parsing stops at the first invalid digit. adb sends
/// `33188`, adb_client sends `0777`.
pub(super) fn parse_mode(s: &str) -> u32 {
    let s = s.trim_start();
    let (digits, radix) = if let Some(hex) = s.strip_prefix("0x").or(s.strip_prefix("0X")) {
        (hex, 16)
    } else if s.starts_with('0') {
        (s, 8)
    } else {
        (s, 10)
    };
    digits
        .chars()
        .map_while(|c| c.to_digit(radix))
        .fold(0u32, |acc, d| acc.saturating_mul(radix).saturating_add(d))
}

/// Strips trailing slashes (`adb pull /sdcard/` stats `"/sdcard/"`), keeping
/// the root itself.
pub(super) fn normalize(path: &str) -> String {
    match path.trim_end_matches('/') {
        "" if path.starts_with('/') => "/".to_string(),
        trimmed => trimmed.to_string(),
    }
}

/// A SEND between its request and its DONE.
struct Upload {
    path: String,
    mode: u32,
    data: Vec<u8>,
    /// Set once the upload cannot succeed; reported after DONE, as adbd does.
    failure: Option<String>,
}

/// Sends whole reply packets, as many per WRTE as fit.
async fn send_packets(
    stream: &mut Stream,
    packets: impl IntoIterator<Item = Vec<u8>>,
) -> Result<(), ()> {
    let max = stream.max_payload();
    let mut wrte = Vec::new();
    for packet in packets {
        if !wrte.is_empty() && wrte.len() + packet.len() > max {
            stream.write(&wrte).await.map_err(drop)?;
            wrte.clear();
        }
        wrte.extend_from_slice(&packet);
    }
    if wrte.is_empty() {
        return Ok(());
    }
    stream.write(&wrte).await.map_err(drop)
}

/// What to do after a request.
enum Next {
    Continue,
    /// QUIT or a protocol error: close the stream.
    Close,
    /// The host went away: nothing more to send.
    Gone,
}

pub(super) async fn serve(mut stream: Stream, backend: Arc<dyn AdbBackend>) {
    let mut parser = RequestParser::default();
    let mut upload = None;
    loop {
        let next = match parser.next_request() {
            Ok(Some(request)) => handle(request, &mut upload, &mut stream, &backend).await,
            Ok(None) => match stream.read().await {
                Some(bytes) => {
                    parser.push(&bytes);
                    Next::Continue
                }
                None => Next::Gone,
            },
            Err(error) => match send_packets(&mut stream, [fail(&error.to_string())]).await {
                Ok(()) => Next::Close,
                Err(()) => Next::Gone,
            },
        };
        match next {
            Next::Continue => {}
            Next::Close => return stream.close().await,
            Next::Gone => return,
        }
    }
}

async fn handle(
    request: Request,
    upload: &mut Option<Upload>,
    stream: &mut Stream,
    backend: &Arc<dyn AdbBackend>,
) -> Next {
    let backend = Arc::clone(backend);
    let (packets, next) = match (request, upload.take()) {
        (Request::Data(bytes), Some(mut up)) => {
            if up.failure.is_none() {
                if up.data.len() + bytes.len() > MAX_UPLOAD_BYTES {
                    up.failure = Some(format!("file larger than {MAX_UPLOAD_BYTES} bytes"));
                    up.data = Vec::new();
                } else {
                    up.data.extend_from_slice(&bytes);
                }
            }
            *upload = Some(up);
            return Next::Continue;
        }
        (Request::Done(mtime), Some(up)) => {
            let result = match up.failure {
                Some(failure) => Err(failure),
                None => blocking(move || backend.write_file(&up.path, up.mode, mtime, up.data))
                    .await
                    .unwrap_or_else(|| Err("device error".to_string())),
            };
            let reply = match result {
                Ok(()) => okay(),
                Err(message) => fail(&message),
            };
            (vec![reply], Next::Continue)
        }
        (_, Some(_)) => (vec![fail("expected DATA or DONE")], Next::Close),
        (Request::Stat(path), None) => {
            let path = normalize(&path);
            let stat = blocking(move || backend.stat(&path)).await.flatten();
            (vec![stat_reply(stat)], Next::Continue)
        }
        (Request::List(path), None) => {
            let path = normalize(&path);
            let entries = blocking(move || backend.list(&path)).await.flatten();
            let mut packets: Vec<_> = entries.unwrap_or_default().iter().map(dent).collect();
            packets.push(list_done());
            (packets, Next::Continue)
        }
        (Request::Recv(path), None) => {
            let path = normalize(&path);
            match blocking(move || backend.read_file(&path)).await {
                Some(Ok(bytes)) => {
                    // A DATA packet must fit one WRTE (see the module doc).
                    let chunk = SYNC_DATA_MAX.min(stream.max_payload() - 8);
                    let packets = bytes.chunks(chunk).map(data).chain([recv_done()]);
                    return match send_packets(stream, packets).await {
                        Ok(()) => Next::Continue,
                        Err(()) => Next::Gone,
                    };
                }
                Some(Err(message)) => (vec![fail(&message)], Next::Continue),
                None => (vec![fail("device error")], Next::Continue),
            }
        }
        (Request::Send(spec), None) => match spec.rsplit_once(',') {
            Some((path, mode)) => {
                *upload = Some(Upload {
                    path: normalize(path),
                    mode: parse_mode(mode),
                    data: Vec::new(),
                    failure: None,
                });
                return Next::Continue;
            }
            None => (vec![fail("missing comma in SEND")], Next::Close),
        },
        (Request::Data(_) | Request::Done(_), None) => {
            (vec![fail("DATA or DONE without SEND")], Next::Close)
        }
        (Request::Quit, None) => return Next::Close,
    };
    match send_packets(stream, packets).await {
        Ok(()) => next,
        Err(()) => Next::Gone,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A push as adb 29 sends it: SEND, DATA and DONE packed into one WRTE,
    /// then QUIT.
    fn push_bytes() -> Vec<u8> {
        #[rustfmt::skip]
        let mut bytes = vec![
            b'S', b'E', b'N', b'D',  // id
            0x10, 0x00, 0x00, 0x00,  // length: 16
        ];
        bytes.extend_from_slice(b"/sdcard/up,33188");
        #[rustfmt::skip]
        bytes.extend_from_slice(&[
            b'D', b'A', b'T', b'A',  // id
            0x03, 0x00, 0x00, 0x00,  // length: 3
            b'a', b'b', b'c',
            b'D', b'O', b'N', b'E',  // id
            0x2A, 0x00, 0x00, 0x00,  // mtime: 42
            b'Q', b'U', b'I', b'T',  // id
            0x00, 0x00, 0x00, 0x00,  // unused
        ]);
        bytes
    }

    fn parse_all(chunks: &[&[u8]]) -> Vec<Request> {
        let mut parser = RequestParser::default();
        let mut out = Vec::new();
        for chunk in chunks {
            parser.push(chunk);
            while let Some(request) = parser.next_request().unwrap() {
                out.push(request);
            }
        }
        out
    }

    #[test]
    fn parse_push_packed_in_one_wrte() {
        assert_eq!(
            parse_all(&[&push_bytes()]),
            [
                Request::Send("/sdcard/up,33188".into()),
                Request::Data(b"abc".to_vec()),
                Request::Done(42),
                Request::Quit,
            ]
        );
    }

    #[test]
    fn parse_stat_split_like_adb_client() {
        #[rustfmt::skip]
        let header = [
            b'S', b'T', b'A', b'T',  // id
            0x07, 0x00, 0x00, 0x00,  // length: 7
        ];
        let mut parser = RequestParser::default();
        parser.push(&header);
        assert_eq!(parser.next_request(), Ok(None));
        parser.push(b"/sdcard");
        assert_eq!(
            parser.next_request(),
            Ok(Some(Request::Stat("/sdcard".into())))
        );
        assert_eq!(parser.next_request(), Ok(None));
    }

    #[test]
    fn parse_list_and_recv() {
        #[rustfmt::skip]
        let wire = [
            b'L', b'I', b'S', b'T',  // id
            0x01, 0x00, 0x00, 0x00,  // length: 1
            b'/',
            b'R', b'E', b'C', b'V',  // id
            0x02, 0x00, 0x00, 0x00,  // length: 2
            b'/', b'a',
        ];
        assert_eq!(
            parse_all(&[&wire]),
            [Request::List("/".into()), Request::Recv("/a".into())]
        );
    }

    #[test]
    fn hostile_requests_are_rejected_from_the_header() {
        let mut parser = RequestParser::default();
        parser.push(&[b'S', b'T', b'A', b'T', 0x01, 0x04, 0x00, 0x00]);
        assert_eq!(parser.next_request(), Err(SyncError::PathTooLong(1025)));
        let mut parser = RequestParser::default();
        parser.push(&[b'D', b'A', b'T', b'A', 0x01, 0x00, 0x01, 0x00]);
        assert_eq!(parser.next_request(), Err(SyncError::DataTooLong(65537)));
        let mut parser = RequestParser::default();
        parser.push(b"STA2\0\0\0\0");
        assert_eq!(
            parser.next_request(),
            Err(SyncError::Unknown("STA2".into()))
        );
    }

    #[test]
    fn encode_replies() {
        let stat = FileStat {
            mode: 0o100644,
            size: 11,
            mtime: 0x0102_0304,
        };
        #[rustfmt::skip]
        assert_eq!(stat_reply(Some(stat)), [
            b'S', b'T', b'A', b'T',  // id
            0xA4, 0x81, 0x00, 0x00,  // mode: 0o100644
            0x0B, 0x00, 0x00, 0x00,  // size: 11
            0x04, 0x03, 0x02, 0x01,  // mtime
        ]);
        #[rustfmt::skip]
        assert_eq!(stat_reply(None), [
            b'S', b'T', b'A', b'T',  // id
            0, 0, 0, 0,  0, 0, 0, 0,  0, 0, 0, 0,  // missing: all zero
        ]);
        let entry = DirEntry {
            name: "up".into(),
            stat,
        };
        #[rustfmt::skip]
        assert_eq!(dent(&entry), [
            b'D', b'E', b'N', b'T',  // id
            0xA4, 0x81, 0x00, 0x00,  // mode
            0x0B, 0x00, 0x00, 0x00,  // size
            0x04, 0x03, 0x02, 0x01,  // mtime
            0x02, 0x00, 0x00, 0x00,  // name length
            b'u', b'p',
        ]);
        #[rustfmt::skip]
        assert_eq!(list_done(), [
            b'D', b'O', b'N', b'E',  // id
            0, 0, 0, 0,  0, 0, 0, 0,  0, 0, 0, 0,  0, 0, 0, 0,  // a zero dent
        ]);
        #[rustfmt::skip]
        assert_eq!(data(b"hi"), [
            b'D', b'A', b'T', b'A',  // id
            0x02, 0x00, 0x00, 0x00,  // length
            b'h', b'i',
        ]);
        assert_eq!(recv_done(), *b"DONE\0\0\0\0");
        assert_eq!(okay(), *b"OKAY\0\0\0\0");
        #[rustfmt::skip]
        assert_eq!(fail("no"), [
            b'F', b'A', b'I', b'L',  // id
            0x02, 0x00, 0x00, 0x00,  // message length
            b'n', b'o',
        ]);
    }

    #[test]
    fn modes_parse_like_strtoul_base_0() {
        assert_eq!(parse_mode("33188"), 0o100644);
        assert_eq!(parse_mode("0777"), 0o777);
        assert_eq!(parse_mode("0x1ff"), 0o777);
        assert_eq!(parse_mode("0"), 0);
        assert_eq!(parse_mode("644junk"), 644);
        assert_eq!(parse_mode("junk"), 0);
        assert_eq!(parse_mode("99999999999"), u32::MAX);
    }

    #[test]
    fn trailing_slashes_are_normalized() {
        assert_eq!(normalize("/sdcard/"), "/sdcard");
        assert_eq!(normalize("/sdcard//"), "/sdcard");
        assert_eq!(normalize("/"), "/");
        assert_eq!(normalize("/sdcard/a.txt"), "/sdcard/a.txt");
    }

    proptest! {
        #[test]
        fn any_split_of_the_stream_gives_the_same_requests(
            cuts in proptest::collection::vec(0usize..200, 0..12)
        ) {
            let mut stream = push_bytes();
            stream.splice(0..0, [&b"STAT\x07\0\0\0/sdcard"[..], b"LIST\x01\0\0\0/"].concat());
            let whole = parse_all(&[&stream]);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (stream.len() + 1)).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut at = 0;
            for cut in cuts {
                chunks.push(&stream[at..cut]);
                at = cut;
            }
            chunks.push(&stream[at..]);
            prop_assert_eq!(parse_all(&chunks), whole);
        }
    }
}
