//! The shell protocol v2 (`shell,v2,…:CMD`): inside the stream, every piece
//! of data is a packet `u8 id, u32 LE length, data`. It is what gives
//! `adb shell` a separate stderr and the command's exit code.
//!
//! The packets form a byte stream: a packet may span several WRTEs and a WRTE
//! may carry several packets. The device only sends stdout, stderr and exit;
//! what the host sends (stdin, close-stdin, window size) is never parsed by
//! the device, because the virtual phone's commands take no input. The
//! decoder is public for host-side readers and tests.

use crate::sim::backend::{ShellOutput, Stream};

/// Packet ids from adb's `shell_protocol.h`.
pub const STDIN: u8 = 0;
pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;
/// Data is one byte: the exit code.
pub const EXIT: u8 = 3;
pub const CLOSE_STDIN: u8 = 4;
pub const WINDOW_SIZE: u8 = 5;

/// `id` plus `length`.
pub const HEADER_LEN: usize = 5;

/// Largest data the device puts in one packet. Any size is legal; keeping
/// packets small bounds what a host reader must hold before it can print.
pub const MAX_PACKET_DATA: usize = 64 * 1024;

/// Appends one packet.
pub fn encode_packet(id: u8, data: &[u8], out: &mut Vec<u8>) {
    out.push(id);
    // Callers bound `data` by MAX_PACKET_DATA.
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(data);
}

/// A finished command as the device sends it: its stdout and stderr
/// packets in the order it wrote them, then the exit packet. Empty streams
/// send no packet.
pub fn encode_output(output: &ShellOutput) -> Vec<u8> {
    let mut out = Vec::with_capacity(output.stdout.len() + output.stderr.len() + 32);
    for (stream, bytes) in output.writes() {
        let id = match stream {
            Stream::Stdout => STDOUT,
            Stream::Stderr => STDERR,
        };
        for chunk in bytes.chunks(MAX_PACKET_DATA) {
            encode_packet(id, chunk, &mut out);
        }
    }
    encode_packet(EXIT, &[output.exit_code], &mut out);
    out
}

/// One decoded packet, borrowing its data from the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    pub id: u8,
    pub data: &'a [u8],
}

/// Decodes the packet at the start of `buf` and the bytes it used, or `None`
/// if it is not all buffered yet.
pub fn decode_packet(buf: &[u8]) -> Option<(Packet<'_>, usize)> {
    let (&[id, l0, l1, l2, l3], rest) = buf.split_first_chunk::<HEADER_LEN>()?;
    let len = u32::from_le_bytes([l0, l1, l2, l3]) as usize;
    let data = rest.get(..len)?;
    Some((Packet { id, data }, HEADER_LEN + len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_echo_hi_as_adb_shell_receives_it() {
        // The WRTE payload real adb 29 got for `adb shell echo hi`.
        #[rustfmt::skip]
        let expected = [
            0x01,                    // id: stdout
            0x03, 0x00, 0x00, 0x00,  // length: 3
            b'h', b'i', b'\n',
            0x03,                    // id: exit
            0x01, 0x00, 0x00, 0x00,  // length: 1
            0x00,                    // exit code 0
        ];
        assert_eq!(encode_output(&ShellOutput::ok("hi\n")), expected);
    }

    #[test]
    fn encode_stderr_and_exit_code() {
        #[rustfmt::skip]
        let expected = [
            0x02,                    // id: stderr
            0x04, 0x00, 0x00, 0x00,  // length: 4
            b'n', b'o', b'p', b'e',
            0x03,                    // id: exit
            0x01, 0x00, 0x00, 0x00,  // length: 1
            0x7F,                    // exit code 127
        ];
        assert_eq!(encode_output(&ShellOutput::fail(127, "nope")), expected);
    }

    /// Packets keep the order of the writes: stderr written between two
    /// stdout writes arrives between them.
    #[test]
    fn streams_interleave_as_written() {
        let mut output = ShellOutput::default();
        output.out("a");
        output.err("b");
        output.out("c");
        let wire = encode_output(&output);
        let mut packets = Vec::new();
        let mut at = 0;
        while let Some((packet, used)) = decode_packet(&wire[at..]) {
            packets.push((packet.id, packet.data.to_vec()));
            at += used;
        }
        assert_eq!(
            packets,
            [
                (STDOUT, b"a".to_vec()),
                (STDERR, b"b".to_vec()),
                (STDOUT, b"c".to_vec()),
                (EXIT, vec![0])
            ]
        );
    }

    #[test]
    fn long_output_is_split_into_bounded_packets() {
        let output = ShellOutput::ok(vec![7u8; MAX_PACKET_DATA + 1]);
        let wire = encode_output(&output);
        let (first, used) = decode_packet(&wire).unwrap();
        assert_eq!((first.id, first.data.len()), (STDOUT, MAX_PACKET_DATA));
        let (second, used2) = decode_packet(&wire[used..]).unwrap();
        assert_eq!((second.id, second.data), (STDOUT, &[7u8][..]));
        let (exit, used3) = decode_packet(&wire[used + used2..]).unwrap();
        assert_eq!((exit.id, exit.data), (EXIT, &[0u8][..]));
        assert_eq!(used + used2 + used3, wire.len());
    }

    #[test]
    fn decode_host_packets_back_to_back_and_truncated() {
        #[rustfmt::skip]
        let wire = [
            0x05,                    // id: window size
            0x03, 0x00, 0x00, 0x00,  // length: 3
            b'2', b'4', b'x',
            0x04,                    // id: close stdin
            0x00, 0x00, 0x00, 0x00,  // length: 0
            0x00,                    // id: stdin, header cut short
            0x02, 0x00,
        ];
        let (ws, used) = decode_packet(&wire).unwrap();
        assert_eq!(
            ws,
            Packet {
                id: WINDOW_SIZE,
                data: b"24x"
            }
        );
        let (close, used2) = decode_packet(&wire[used..]).unwrap();
        assert_eq!(
            close,
            Packet {
                id: CLOSE_STDIN,
                data: b""
            }
        );
        assert_eq!(decode_packet(&wire[used + used2..]), None);
        for cut in 0..used {
            assert_eq!(decode_packet(&wire[..cut]), None, "cut at {cut}");
        }
        assert_eq!(decode_packet(&[STDIN, 1, 0, 0, 0, b'x']).unwrap().1, 6);
    }
}
