//! ADB transport messages: a 24-byte little-endian header plus a payload,
//! encoded and decoded exactly as they travel over TCP.
//!
//! Decoding is check-then-parse: [`Message::decode`] answers
//! [`FrameError::Incomplete`] until a whole message is buffered, and the
//! caller then reads more bytes and retries with nothing consumed. Every other
//! [`FrameError`] means the peer does not speak ADB and its connection must be
//! dropped. Payload limits are enforced as soon as the header is buffered, so
//! a hostile length never makes the device wait for (or buffer) gigabytes.
//!
//! Checksums are filled on output because `adb_client` verifies them on every
//! message, and ignored on input because adb ≥ 0x01000001 sends zero there.
//! This module is public so host-side code can reuse the same codec.

use thiserror::Error;

/// Bytes in a message header.
pub const HEADER_LEN: usize = 24;

/// Protocol version the device speaks; 0x01000001 lets the sender leave the
/// checksum at zero. The device answers `min(host, A_VERSION)`.
pub const A_VERSION: u32 = 0x0100_0001;

/// Largest payload the device accepts, announced as CNXN `arg1`: adb's own
/// `MAX_PAYLOAD`.
pub const MAX_PAYLOAD: u32 = 1024 * 1024;

/// Largest CNXN/AUTH payload: adb's `MAX_PAYLOAD_V1`. The handshake happens
/// before maxdata is negotiated, so it is held to the legacy size.
pub const MAX_HANDSHAKE_PAYLOAD: u32 = 4096;

/// A message type: the header's first field, four ASCII bytes read as a
/// little-endian u32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `CNXN(version, maxdata, banner)`: the handshake.
    Cnxn,
    /// `AUTH(type, 0, data)`: RSA authentication (never started by this device).
    Auth,
    /// `OPEN(local, 0, service)`: open a stream to a service.
    Open,
    /// `OKAY(local, remote)`: stream opened, or the last WRTE was consumed.
    Okay,
    /// `WRTE(local, remote, data)`: stream data.
    Wrte,
    /// `CLSE(local, remote)`: stream closed (`local` 0: the OPEN failed).
    Clse,
    /// `STLS(type, version)`: TLS upgrade, only ever started by a device.
    Stls,
    /// `SYNC`: obsolete, never sent by any current adb.
    Sync,
}

impl Command {
    /// Every command.
    pub const ALL: [Command; 8] = [
        Command::Cnxn,
        Command::Auth,
        Command::Open,
        Command::Okay,
        Command::Wrte,
        Command::Clse,
        Command::Stls,
        Command::Sync,
    ];

    /// The wire value (`b"CNXN"` read as LE u32 = 0x4E584E43, …).
    pub const fn code(self) -> u32 {
        u32::from_le_bytes(*match self {
            Command::Cnxn => b"CNXN",
            Command::Auth => b"AUTH",
            Command::Open => b"OPEN",
            Command::Okay => b"OKAY",
            Command::Wrte => b"WRTE",
            Command::Clse => b"CLSE",
            Command::Stls => b"STLS",
            Command::Sync => b"SYNC",
        })
    }

    pub fn from_code(code: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|command| command.code() == code)
    }

    /// Largest payload the device accepts for this command.
    pub const fn max_payload(self) -> u32 {
        match self {
            Command::Cnxn | Command::Auth => MAX_HANDSHAKE_PAYLOAD,
            _ => MAX_PAYLOAD,
        }
    }
}

/// Why bytes could not be decoded as a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum FrameError {
    /// Not a whole message yet: read more and retry. Not a protocol error.
    #[error("incomplete message")]
    Incomplete,
    /// `magic != command ^ 0xFFFFFFFF`: the stream is not ADB or lost sync.
    #[error("bad magic {magic:#010x} for command {command:#010x}")]
    BadMagic { command: u32, magic: u32 },
    /// A well-formed header whose command no adb sends.
    #[error("unknown command {0:#010x}")]
    UnknownCommand(u32),
    /// The header announces more payload than the command may carry.
    #[error("{command:?} announces a {len}-byte payload, above the {max}-byte limit")]
    TooLong {
        command: Command,
        len: u32,
        max: u32,
    },
}

/// One transport message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub command: Command,
    pub arg0: u32,
    pub arg1: u32,
    pub payload: Vec<u8>,
}

/// `data_check`: the byte sum of the payload (not a CRC, despite the name).
pub fn checksum(payload: &[u8]) -> u32 {
    payload
        .iter()
        .fold(0u32, |sum, &b| sum.wrapping_add(u32::from(b)))
}

impl Message {
    pub fn new(command: Command, arg0: u32, arg1: u32, payload: impl Into<Vec<u8>>) -> Self {
        Self {
            command,
            arg0,
            arg1,
            payload: payload.into(),
        }
    }

    /// The message's wire bytes, checksum filled.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.payload.len());
        self.encode_into(&mut out);
        out
    }

    /// Appends the message's wire bytes to `out`, so a writer can batch
    /// several messages into one `write`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let code = self.command.code();
        // Payloads are built by this crate and bounded by MAX_PAYLOAD.
        let len = self.payload.len() as u32;
        for field in [
            code,
            self.arg0,
            self.arg1,
            len,
            checksum(&self.payload),
            code ^ u32::MAX,
        ] {
            out.extend_from_slice(&field.to_le_bytes());
        }
        out.extend_from_slice(&self.payload);
    }

    /// Decodes the message at the start of `buf` and says how many bytes it
    /// used. On any error nothing is consumed.
    pub fn decode(buf: &[u8]) -> Result<(Message, usize), FrameError> {
        let (header, rest) = buf
            .split_first_chunk::<HEADER_LEN>()
            .ok_or(FrameError::Incomplete)?;
        let [code, arg0, arg1, len, _checksum, magic]: [u32; 6] = std::array::from_fn(|i| {
            u32::from_le_bytes([
                header[4 * i],
                header[4 * i + 1],
                header[4 * i + 2],
                header[4 * i + 3],
            ])
        });
        if magic != code ^ u32::MAX {
            return Err(FrameError::BadMagic {
                command: code,
                magic,
            });
        }
        let command = Command::from_code(code).ok_or(FrameError::UnknownCommand(code))?;
        let max = command.max_payload();
        if len > max {
            return Err(FrameError::TooLong { command, len, max });
        }
        let payload = rest.get(..len as usize).ok_or(FrameError::Incomplete)?;
        Ok((
            Message::new(command, arg0, arg1, payload),
            HEADER_LEN + payload.len(),
        ))
    }
}

#[cfg(test)]
mod tests {
    //! The wire spec: every expected byte is written by hand, one comment per
    //! header field, never produced by the encoder under test.

    use super::*;

    #[test]
    fn encode_cnxn() {
        let msg = Message::new(
            Command::Cnxn,
            0x0100_0001,
            0x0010_0000,
            b"device::".to_vec(),
        );
        #[rustfmt::skip]
        let expected = [
            b'C', b'N', b'X', b'N',  // command
            0x01, 0x00, 0x00, 0x01,  // arg0: version 0x01000001
            0x00, 0x00, 0x10, 0x00,  // arg1: maxdata 1 MiB
            0x08, 0x00, 0x00, 0x00,  // data_length: 8
            0xE4, 0x02, 0x00, 0x00,  // data_check: sum("device::") = 740
            0xBC, 0xB1, 0xA7, 0xB1,  // magic: !"CNXN"
            b'd', b'e', b'v', b'i', b'c', b'e', b':', b':',
        ];
        assert_eq!(msg.encode(), expected);
    }

    #[test]
    fn decode_cnxn_from_adb_client() {
        // adb_client 3.2.3's handshake, as captured.
        #[rustfmt::skip]
        let wire = [
            0x43, 0x4E, 0x58, 0x4E,  // command: "CNXN"
            0x00, 0x00, 0x00, 0x01,  // arg0: version 0x01000000
            0x00, 0x00, 0x10, 0x00,  // arg1: maxdata 1048576
            0x11, 0x00, 0x00, 0x00,  // data_length: 17
            0x37, 0x06, 0x00, 0x00,  // data_check: 1591
            0xBC, 0xB1, 0xA7, 0xB1,  // magic
            b'h', b'o', b's', b't', b':', b':', b'a', b'd', b'b', b'_',
            b'c', b'l', b'i', b'e', b'n', b't', 0x00,
        ];
        let (msg, used) = Message::decode(&wire).unwrap();
        assert_eq!(used, wire.len());
        assert_eq!(
            msg,
            Message::new(
                Command::Cnxn,
                0x0100_0000,
                1 << 20,
                b"host::adb_client\0".to_vec()
            )
        );
    }

    #[test]
    fn encode_and_decode_open() {
        let msg = Message::new(Command::Open, 8, 0, b"sync:\0".to_vec());
        #[rustfmt::skip]
        let wire = [
            b'O', b'P', b'E', b'N',  // command
            0x08, 0x00, 0x00, 0x00,  // arg0: host stream id 8
            0x00, 0x00, 0x00, 0x00,  // arg1: 0 (no delayed ack)
            0x06, 0x00, 0x00, 0x00,  // data_length: 6
            0xF7, 0x01, 0x00, 0x00,  // data_check: sum("sync:\0") = 503
            0xB0, 0xAF, 0xBA, 0xB1,  // magic
            b's', b'y', b'n', b'c', b':', 0x00,
        ];
        assert_eq!(msg.encode(), wire);
        assert_eq!(Message::decode(&wire).unwrap(), (msg, wire.len()));
    }

    #[test]
    fn encode_and_decode_okay() {
        let msg = Message::new(Command::Okay, 1, 8, Vec::new());
        #[rustfmt::skip]
        let wire = [
            b'O', b'K', b'A', b'Y',  // command
            0x01, 0x00, 0x00, 0x00,  // arg0: device stream id 1
            0x08, 0x00, 0x00, 0x00,  // arg1: host stream id 8
            0x00, 0x00, 0x00, 0x00,  // data_length: 0
            0x00, 0x00, 0x00, 0x00,  // data_check: 0
            0xB0, 0xB4, 0xBE, 0xA6,  // magic
        ];
        assert_eq!(msg.encode(), wire);
        assert_eq!(Message::decode(&wire).unwrap(), (msg, wire.len()));
    }

    #[test]
    fn encode_and_decode_wrte() {
        let msg = Message::new(Command::Wrte, 1, 8, vec![0x00, 0xFF, 0x80]);
        #[rustfmt::skip]
        let wire = [
            b'W', b'R', b'T', b'E',  // command
            0x01, 0x00, 0x00, 0x00,  // arg0: device stream id 1
            0x08, 0x00, 0x00, 0x00,  // arg1: host stream id 8
            0x03, 0x00, 0x00, 0x00,  // data_length: 3
            0x7F, 0x01, 0x00, 0x00,  // data_check: 0 + 255 + 128 = 383
            0xA8, 0xAD, 0xAB, 0xBA,  // magic
            0x00, 0xFF, 0x80,        // payload: binary, not text
        ];
        assert_eq!(msg.encode(), wire);
        assert_eq!(Message::decode(&wire).unwrap(), (msg, wire.len()));
    }

    #[test]
    fn encode_and_decode_clse() {
        let msg = Message::new(Command::Clse, 0, 8, Vec::new());
        #[rustfmt::skip]
        let wire = [
            b'C', b'L', b'S', b'E',  // command
            0x00, 0x00, 0x00, 0x00,  // arg0: 0 = "the OPEN failed"
            0x08, 0x00, 0x00, 0x00,  // arg1: host stream id 8
            0x00, 0x00, 0x00, 0x00,  // data_length
            0x00, 0x00, 0x00, 0x00,  // data_check
            0xBC, 0xB3, 0xAC, 0xBA,  // magic
        ];
        assert_eq!(msg.encode(), wire);
        assert_eq!(Message::decode(&wire).unwrap(), (msg, wire.len()));
    }

    #[test]
    fn decode_auth_and_stls() {
        #[rustfmt::skip]
        let auth = [
            b'A', b'U', b'T', b'H',  // command
            0x02, 0x00, 0x00, 0x00,  // arg0: 2 = SIGNATURE
            0x00, 0x00, 0x00, 0x00,  // arg1
            0x01, 0x00, 0x00, 0x00,  // data_length: 1
            0x07, 0x00, 0x00, 0x00,  // data_check
            0xBE, 0xAA, 0xAB, 0xB7,  // magic
            0x07,
        ];
        let (msg, _) = Message::decode(&auth).unwrap();
        assert_eq!(msg, Message::new(Command::Auth, 2, 0, vec![7]));
        #[rustfmt::skip]
        let stls = [
            b'S', b'T', b'L', b'S',  // command
            0x01, 0x00, 0x00, 0x00,  // arg0: type
            0x00, 0x00, 0x00, 0x01,  // arg1: version
            0x00, 0x00, 0x00, 0x00,  // data_length
            0x00, 0x00, 0x00, 0x00,  // data_check
            0xAC, 0xAB, 0xB3, 0xAC,  // magic
        ];
        assert_eq!(Message::decode(&stls).unwrap().0.command, Command::Stls);
    }

    #[test]
    fn input_checksum_is_ignored() {
        // adb at version 0x01000001 sends data_check = 0.
        let mut wire = Message::new(Command::Wrte, 8, 1, b"hi".to_vec()).encode();
        wire[16..20].copy_from_slice(&[0, 0, 0, 0]);
        assert_eq!(Message::decode(&wire).unwrap().0.payload, b"hi");
    }

    #[test]
    fn every_truncation_is_incomplete() {
        let wire = Message::new(Command::Wrte, 1, 8, b"hello".to_vec()).encode();
        for cut in 0..wire.len() {
            assert_eq!(
                Message::decode(&wire[..cut]),
                Err(FrameError::Incomplete),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn back_to_back_messages_decode_one_at_a_time() {
        let first = Message::new(Command::Okay, 8, 1, Vec::new());
        let second = Message::new(Command::Wrte, 8, 1, b"abc".to_vec());
        let third = Message::new(Command::Clse, 8, 1, Vec::new());
        let mut buf = [first.encode(), second.encode(), third.encode()].concat();
        buf.extend_from_slice(&second.encode()[..10]);
        let mut decoded = Vec::new();
        let mut rest = &buf[..];
        loop {
            match Message::decode(rest) {
                Ok((msg, used)) => {
                    decoded.push(msg);
                    rest = &rest[used..];
                }
                Err(FrameError::Incomplete) => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(decoded, [first, second, third]);
        assert_eq!(rest.len(), 10, "the partial fourth message stays buffered");
    }

    #[test]
    fn oversized_lengths_are_rejected_from_the_header_alone() {
        #[rustfmt::skip]
        let wrte = [
            b'W', b'R', b'T', b'E',  // command
            0x01, 0x00, 0x00, 0x00,  // arg0
            0x08, 0x00, 0x00, 0x00,  // arg1
            0x01, 0x00, 0x10, 0x00,  // data_length: MAX_PAYLOAD + 1
            0x00, 0x00, 0x00, 0x00,  // data_check
            0xA8, 0xAD, 0xAB, 0xBA,  // magic
        ];
        assert_eq!(
            Message::decode(&wrte),
            Err(FrameError::TooLong {
                command: Command::Wrte,
                len: MAX_PAYLOAD + 1,
                max: MAX_PAYLOAD
            })
        );
        #[rustfmt::skip]
        let cnxn = [
            b'C', b'N', b'X', b'N',  // command
            0x01, 0x00, 0x00, 0x01,  // arg0
            0x00, 0x00, 0x10, 0x00,  // arg1
            0x01, 0x10, 0x00, 0x00,  // data_length: 4097, over the handshake cap
            0x00, 0x00, 0x00, 0x00,  // data_check
            0xBC, 0xB1, 0xA7, 0xB1,  // magic
        ];
        assert!(matches!(
            Message::decode(&cnxn),
            Err(FrameError::TooLong {
                len: 4097,
                max: 4096,
                ..
            })
        ));
        // Exactly at the limit is fine: it is merely incomplete.
        let mut at_limit = cnxn;
        at_limit[12..16].copy_from_slice(&4096u32.to_le_bytes());
        assert_eq!(Message::decode(&at_limit), Err(FrameError::Incomplete));
    }

    #[test]
    fn bad_magic_and_unknown_commands_are_rejected() {
        let mut wire = Message::new(Command::Okay, 1, 8, Vec::new()).encode();
        wire[20] ^= 1;
        assert!(matches!(
            Message::decode(&wire),
            Err(FrameError::BadMagic { .. })
        ));
        #[rustfmt::skip]
        let unknown = [
            b'X', b'Y', b'Z', b'W',  // command nobody defines
            0x00, 0x00, 0x00, 0x00,  // arg0
            0x00, 0x00, 0x00, 0x00,  // arg1
            0x00, 0x00, 0x00, 0x00,  // data_length
            0x00, 0x00, 0x00, 0x00,  // data_check
            0xA7, 0xA6, 0xA5, 0xA8,  // magic: consistent with the command
        ];
        assert_eq!(
            Message::decode(&unknown),
            Err(FrameError::UnknownCommand(0x575A_5958))
        );
        // Garbage text fails on the magic as soon as 24 bytes are in.
        assert!(matches!(
            Message::decode(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
            Err(FrameError::BadMagic { .. })
        ));
    }
}
