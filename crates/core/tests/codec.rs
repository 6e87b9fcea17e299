//! Connect framing: golden bytes of the protocol (docs/protocol.md), every flag and limit, and property tests
//! (random chunkings round-trip; arbitrary bytes never panic and never buffer past the limit).

use bytes::Bytes;
use cursor_acp_core::connect::*;
use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::proto::aiserver::v1 as ai;
use cursor_acp_core::wire::Pieces;
use proptest::prelude::*;
use prost::Message;

fn decode_all(dec: &mut FrameDecoder, bytes: &[u8]) -> Result<Vec<Frame>, FrameError> {
    dec.push(bytes);
    let mut out = Vec::new();
    while let Some(f) = dec.next_frame()? {
        out.push(f);
    }
    Ok(out)
}

#[test]
fn seed_heartbeat_frame_decodes_from_its_exact_bytes() {
    // A server heartbeat as Cursor sends it: flags 0x00, length 4, interaction_update.heartbeat.
    let wire = [0x00, 0x00, 0x00, 0x00, 0x04, 0x0a, 0x02, 0x6a, 0x00];
    let frames = decode_all(&mut FrameDecoder::default(), &wire).unwrap();
    let [Frame::Message(payload)] = frames.as_slice() else { panic!("{frames:?}") };
    let msg = pb::AgentServerMessage::decode(payload.clone()).unwrap();
    let Some(pb::agent_server_message::Message::InteractionUpdate(u)) = msg.message.clone() else { panic!() };
    assert!(matches!(u.message, Some(pb::interaction_update::Message::Heartbeat(_))));
    // And the encoder produces exactly those bytes.
    assert_eq!(&encode_message(&msg, false, 0)[..], &wire[..]);
}

#[test]
fn run_request_envelope_matches_hand_derived_bytes() {
    // AgentClientMessage.run_request = 1; AgentRunRequest.action = 2, .conversation_id = 5;
    // ConversationAction.user_message_action = 1; UserMessageAction.user_message = 1; UserMessage.text = 1.
    let msg = pb::AgentClientMessage {
        message: Some(pb::agent_client_message::Message::RunRequest(Box::new(pb::AgentRunRequest {
            conversation_id: Some("abc".into()),
            action: Some(pb::ConversationAction {
                action: Some(pb::conversation_action::Action::UserMessageAction(pb::UserMessageAction {
                    user_message: Some(pb::UserMessage { text: "hi".into(), ..Default::default() }),
                    ..Default::default()
                })),
                ..Default::default()
            }),
            ..Default::default()
        }))),
    };
    #[rustfmt::skip]
    let expected = [
        0x00, 0x00, 0x00, 0x00, 0x11,             // envelope: flags, length 17
        0x0a, 0x0f,                               // run_request (1), 15 bytes
        0x12, 0x08,                               //   action (2), 8 bytes
        0x0a, 0x06,                               //     user_message_action (1), 6 bytes
        0x0a, 0x04,                               //       user_message (1), 4 bytes
        0x0a, 0x02, b'h', b'i',                   //         text (1) "hi"
        0x2a, 0x03, b'a', b'b', b'c',             //   conversation_id (5) "abc"
    ];
    assert_eq!(&encode_message(&msg, false, 0)[..], &expected[..]);
}

#[test]
fn bidi_append_body_matches_hand_derived_bytes() {
    // client_heartbeat = 7 (empty) → 3a 00 → hex "3a00"; BidiAppendRequest data = 1, request_id = 2,
    // append_seqno = 3; BidiRequestId.request_id = 1.
    let heartbeat = pb::AgentClientMessage {
        message: Some(pb::agent_client_message::Message::ClientHeartbeat(pb::ClientHeartbeat {})),
    };
    assert_eq!(hex::encode(heartbeat.encode_to_vec()), "3a00");
    let append = ai::BidiAppendRequest {
        data: hex::encode(heartbeat.encode_to_vec()),
        request_id: Some(ai::BidiRequestId { request_id: "r1".into() }),
        append_seqno: 3,
        data_binary: Bytes::new(),
    };
    #[rustfmt::skip]
    let expected = [
        0x0a, 0x04, b'3', b'a', b'0', b'0',       // data (1) "3a00"
        0x12, 0x04, 0x0a, 0x02, b'r', b'1',       // request_id (2) { request_id (1) "r1" }
        0x18, 0x03,                               // append_seqno (3) = 3
    ];
    assert_eq!(append.encode_to_vec(), expected);
    // data_binary is field 4, bytes.
    let binary = ai::BidiAppendRequest { data_binary: Bytes::from_static(&[0x3a, 0x00]), ..Default::default() };
    assert_eq!(binary.encode_to_vec(), [0x22, 0x02, 0x3a, 0x00]);
}

/// A decoder for a stream whose headers agreed on gzip.
fn gzip_decoder(limits: Limits) -> FrameDecoder {
    let mut decoder = FrameDecoder::new(limits);
    decoder.set_encoding(Encoding::Gzip);
    decoder
}

#[test]
fn gzip_frames_decompress() {
    let payload = vec![b'x'; 10_000];
    let frame = encode_frame(FLAG_COMPRESSED, &gzip(&payload));
    let frames = decode_all(&mut gzip_decoder(Limits::default()), &frame).unwrap();
    assert_eq!(frames, vec![Frame::Message(Bytes::from(payload))]);
}

#[test]
fn a_compressed_frame_needs_an_agreed_encoding() {
    let message = encode_frame(FLAG_COMPRESSED, &gzip(b"\x3a\x00"));
    let end = encode_frame(FLAG_END_STREAM | FLAG_COMPRESSED, &gzip(b"{}"));
    for (frame, flags) in [(&message, FLAG_COMPRESSED), (&end, FLAG_END_STREAM | FLAG_COMPRESSED)] {
        let err = decode_all(&mut FrameDecoder::default(), frame).unwrap_err();
        assert_eq!(err, FrameError::CompressedWithoutEncoding { flags });
        let mut brotli = FrameDecoder::default();
        brotli.set_encoding(Encoding::from_header(Some("br")));
        assert_eq!(decode_all(&mut brotli, frame).unwrap_err(), FrameError::UnsupportedEncoding("br".into()));
    }
    // Uncompressed frames need none, whatever was agreed.
    assert_eq!(decode_all(&mut gzip_decoder(Limits::default()), &encode_frame(0, b"\x3a\x00")).unwrap().len(), 1);
    assert_eq!(Encoding::from_header(None), Encoding::Identity);
    assert_eq!(Encoding::from_header(Some("identity")), Encoding::Identity);
    assert_eq!(Encoding::from_header(Some(" GZIP ")), Encoding::Gzip);
}

/// A message of `sizes` pieces, each filled with its own byte.
fn pieces_of(sizes: &[usize]) -> Pieces {
    let mut pieces = Pieces::default();
    for (i, &size) in sizes.iter().enumerate() {
        pieces.push(Bytes::from(vec![i as u8; size]));
    }
    pieces
}

#[test]
fn a_frame_in_pieces_is_the_frame_of_the_joined_message_and_large_pieces_are_not_copied() {
    let big = 64 * 1024;
    for sizes in [vec![], vec![3], vec![3, 9, 1], vec![7, big, 2], vec![big + 1, 5, big, 4], vec![big, big * 3]] {
        let pieces = pieces_of(&sizes);
        let large: Vec<*const u8> = pieces.chunks().iter().filter(|c| c.len() >= big).map(|c| c.as_ptr()).collect();
        let joined = pieces.clone().into_bytes();
        for flags in [0, FLAG_COMPRESSED] {
            let frame = encode_frame_pieces(flags, pieces.clone());
            assert_eq!(frame.concat(), encode_frame(flags, &joined)[..], "{sizes:?}");
            let passed: Vec<*const u8> = frame.iter().filter(|c| c.len() >= big).map(|c| c.as_ptr()).collect();
            assert_eq!(passed, large, "{sizes:?}: large pieces go out as they are");
            // Small neighbours share one buffer: never two small buffers in a row.
            assert!(frame.windows(2).all(|w| w[0].len() >= big || w[1].len() >= big), "{sizes:?}");
        }
    }
    assert_eq!(encode_frame_pieces(0, pieces_of(&[3, 9, 1])).len(), 1, "a small message is one buffer");
}

#[test]
fn gzip_of_pieces_decompresses_to_the_joined_message() {
    let pieces = pieces_of(&[10, 70_000, 3, 100_000]);
    let compressed = gzip_pieces(&pieces);
    assert!(compressed.len() < 2_000, "runs of one byte compress");
    let frames = decode_all(&mut gzip_decoder(Limits::default()), &encode_frame(FLAG_COMPRESSED, &compressed)).unwrap();
    assert_eq!(frames, vec![Frame::Message(pieces.into_bytes())]);
}

#[test]
fn end_stream_empty_object_is_a_clean_end() {
    let frames = decode_all(&mut FrameDecoder::default(), &encode_end_stream(None)).unwrap();
    assert_eq!(frames, vec![Frame::End(EndStream::default())]);
}

#[test]
fn end_stream_error_is_typed_with_cursor_details() {
    let details = ai::ErrorDetails {
        error: ai::error_details::Error::MaxTokens as i32,
        details: Some(ai::CustomErrorDetails {
            title: "Too long".into(),
            is_retryable: Some(false),
            ..Default::default()
        }),
        is_expected: Some(true),
    };
    let b64 = base64_nopad(&details.encode_to_vec());
    let json = serde_json::json!({
        "error": {
            "code": "resource_exhausted",
            "message": "out%20of tokens",
            "details": [{ "type": "aiserver.v1.ErrorDetails", "value": b64, "debug": { "error": "ERROR_MAX_TOKENS" } }]
        },
        "metadata": { "X-Trace": ["t1"] }
    });
    let frame = encode_frame(FLAG_END_STREAM, json.to_string().as_bytes());
    let frames = decode_all(&mut FrameDecoder::default(), &frame).unwrap();
    let [Frame::End(end)] = frames.as_slice() else { panic!() };
    let err = end.error.as_ref().unwrap();
    assert_eq!(err.code, Code::ResourceExhausted);
    assert_eq!(err.message, "out of tokens");
    assert_eq!(err.cursor_details().unwrap(), details);
    assert_eq!(err.cursor_error_name(), Some("ERROR_MAX_TOKENS"));
    assert_eq!(end.metadata.get("x-trace").unwrap(), &vec!["t1".to_string()]);
    assert!(err.to_string().contains("resource_exhausted") && err.to_string().contains("ERROR_MAX_TOKENS"));
}

fn base64_nopad(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD_NO_PAD.encode(b)
}

#[test]
fn compressed_end_stream_is_accepted() {
    let frame = encode_frame(FLAG_END_STREAM | FLAG_COMPRESSED, &gzip(b"{}"));
    assert_eq!(
        decode_all(&mut gzip_decoder(Limits::default()), &frame).unwrap(),
        vec![Frame::End(EndStream::default())]
    );
}

#[test]
fn malformed_end_stream_is_a_typed_error() {
    for bad in [&b"not json"[..], b"[]", br#"{"error":{"code":5}}"#, br#"{"error":{"details":[{"value":"AA"}]}}"#] {
        let err = decode_all(&mut FrameDecoder::default(), &encode_frame(FLAG_END_STREAM, bad)).unwrap_err();
        assert!(matches!(err, FrameError::BadEndStream(_)), "{bad:?} → {err:?}");
    }
}

#[test]
fn every_reserved_flag_bit_is_rejected() {
    for bit in 2..8 {
        let flags = 1u8 << bit;
        let err = decode_all(&mut FrameDecoder::default(), &encode_frame(flags, b"")).unwrap_err();
        assert_eq!(err, FrameError::ReservedFlags { flags });
    }
}

#[test]
fn oversize_frame_is_rejected_from_the_header_alone() {
    let mut dec = FrameDecoder::new(Limits::uniform(1024));
    // Only the header: the decoder must not wait for (or buffer) the payload.
    let err = decode_all(&mut dec, &[0x00, 0x00, 0x00, 0x04, 0x01]).unwrap_err();
    assert_eq!(err, FrameError::FrameTooLarge { len: 1025, max: 1024 });
    // Exactly at the limit is fine.
    let ok = encode_frame(0, &[7u8; 1024]);
    assert_eq!(decode_all(&mut FrameDecoder::new(Limits::uniform(1024)), &ok).unwrap().len(), 1);
}

#[test]
fn default_limit_is_16_mib() {
    assert_eq!(Limits::default().max_frame, 16 * 1024 * 1024);
    let header = [0x00, 0x01, 0x00, 0x00, 0x01]; // 16 MiB + 1
    assert!(matches!(
        decode_all(&mut FrameDecoder::default(), &header),
        Err(FrameError::FrameTooLarge { len: 16_777_217, .. })
    ));
}

#[test]
fn gzip_bomb_is_capped() {
    let bomb = gzip(&vec![0u8; 5 * 1024 * 1024]);
    assert!(bomb.len() < 64 * 1024);
    let mut dec = gzip_decoder(Limits { max_frame: 1 << 20, max_decompressed: 1 << 20 });
    let err = decode_all(&mut dec, &encode_frame(FLAG_COMPRESSED, &bomb)).unwrap_err();
    assert_eq!(err, FrameError::DecompressedTooLarge { max: 1 << 20 });
}

#[test]
fn corrupt_gzip_is_a_typed_error() {
    let err = decode_all(&mut gzip_decoder(Limits::default()), &encode_frame(FLAG_COMPRESSED, b"definitely not gzip"))
        .unwrap_err();
    assert!(matches!(err, FrameError::BadGzip(_)), "{err:?}");
}

#[test]
fn bytes_after_end_stream_are_rejected() {
    let mut wire = encode_end_stream(None).to_vec();
    wire.extend_from_slice(&encode_frame(0, b"\x3a\x00"));
    let err = decode_all(&mut FrameDecoder::default(), &wire).unwrap_err();
    assert!(matches!(err, FrameError::DataAfterEndStream(_)), "{err:?}");
    // Also when they arrive in a later chunk.
    let mut dec = FrameDecoder::default();
    assert_eq!(decode_all(&mut dec, &encode_end_stream(None)).unwrap().len(), 1);
    assert!(matches!(decode_all(&mut dec, &[0]), Err(FrameError::DataAfterEndStream(1))));
    assert!(dec.finish().is_err());
}

#[test]
fn truncated_stream_is_reported_at_finish() {
    let frame = encode_frame(0, b"hello");
    let mut dec = FrameDecoder::default();
    assert!(decode_all(&mut dec, &frame[..7]).unwrap().is_empty());
    assert_eq!(dec.finish(), Err(FrameError::Truncated { buffered: 7, expected: 10 }));
    let mut dec = FrameDecoder::default();
    decode_all(&mut dec, &frame[..3]).unwrap();
    assert_eq!(dec.finish(), Err(FrameError::Truncated { buffered: 3, expected: 5 }));
}

#[test]
fn http_errors_prefer_the_connect_body() {
    let err = ConnectError::from_http(429, br#"{"code":"resource_exhausted","message":"slow down"}"#);
    assert_eq!((err.code, err.message.as_str(), err.http_status), (Code::ResourceExhausted, "slow down", Some(429)));
    let err = ConnectError::from_http(503, b"<html>bad gateway</html>");
    assert_eq!(err.code, Code::Unavailable);
    assert!(err.message.contains("503"));
    assert_eq!(ConnectError::from_http(401, b"").code, Code::Unauthenticated);
}

fn arb_frames() -> impl Strategy<Value = Vec<(bool, Vec<u8>)>> {
    prop::collection::vec((any::<bool>(), prop::collection::vec(any::<u8>(), 0..300)), 0..12)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Whatever the chunking, the decoder yields exactly the frames that were encoded.
    #[test]
    fn round_trip_under_random_chunking(frames in arb_frames(), cuts in prop::collection::vec(any::<usize>(), 0..40), end in any::<bool>()) {
        let mut wire = Vec::new();
        for (compress, payload) in &frames {
            let f = if *compress { encode_frame(FLAG_COMPRESSED, &gzip(payload)) } else { encode_frame(0, payload) };
            wire.extend_from_slice(&f);
        }
        if end {
            wire.extend_from_slice(&encode_end_stream(None));
        }
        let mut points: Vec<usize> = cuts.iter().map(|c| if wire.is_empty() { 0 } else { c % wire.len() }).collect();
        points.push(0);
        points.push(wire.len());
        points.sort_unstable();
        let mut dec = gzip_decoder(Limits::default());
        let mut got = Vec::new();
        for pair in points.windows(2) {
            got.extend(decode_all(&mut dec, &wire[pair[0]..pair[1]]).unwrap());
        }
        prop_assert!(dec.finish().is_ok());
        let mut expected: Vec<Frame> = frames.iter().map(|(_, p)| Frame::Message(Bytes::from(p.clone()))).collect();
        if end {
            expected.push(Frame::End(EndStream::default()));
        }
        prop_assert_eq!(got, expected);
    }

    /// Arbitrary bytes: never a panic, and buffering never exceeds one frame's limit.
    #[test]
    fn arbitrary_bytes_never_panic(chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 0..20)) {
        let limits = Limits::uniform(4096);
        let mut dec = gzip_decoder(limits);
        'outer: for chunk in &chunks {
            dec.push(chunk);
            loop {
                match dec.next_frame() {
                    Ok(Some(Frame::Message(p))) => {
                        prop_assert!(p.len() <= limits.max_decompressed);
                        #[allow(
                            clippy::let_underscore_must_use,
                            reason = "the property is that decoding never panics, whatever it returns"
                        )]
                        let _ = pb::AgentServerMessage::decode(p);
                    }
                    Ok(Some(Frame::End(_))) => {}
                    Ok(None) => break,
                    Err(_) => break 'outer,
                }
            }
            prop_assert!(dec.buffered() <= limits.max_frame + HEADER_LEN + 200);
        }
        #[allow(
            clippy::let_underscore_must_use,
            reason = "the property is that finishing never panics, whatever it returns"
        )]
        let _ = dec.finish();
    }
}
