//! One host connection: framing, the handshake, and routing messages to
//! streams.
//!
//! A connection is three concurrent parts, raced in one `select!` so that
//! whichever ends first (EOF, a protocol error, a write error, an abort
//! queued by a stream, or server shutdown) drops the other two and with them
//! the socket and every stream task of the connection:
//! - the reader ([`FrameReader`] + `Session`): decodes messages, answers
//!   CNXN and OPEN itself, and hands OKAY/WRTE/CLSE to the right stream;
//! - the writer: the only code that writes the socket, fed in order by the
//!   session and the streams;
//! - the shutdown signal.
//!
//! The reader never waits on a stream: it delivers with `try_send` into a
//! small per-stream channel. A host obeying flow control can have at most
//! one unconsumed WRTE and one OKAY in flight per stream, so a full channel
//! means a host that ignores the protocol, and the connection is dropped.

use super::message::{A_VERSION, Command, FrameError, MAX_HANDSHAKE_PAYLOAD, MAX_PAYLOAD, Message};
use super::service::{Context, Service, blocking};
use super::stream::{Abort, Event, Outgoing, Stream};
use std::collections::HashMap;
use std::io;
use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

/// Most streams one connection may have open. The adb server multiplexes
/// every client's commands for a device over one connection, and a GUI agent
/// runs a handful at a time; each stream can hold a WRTE (≤ 1 MiB) and a
/// blocking-pool thread, so the cap bounds what one host can pin. Further
/// OPENs are refused with `CLSE(0, id)`, as a busy adbd would.
pub const MAX_STREAMS_PER_CONNECTION: usize = 32;

/// Smallest maxdata a host may announce: adb's `MAX_PAYLOAD_V1`, which every
/// adb since the first supports. Smaller values only multiply the WRTEs (and
/// zero would never make progress); this floor also keeps the framebuffer
/// header in the first WRTE.
pub(super) const MIN_HOST_MAXDATA: u32 = MAX_HANDSHAKE_PAYLOAD;

/// Events a stream's channel holds: one WRTE and one OKAY in flight, plus
/// slack for a host that sends a stray OKAY.
const INBOX_CAPACITY: usize = 4;

/// Messages queued for the writer before streams wait.
const OUTBOX_CAPACITY: usize = 64;

/// The writer batches queued messages into one `write` up to this size.
const WRITE_BATCH: usize = 256 * 1024;

/// Bytes requested from the socket per read.
const READ_CHUNK: usize = 64 * 1024;

/// Why a connection ended other than by a clean EOF or shutdown.
#[derive(Debug, Error)]
pub(super) enum ConnectionError {
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    #[error("malformed message: {0}")]
    Frame(#[from] FrameError),
    #[error("connection closed in the middle of a message ({0} bytes buffered)")]
    Truncated(usize),
    #[error("host maxdata {0} is below the {MIN_HOST_MAXDATA}-byte minimum")]
    MaxdataTooSmall(u32),
    #[error("the backend panicked while answering the handshake")]
    BackendPanicked,
    #[error("host flooded stream {0} past flow control")]
    Flooded(u32),
    #[error("{0}")]
    Aborted(Abort),
}

/// Reads whole messages from the socket, buffering partial ones.
pub(super) struct FrameReader {
    io: OwnedReadHalf,
    buf: Vec<u8>,
    /// Where the undecoded bytes of `buf` start. Decoded messages are let
    /// go of by moving it, and the rest moved to the front only before the
    /// next read: dropping each message from the front on its own moved a
    /// large buffer's bytes once per message (24-byte OKAYs after a 1 MB
    /// write cost seconds per read).
    start: usize,
}

impl FrameReader {
    pub(super) fn new(io: OwnedReadHalf) -> Self {
        Self {
            io,
            buf: Vec::new(),
            start: 0,
        }
    }

    /// The next message; `Ok(None)` on a clean EOF between messages.
    ///
    /// Cancel-safe: bytes are only appended after a read completes, and
    /// only consumed once a whole message is decoded.
    pub(super) async fn read_message(&mut self) -> Result<Option<Message>, ConnectionError> {
        loop {
            match Message::decode(&self.buf[self.start..]) {
                Ok((message, used)) => {
                    self.start += used;
                    return Ok(Some(message));
                }
                // Not an error: the rest of the message is still in flight.
                Err(FrameError::Incomplete) => {}
                Err(error) => return Err(error.into()),
            }
            self.buf.drain(..self.start);
            self.start = 0;
            self.buf.reserve(READ_CHUNK);
            if self.io.read_buf(&mut self.buf).await? == 0 {
                return match self.buf.len() {
                    0 => Ok(None),
                    buffered => Err(ConnectionError::Truncated(buffered)),
                };
            }
            rearm_quickack(&self.io);
        }
    }
}

/// Linux leaves quick-ack mode on its own; re-arming it after every read
/// stops delayed ACKs from adding ~40 ms to each request of a client that
/// writes header and payload separately with Nagle on (adb_client does).
#[cfg(target_os = "linux")]
fn rearm_quickack(io: &OwnedReadHalf) {
    // Only a latency hint: failing to set it changes no behaviour.
    let _ = socket2::SockRef::from(io.as_ref()).set_tcp_quickack(true);
}

#[cfg(not(target_os = "linux"))]
fn rearm_quickack(_io: &OwnedReadHalf) {}

/// Serves one host connection until it ends; see the module doc.
pub(super) async fn serve(
    socket: TcpStream,
    context: Context,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), ConnectionError> {
    socket.set_nodelay(true)?;
    let (read_half, write_half) = socket.into_split();
    let (outbox, outbox_rx) = mpsc::channel(OUTBOX_CAPACITY);
    let mut session = Session::new(context, outbox);
    let mut reader = FrameReader::new(read_half);
    tokio::select! {
        result = session.read_loop(&mut reader) => result,
        result = write_loop(write_half, outbox_rx) => result,
        _ = shutdown.wait_for(|stop| *stop) => Ok(()),
    }
}

async fn write_loop(
    mut io: OwnedWriteHalf,
    mut outbox: mpsc::Receiver<Outgoing>,
) -> Result<(), ConnectionError> {
    let mut batch = Vec::new();
    while let Some(first) = outbox.recv().await {
        let mut next = Some(first);
        let mut abort = None;
        while let Some(item) = next.take() {
            match item {
                Outgoing::Message(message) => message.encode_into(&mut batch),
                Outgoing::Abort(reason) => {
                    abort = Some(reason);
                    break;
                }
            }
            if batch.len() < WRITE_BATCH {
                next = outbox.try_recv().ok();
            }
        }
        io.write_all(&batch).await?;
        batch.clear();
        if let Some(reason) = abort {
            return Err(ConnectionError::Aborted(reason));
        }
    }
    Ok(())
}

struct StreamEntry {
    remote: u32,
    inbox: mpsc::Sender<Event>,
}

/// The reader's state: handshake result and the open streams.
struct Session {
    context: Context,
    outbox: mpsc::Sender<Outgoing>,
    /// WRTE payload limit, known once the host's CNXN arrived.
    max_payload: Option<usize>,
    streams: HashMap<u32, StreamEntry>,
    /// Every stream task; dropping the session aborts them.
    tasks: JoinSet<()>,
    next_id: u32,
}

impl Session {
    fn new(context: Context, outbox: mpsc::Sender<Outgoing>) -> Self {
        Self {
            context,
            outbox,
            max_payload: None,
            streams: HashMap::new(),
            tasks: JoinSet::new(),
            next_id: 1,
        }
    }

    async fn read_loop(&mut self, reader: &mut FrameReader) -> Result<(), ConnectionError> {
        while let Some(message) = reader.read_message().await? {
            self.handle(message).await?;
            while self.tasks.try_join_next().is_some() {}
        }
        Ok(())
    }

    async fn send(&self, message: Message) -> Result<(), ConnectionError> {
        self.outbox
            .send(Outgoing::Message(message))
            .await
            .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe).into())
    }

    async fn handle(&mut self, message: Message) -> Result<(), ConnectionError> {
        let Message {
            command,
            arg0,
            arg1,
            payload,
        } = message;
        match command {
            Command::Cnxn => self.connect(arg0, arg1).await,
            Command::Open => self.open(arg0, &payload).await,
            Command::Okay => self.deliver(arg1, arg0, Event::Okay),
            Command::Wrte => self.deliver(arg1, arg0, Event::Data(payload)),
            Command::Clse => {
                // adb once sent CLSE(0, id) for ordinary closes, so a zero
                // host id matches any stream.
                let ours = self
                    .streams
                    .get(&arg1)
                    .is_some_and(|entry| arg0 == 0 || entry.remote == arg0);
                if !ours {
                    return Ok(());
                }
                // Dropping the sender tells the stream the host closed.
                let Some(entry) = self.streams.remove(&arg1) else {
                    return Ok(());
                };
                // adbd answers a host's CLSE with its own while the service
                // still runs (local_socket_close shuts its peer down, which
                // sends CLSE); clients that talk to the device directly wait
                // for it. A service that already ended sent its CLSE.
                if entry.inbox.is_closed() {
                    return Ok(());
                }
                self.send(Message::new(Command::Clse, arg1, entry.remote, []))
                    .await
            }
            // The device never starts AUTH or STLS, and SYNC is obsolete.
            Command::Auth | Command::Stls | Command::Sync => Ok(()),
        }
    }

    /// Answers CNXN with CNXN and no AUTH. A repeated CNXN is answered
    /// again, as adbd does for a host that restarted its side.
    async fn connect(&mut self, version: u32, host_maxdata: u32) -> Result<(), ConnectionError> {
        if host_maxdata < MIN_HOST_MAXDATA {
            return Err(ConnectionError::MaxdataTooSmall(host_maxdata));
        }
        self.max_payload = Some(host_maxdata.min(MAX_PAYLOAD) as usize);
        // Even identity() may wait on the phone's lock behind a long command.
        let backend = self.context.backend.clone();
        let id = blocking(move || backend.identity())
            .await
            .ok_or(ConnectionError::BackendPanicked)?;
        let banner = format!(
            concat!(
                "device::ro.product.name={};ro.product.model={};",
                "ro.product.device={};features=shell_v2,cmd"
            ),
            id.product_name, id.model, id.device
        );
        let reply = Message::new(Command::Cnxn, version.min(A_VERSION), MAX_PAYLOAD, banner);
        self.send(reply).await
    }

    async fn open(&mut self, remote: u32, payload: &[u8]) -> Result<(), ConnectionError> {
        // Before the handshake, and with the reserved id 0, adbd ignores OPEN.
        let Some(max_payload) = self.max_payload else {
            return Ok(());
        };
        if remote == 0 {
            return Ok(());
        }
        let name = String::from_utf8_lossy(payload);
        let service = Service::parse(name.trim_end_matches('\0'));
        let Some(service) = service.filter(|_| self.has_room()) else {
            return self.send(Message::new(Command::Clse, 0, remote, [])).await;
        };
        let local = self.allocate_id();
        let (inbox_tx, inbox) = mpsc::channel(INBOX_CAPACITY);
        self.streams.insert(
            local,
            StreamEntry {
                remote,
                inbox: inbox_tx,
            },
        );
        self.send(Message::new(Command::Okay, local, remote, []))
            .await?;
        let stream = Stream::new(local, remote, max_payload, self.outbox.clone(), inbox);
        self.tasks
            .spawn(service.serve(stream, self.context.clone()));
        Ok(())
    }

    fn has_room(&mut self) -> bool {
        if self.streams.len() >= MAX_STREAMS_PER_CONNECTION {
            // Streams the device finished linger until the host's CLSE.
            self.streams.retain(|_, entry| !entry.inbox.is_closed());
        }
        self.streams.len() < MAX_STREAMS_PER_CONNECTION
    }

    /// A fresh non-zero id; ids are not reused while a stream holds them.
    fn allocate_id(&mut self) -> u32 {
        loop {
            let id = self.next_id;
            self.next_id = self.next_id.checked_add(1).unwrap_or(1);
            if !self.streams.contains_key(&id) {
                return id;
            }
        }
    }

    /// Routes a host OKAY/WRTE to stream `local`; messages for unknown or
    /// closed streams, or naming another host id, are ignored.
    fn deliver(&mut self, local: u32, remote: u32, event: Event) -> Result<(), ConnectionError> {
        let Some(entry) = self.streams.get(&local) else {
            return Ok(());
        };
        if entry.remote != remote {
            return Ok(());
        }
        match entry.inbox.try_send(event) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.streams.remove(&local);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(_)) => Err(ConnectionError::Flooded(local)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    async fn pair() -> (TcpStream, FrameReader) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (client, FrameReader::new(server.into_split().0))
    }

    #[tokio::test]
    async fn clean_eof_between_messages_is_not_an_error() {
        let (mut client, mut reader) = pair().await;
        let okay = Message::new(Command::Okay, 8, 1, Vec::new());
        client.write_all(&okay.encode()).await.unwrap();
        client.shutdown().await.unwrap();
        assert_eq!(reader.read_message().await.unwrap(), Some(okay));
        assert_eq!(reader.read_message().await.unwrap(), None);
    }

    #[tokio::test]
    async fn eof_in_the_middle_of_a_message_is_an_error() {
        let (mut client, mut reader) = pair().await;
        let wrte = Message::new(Command::Wrte, 8, 1, b"hello".to_vec()).encode();
        client.write_all(&wrte[..27]).await.unwrap();
        client.shutdown().await.unwrap();
        assert!(matches!(
            reader.read_message().await,
            Err(ConnectionError::Truncated(27))
        ));
    }

    #[tokio::test]
    async fn a_message_split_across_reads_is_reassembled() {
        let (mut client, mut reader) = pair().await;
        let wrte = Message::new(Command::Wrte, 8, 1, vec![9u8; 3000]);
        let bytes = wrte.encode();
        let writer = tokio::spawn(async move {
            for piece in bytes.chunks(7) {
                client.write_all(piece).await.unwrap();
                client.flush().await.unwrap();
            }
            client
        });
        assert_eq!(reader.read_message().await.unwrap(), Some(wrte));
        drop(writer.await.unwrap());
        assert_eq!(reader.read_message().await.unwrap(), None);
    }
}
