//! The embedded backend reads a BidiAppend body exactly as prost reads a `BidiAppendRequest`:
//! the same bodies accepted and refused, and the same request id, seqno and payload read from
//! the accepted ones, however the body is split across reads. Each case the differential test
//! found has a test of its own, and the backend's answer over HTTP is checked for two of them.

use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::proto::aiserver::v1::{BidiAppendRequest, BidiRequestId};
use cursor_acp_core::transport::BIDI_APPEND_PATH;
use cursor_acp_embedded::{Append, AppendError, AppendReader, EmbeddedBackend, Scenario};
use proptest::prelude::*;
use prost::encoding::{encode_key, encode_varint, WireType};
use prost::Message as _;

const MAX: usize = 1 << 20;

fn read(body: &[u8], splits: &[usize]) -> Result<Append, AppendError> {
    let mut reader = AppendReader::new(MAX, false);
    let mut rest = body;
    for &at in splits {
        let (piece, tail) = rest.split_at(at.min(rest.len()));
        reader.push(piece)?;
        rest = tail;
    }
    reader.push(rest)?;
    reader.finish()
}

/// Asserts that the reader agrees with prost on `body` split at `splits`; whether it accepted.
fn agrees(body: &[u8], splits: &[usize]) -> bool {
    let ours = read(body, splits);
    match BidiAppendRequest::decode(body) {
        Err(e) => {
            assert!(ours.is_err(), "prost refuses ({e}) what the reader accepts: {body:02x?} {ours:?}");
            false
        }
        Ok(theirs) => match hex::decode(&theirs.data) {
            Err(_) => {
                assert_eq!(ours.err(), Some(AppendError::NotHex), "{body:02x?}");
                false
            }
            Ok(data) => {
                let ours = ours.unwrap_or_else(|e| panic!("prost reads what the reader refuses ({e}): {body:02x?}"));
                let id = theirs.request_id.unwrap_or_default().request_id;
                assert_eq!(ours.request_id, id, "{body:02x?}");
                assert_eq!(ours.append_seqno, theirs.append_seqno, "{body:02x?}");
                assert_eq!(&ours.data[..], &data[..], "{body:02x?}");
                assert_eq!(ours.data_binary, theirs.data_binary, "{body:02x?}");
                true
            }
        },
    }
}

fn key(out: &mut Vec<u8>, field: u32, wire_type: WireType) {
    encode_key(field, wire_type, out);
}

fn length_delimited(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    key(out, field, WireType::LengthDelimited);
    encode_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

fn request_id(id: &str) -> Vec<u8> {
    BidiRequestId { request_id: id.into() }.encode_to_vec()
}

fn valid_body() -> Vec<u8> {
    BidiAppendRequest {
        data: hex::encode(b"payload"),
        request_id: Some(BidiRequestId { request_id: "r-1".into() }),
        append_seqno: 7,
        data_binary: bytes::Bytes::from_static(b"\x01\x02"),
    }
    .encode_to_vec()
}

#[test]
fn an_unknown_group_is_skipped_as_prost_skips_it() {
    let mut body = valid_body();
    // Field 9 as a group holding a varint, a string and a nested group.
    key(&mut body, 9, WireType::StartGroup);
    key(&mut body, 1, WireType::Varint);
    body.push(5);
    length_delimited(&mut body, 2, b"abc");
    key(&mut body, 3, WireType::StartGroup);
    key(&mut body, 3, WireType::EndGroup);
    key(&mut body, 9, WireType::EndGroup);
    assert!(agrees(&body, &[]));
    assert!(agrees(&body, &[body.len() - 3, body.len() - 1]));
    // Known field numbers inside a group are not the request's fields.
    let mut inside = valid_body();
    key(&mut inside, 9, WireType::StartGroup);
    length_delimited(&mut inside, 2, &request_id("not-this"));
    key(&mut inside, 3, WireType::Varint);
    inside.push(1);
    key(&mut inside, 9, WireType::EndGroup);
    assert!(agrees(&inside, &[3]));
    assert_eq!(read(&inside, &[]).unwrap().request_id, "r-1");
    // An end that does not match, and a group left open, are refused by both.
    let mut mismatched = valid_body();
    key(&mut mismatched, 9, WireType::StartGroup);
    key(&mut mismatched, 8, WireType::EndGroup);
    assert!(!agrees(&mismatched, &[]));
    let mut open = valid_body();
    key(&mut open, 9, WireType::StartGroup);
    assert!(!agrees(&open, &[]));
}

#[test]
fn groups_nest_as_deep_as_prost_lets_them() {
    for depth in [99, 100, 101] {
        let mut body = valid_body();
        (0..depth).for_each(|_| key(&mut body, 9, WireType::StartGroup));
        (0..depth).for_each(|_| key(&mut body, 9, WireType::EndGroup));
        assert_eq!(agrees(&body, &[]), depth <= 100, "{depth} nested groups");
    }
}

#[test]
fn a_known_field_in_another_wire_type_is_refused() {
    let cases: [(u32, WireType); 6] = [
        (1, WireType::Varint),
        (2, WireType::SixtyFourBit),
        (3, WireType::LengthDelimited),
        (3, WireType::ThirtyTwoBit),
        (4, WireType::Varint),
        (1, WireType::StartGroup),
    ];
    for (field, wire_type) in cases {
        let mut body = valid_body();
        key(&mut body, field, wire_type);
        match wire_type {
            WireType::Varint => body.push(1),
            WireType::SixtyFourBit => body.extend([0; 8]),
            WireType::ThirtyTwoBit => body.extend([0; 4]),
            WireType::LengthDelimited => body.extend([1, 0x30]),
            _ => key(&mut body, field, WireType::EndGroup),
        }
        assert!(!agrees(&body, &[]), "field {field} as {wire_type:?}");
        let err = read(&body, &[]).unwrap_err().to_string();
        assert!(err.contains(&format!("field {field} has wire type")), "{err}");
    }
}

#[test]
fn a_repeated_request_id_is_merged_as_prost_merges_a_message() {
    // The second one is empty, or carries only an unknown field: the id of the first stays.
    let mut empty = valid_body();
    length_delimited(&mut empty, 2, b"");
    assert!(agrees(&empty, &[]));
    assert_eq!(read(&empty, &[]).unwrap().request_id, "r-1");
    let mut unknown = valid_body();
    length_delimited(&mut unknown, 2, &[0x10, 0x01]);
    assert!(agrees(&unknown, &[unknown.len() - 1]));
    assert_eq!(read(&unknown, &[]).unwrap().request_id, "r-1");
    // A later id replaces it; a malformed one refuses the body.
    let mut later = valid_body();
    length_delimited(&mut later, 2, &request_id("r-2"));
    assert!(agrees(&later, &[]));
    assert_eq!(read(&later, &[]).unwrap().request_id, "r-2");
    let mut malformed = valid_body();
    length_delimited(&mut malformed, 2, &[0x0a, 0x05, b'x']);
    assert!(!agrees(&malformed, &[]));
}

#[test]
fn data_that_is_not_hex_is_refused_only_if_a_later_data_does_not_replace_it() {
    // prost reads the last `data`: hex after text that is not is a valid body.
    let mut replaced = Vec::new();
    length_delimited(&mut replaced, 1, b"2?6f");
    replaced.extend(valid_body());
    assert!(agrees(&replaced, &[]));
    assert!(agrees(&replaced, &[3]));
    assert_eq!(&read(&replaced, &[2]).unwrap().data[..], b"payload");
    // Not UTF-8 is refused by prost even when replaced; an odd count of hex digits is not hex.
    let mut not_utf8 = Vec::new();
    length_delimited(&mut not_utf8, 1, b"ab\xc3");
    not_utf8.extend(valid_body());
    assert!(!agrees(&not_utf8, &[]));
    let mut odd = valid_body();
    length_delimited(&mut odd, 1, b"abc");
    assert!(!agrees(&odd, &[]));
    assert_eq!(read(&odd, &[]).unwrap_err(), AppendError::NotHex);
}

#[test]
fn keys_and_varints_are_judged_by_prost() {
    // A tenth varint byte that overflows 64 bits, field 0, a key beyond 32 bits, wire type 7.
    let overflowing_seqno = [0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
    let field_zero = [0x00, 0x01];
    let wide_key = [0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x00];
    let wire_seven = [0x0f];
    for body in [&overflowing_seqno[..], &field_zero, &wide_key, &wire_seven] {
        assert!(!agrees(body, &[]), "{body:02x?}");
        assert!(!agrees(body, &[1]), "{body:02x?}");
    }
    // The largest seqno is read as prost reads it.
    let mut max = vec![0x18];
    encode_varint(u64::MAX, &mut max);
    assert!(agrees(&max, &[4]));
}

/// A field of a generated body: the request's own, in their wire types or not, and unknown
/// ones of every wire type.
fn field() -> impl Strategy<Value = Vec<u8>> {
    let hex_data = prop::collection::vec(any::<u8>(), 0..12).prop_map(|b| hex::encode(b).into_bytes());
    let text = prop::collection::vec(prop::sample::select(b"0123456789abcdefABXYZ \xc3\xa9\xff".to_vec()), 0..12);
    let id = "[a-z0-9-]{0,8}".prop_map(|s| request_id(&s));
    let bytes = prop::collection::vec(any::<u8>(), 0..10);
    let wire = prop::sample::select(vec![
        WireType::Varint,
        WireType::SixtyFourBit,
        WireType::LengthDelimited,
        WireType::StartGroup,
        WireType::EndGroup,
        WireType::ThirtyTwoBit,
    ]);
    prop_oneof![
        4 => prop_oneof![hex_data, text].prop_map(|d| { let mut f = Vec::new(); length_delimited(&mut f, 1, &d); f }),
        3 => prop_oneof![id, bytes.clone()].prop_map(|d| { let mut f = Vec::new(); length_delimited(&mut f, 2, &d); f }),
        2 => any::<u64>().prop_map(|v| { let mut f = vec![0x18]; encode_varint(v, &mut f); f }),
        2 => bytes.clone().prop_map(|d| { let mut f = Vec::new(); length_delimited(&mut f, 4, &d); f }),
        3 => (1u32..12, wire, bytes).prop_map(|(field, wire_type, payload)| {
            let mut f = Vec::new();
            key(&mut f, field, wire_type);
            match wire_type {
                WireType::Varint => encode_varint(payload.len() as u64 * 1000, &mut f),
                WireType::SixtyFourBit => f.extend([7; 8]),
                WireType::ThirtyTwoBit => f.extend([7; 4]),
                WireType::LengthDelimited => { encode_varint(payload.len() as u64, &mut f); f.extend(&payload) }
                WireType::StartGroup => { f.extend(&payload); key(&mut f, field, WireType::EndGroup) }
                WireType::EndGroup => {}
            }
            f
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Generated bodies, some corrupted by a byte, some cut short, split at random points.
    #[test]
    fn the_reader_reads_what_prost_reads(
        fields in prop::collection::vec(field(), 0..8),
        corrupt in prop::option::of((any::<prop::sample::Index>(), any::<u8>())),
        cut in prop::option::of(any::<prop::sample::Index>()),
        splits in prop::collection::vec(0usize..16, 0..4),
    ) {
        let mut body: Vec<u8> = fields.concat();
        if let (Some((at, byte)), false) = (corrupt, body.is_empty()) {
            let at = at.index(body.len());
            body[at] = byte;
        }
        if let (Some(at), false) = (cut, body.is_empty()) {
            body.truncate(at.index(body.len()));
        }
        agrees(&body, &splits);
    }
}

/// Over HTTP: the backend answers `invalid_argument` for a body prost refuses, and takes a body
/// with an unknown group, which prost reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_answers_as_prost_reads_the_body() {
    let scenario = serde_json::json!({ "steps": [{ "type": "turnEnded" }] });
    let b = EmbeddedBackend::start(Scenario::from_json(&scenario).unwrap()).await.unwrap();
    let url = format!("{}{BIDI_APPEND_PATH}", b.url());
    #[allow(
        clippy::let_underscore_must_use,
        reason = "another test of this binary may have installed the provider first"
    )]
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let heartbeat = pb::AgentClientMessage {
        message: Some(pb::agent_client_message::Message::ClientHeartbeat(Default::default())),
    };
    let body = |seqno: i64| {
        BidiAppendRequest {
            data: hex::encode(heartbeat.encode_to_vec()),
            request_id: Some(BidiRequestId { request_id: "r-http".into() }),
            append_seqno: seqno,
            ..Default::default()
        }
        .encode_to_vec()
    };
    let mut grouped = body(0);
    key(&mut grouped, 9, WireType::StartGroup);
    key(&mut grouped, 9, WireType::EndGroup);
    let response = http.post(&url).body(grouped).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200, "{:?}", response.text().await);
    let mut seqno_as_string = body(1);
    length_delimited(&mut seqno_as_string, 3, b"1");
    let response = http.post(&url).body(seqno_as_string).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let text = response.text().await.unwrap();
    assert!(text.contains("invalid_argument") && text.contains("field 3 has wire type"), "{text}");
}
