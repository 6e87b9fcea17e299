//! The Connect frame decoder on arbitrary bytes cut into arbitrary reads: never a panic, and
//! the same frames (or the same error) however the bytes are split.
#![no_main]

use cursor_acp_core::connect::{Encoding, Frame, FrameDecoder, Limits};
use libfuzzer_sys::fuzz_target;

/// Every frame until the end, an error or the need for more bytes.
fn drain(decoder: &mut FrameDecoder, out: &mut Vec<Result<Frame, String>>) -> bool {
    loop {
        match decoder.next_frame() {
            Ok(Some(frame)) => out.push(Ok(frame)),
            Ok(None) => return true,
            Err(e) => {
                out.push(Err(e.to_string()));
                return false;
            }
        }
    }
}

fn decode(data: &[u8], cuts: &[u8], gzip: bool) -> Vec<Result<Frame, String>> {
    let mut decoder = FrameDecoder::new(Limits::uniform(1 << 16));
    if gzip {
        decoder.set_encoding(Encoding::Gzip);
    }
    let mut out = Vec::new();
    let mut rest = data;
    for &cut in cuts {
        let (piece, tail) = rest.split_at(usize::from(cut).min(rest.len()));
        decoder.push(piece);
        rest = tail;
        if !drain(&mut decoder, &mut out) {
            return out;
        }
    }
    decoder.push(rest);
    if drain(&mut decoder, &mut out) {
        if let Err(e) = decoder.finish() {
            out.push(Err(e.to_string()));
        }
    }
    out
}

fuzz_target!(|input: &[u8]| {
    // First byte: flags for this run; next up to 8 bytes: read sizes; the rest: the stream.
    let Some((&flags, rest)) = input.split_first() else { return };
    let (cuts, data) = rest.split_at(rest.len().min(usize::from(flags & 7)));
    let gzip = flags & 8 != 0;
    let whole = decode(data, &[], gzip);
    let split = decode(data, cuts, gzip);
    assert_eq!(format!("{whole:?}"), format!("{split:?}"), "the split changed what was read");
});
