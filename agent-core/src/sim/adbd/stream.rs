//! One ADB stream as a service sees it: ordered reads and writes with the
//! protocol's flow control done for it.
//!
//! Flow control is "one outstanding WRTE per direction":
//! - device → host: a WRTE may only follow the host's OKAY for the previous
//!   one. [`Stream::write`] waits for that OKAY *before* each chunk, never
//!   after the last, so a service can close without the final OKAY (real
//!   adbd does the same; `adb_client` never acknowledges some final WRTEs).
//! - host → device: the device acknowledges a host WRTE when the service
//!   consumes it ([`Stream::read`]), so a host cannot run ahead of a slow
//!   service (services that take no input consume and drop it). A host WRTE
//!   arriving while the previous one is unconsumed broke that rule, and the
//!   connection is dropped.
//!
//! The connection's reader feeds [`Event`]s in through a small channel; all
//! output goes to the connection's single writer as [`Outgoing`] items, in
//! order, so an [`Outgoing::Abort`] takes effect after everything queued
//! before it has reached the socket.

use super::message::{Command, Message};
use thiserror::Error;
use tokio::sync::mpsc;

/// What the connection's reader delivers to a stream.
#[derive(Debug)]
pub(super) enum Event {
    /// The host's WRTE payload.
    Data(Vec<u8>),
    /// The host's OKAY: it consumed our last WRTE.
    Okay,
}

/// What streams hand to the connection's writer.
#[derive(Debug)]
pub(super) enum Outgoing {
    Message(Message),
    /// Drop the TCP connection once everything queued before is written.
    Abort(Abort),
}

/// Why a connection was dropped on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub(super) enum Abort {
    /// The test fault hook fired (see `Faults`).
    #[error("fault injected: connection dropped mid-command")]
    FaultInjected,
    /// A second host WRTE arrived before the first was acknowledged.
    #[error("host sent stream {0} a WRTE before its previous one was acknowledged")]
    UnacknowledgedWrite(u32),
}

/// The host closed the stream, or the connection is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Closed;

pub(super) struct Stream {
    local: u32,
    remote: u32,
    /// WRTE payload limit: the smaller of the host's maxdata and ours.
    max_payload: usize,
    outbox: mpsc::Sender<Outgoing>,
    inbox: mpsc::Receiver<Event>,
    /// A host WRTE received while the service was writing, not yet acked.
    unread: Option<Vec<u8>>,
    awaiting_okay: bool,
    host_closed: bool,
}

impl Stream {
    pub(super) fn new(
        local: u32,
        remote: u32,
        max_payload: usize,
        outbox: mpsc::Sender<Outgoing>,
        inbox: mpsc::Receiver<Event>,
    ) -> Self {
        Self {
            local,
            remote,
            max_payload,
            outbox,
            inbox,
            unread: None,
            awaiting_okay: false,
            host_closed: false,
        }
    }

    pub(super) fn max_payload(&self) -> usize {
        self.max_payload
    }

    async fn send(&self, command: Command, payload: &[u8]) -> Result<(), Closed> {
        let message = Message::new(command, self.local, self.remote, payload);
        self.outbox
            .send(Outgoing::Message(message))
            .await
            .map_err(|_| Closed)
    }

    /// Waits for the next event from the host.
    async fn next_event(&mut self) -> Result<(), Closed> {
        match self.inbox.recv().await {
            Some(Event::Okay) => self.awaiting_okay = false,
            Some(Event::Data(data)) => {
                if self.unread.is_some() {
                    let abort = Abort::UnacknowledgedWrite(self.local);
                    let _ = self.outbox.send(Outgoing::Abort(abort)).await;
                    return Err(Closed);
                }
                self.unread = Some(data);
            }
            None => {
                self.host_closed = true;
                return Err(Closed);
            }
        }
        Ok(())
    }

    /// Sends `data` as WRTEs of at most `max_payload` bytes each, waiting for
    /// the host's OKAY before every chunk but not after the last.
    pub(super) async fn write(&mut self, data: &[u8]) -> Result<(), Closed> {
        for chunk in data.chunks(self.max_payload) {
            while self.awaiting_okay {
                self.next_event().await?;
            }
            self.send(Command::Wrte, chunk).await?;
            self.awaiting_okay = true;
        }
        Ok(())
    }

    /// The next host WRTE payload, acknowledged; `None` once the host closed.
    pub(super) async fn read(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(data) = self.unread.take() {
                self.send(Command::Okay, &[]).await.ok()?;
                return Some(data);
            }
            self.next_event().await.ok()?;
        }
    }

    /// Ends the stream from the device side. A host that already closed gets
    /// no second CLSE: the connection answered its CLSE.
    pub(super) async fn close(self) {
        if !self.host_closed {
            let _ = self.send(Command::Clse, &[]).await;
        }
    }

    /// Drops the whole TCP connection after what is already queued, with no
    /// CLSE: the fault hook's "phone vanished mid-command".
    pub(super) async fn drop_connection(self) {
        let _ = self
            .outbox
            .send(Outgoing::Abort(Abort::FaultInjected))
            .await;
    }
}
