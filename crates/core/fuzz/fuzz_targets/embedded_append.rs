//! The embedded backend's BidiAppend body reader against prost's decode of the same bytes, split
//! into arbitrary reads: the same verdict, and the same request id, seqno and payload.
#![no_main]

use cursor_acp_embedded::{AppendError, AppendReader};
use cursor_acp_core::proto::aiserver::v1::BidiAppendRequest;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|input: &[u8]| {
    let Some((&cut, body)) = input.split_first() else { return };
    let mut reader = AppendReader::new(1 << 20, false);
    let ours = (|| {
        let (head, tail) = body.split_at(usize::from(cut).min(body.len()));
        reader.push(head)?;
        reader.push(tail)?;
        reader.finish()
    })();
    match BidiAppendRequest::decode(body) {
        Err(e) => assert!(ours.is_err(), "prost refuses ({e}) what the reader accepts"),
        Ok(theirs) => match hex::decode(&theirs.data) {
            Err(_) => assert_eq!(ours.err(), Some(AppendError::NotHex)),
            Ok(data) => {
                let ours = ours.expect("prost reads the body");
                assert_eq!(ours.request_id, theirs.request_id.unwrap_or_default().request_id);
                assert_eq!(ours.append_seqno, theirs.append_seqno);
                assert_eq!(&ours.data[..], &data[..]);
                assert_eq!(ours.data_binary, theirs.data_binary);
            }
        },
    }
});
