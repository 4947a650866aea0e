//! The generated protobuf types and the stdio framing (varint length, then the message).

use prost::Message;
use tokio::io::{AsyncRead, AsyncReadExt};

// Generated: JobSpec is by far the largest command, and it comes once per job.
#[allow(clippy::large_enum_variant)]
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/loadfleet.v1.rs"));
}

/// Largest command the engine accepts: a job with a large workload manifest is a few MB.
const MAX_FRAME_BYTES: u64 = 64 << 20;

#[derive(Debug)]
pub enum FrameError {
    Io(std::io::Error),
    TooLarge(u64),
    Truncated,
    Decode(prost::DecodeError),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Io(e) => write!(f, "reading stdin: {e}"),
            FrameError::TooLarge(n) => write!(f, "frame of {n} bytes is larger than {MAX_FRAME_BYTES}"),
            FrameError::Truncated => write!(f, "stdin ended inside a frame"),
            FrameError::Decode(e) => write!(f, "not an EngineCommand: {e}"),
        }
    }
}

/// Reads the next length-delimited message; `Ok(None)` at a clean end of input.
pub async fn read_frame<M: Message + Default, R: AsyncRead + Unpin>(input: &mut R) -> Result<Option<M>, FrameError> {
    let mut length: u64 = 0;
    let mut shift = 0;
    loop {
        let mut byte = [0u8; 1];
        match input.read(&mut byte).await.map_err(FrameError::Io)? {
            0 if shift == 0 => return Ok(None),
            0 => return Err(FrameError::Truncated),
            _ => {}
        }
        length |= u64::from(byte[0] & 0x7f) << shift;
        if byte[0] & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 63 {
            return Err(FrameError::TooLarge(u64::MAX));
        }
    }
    if length > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge(length));
    }
    let mut payload = vec![0u8; length as usize];
    input.read_exact(&mut payload).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => FrameError::Truncated,
        _ => FrameError::Io(e),
    })?;
    M::decode(payload.as_slice()).map(Some).map_err(FrameError::Decode)
}

/// Encodes one event as a frame.
pub fn frame<M: Message>(message: &M) -> Vec<u8> {
    message.encode_length_delimited_to_vec()
}

/// Writes one event to stdout. If the agent is gone there is nobody to report to, so
/// the engine exits rather than generate load that no one measures.
pub fn emit(event: pb::engine_event::Event) {
    use std::io::Write;
    let bytes = frame(&pb::EngineEvent { event: Some(event) });
    let mut out = std::io::stdout().lock();
    if out.write_all(&bytes).and_then(|()| out.flush()).is_err() {
        eprintln!("loadfleet-engine: stdout closed; exiting");
        std::process::exit(0);
    }
}
