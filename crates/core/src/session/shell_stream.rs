//! A streaming shell's events (`shell_stream_args`): `start` once the process has started,
//! output as it comes, and an ending read from the host's final `ShellResult`: `exit` for a
//! process that ran, `backgrounded` for one that went on in the background, `rejected` or
//! `permission_denied` for one that never started, nothing for a spawn error.

use crate::proto::agent::v1 as pb;
use crate::wire::Pieces;

/// How the final `ShellResult` says the command went, for the events that precede it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Ending {
    /// It ran and exited (`success` or `failure`).
    Exited {
        code: i32,
        aborted: bool,
    },
    /// It ran until its timeout killed it.
    TimedOut,
    /// It runs on in the background (`is_background` with a `success`).
    Backgrounded(pb::ShellStreamBackgrounded),
    /// The host refused to run it (a permission prompt answered "Reject", a path outside the
    /// workspace).
    Rejected(pb::ShellRejected),
    PermissionDenied(pb::ShellPermissionDenied),
    /// It never started: a spawn error, or a result with no branch.
    NeverStarted,
}

/// Reads the ending from the `AgentClientMessage` carrying the final `ShellResult`, through
/// views of the few fields needed, so the captured output (possibly megabytes, already
/// streamed) is skipped rather than joined and copied.
pub(super) fn ending(client_message: &Pieces) -> Ending {
    use view::Outcome;
    let Ok(message) = <view::ClientMessage as prost::Message>::decode(client_message.reader()) else {
        return Ending::NeverStarted;
    };
    let Some(result) = message.exec.and_then(|e| e.shell_result) else { return Ending::NeverStarted };
    match result.outcome {
        Some(Outcome::Success(s)) if result.is_background == Some(true) || s.shell_id.is_some() => {
            Ending::Backgrounded(pb::ShellStreamBackgrounded {
                shell_id: s.shell_id.unwrap_or_default(),
                command: s.command,
                working_directory: s.working_directory,
                pid: s.pid.or(result.pid),
                ms_to_wait: s.ms_to_wait,
                reason: s.background_reason,
            })
        }
        Some(Outcome::Success(s)) => Ending::Exited { code: s.exit_code, aborted: false },
        Some(Outcome::Failure(f)) => Ending::Exited { code: f.exit_code, aborted: f.aborted },
        Some(Outcome::Timeout(_)) => Ending::TimedOut,
        Some(Outcome::Rejected(r)) => Ending::Rejected(r),
        Some(Outcome::PermissionDenied(p)) => Ending::PermissionDenied(p),
        Some(Outcome::SpawnError(_)) | None => Ending::NeverStarted,
    }
}

/// Partial views of `AgentClientMessage.exec_client_message` → `ExecClientMessage.shell_result`
/// → `ShellResult`: the output fields skipped. prost's derive takes only literal tags;
/// `the_views_use_the_schemas_numbers` checks them against [`crate::field`].
mod view {
    use crate::proto::agent::v1 as pb;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ClientMessage {
        #[prost(message, optional, tag = "2")]
        pub exec: Option<ExecClientMessage>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ExecClientMessage {
        #[prost(message, optional, tag = "2")]
        pub shell_result: Option<ShellResult>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ShellResult {
        #[prost(oneof = "Outcome", tags = "1, 2, 3, 4, 5, 7")]
        pub outcome: Option<Outcome>,
        #[prost(bool, optional, tag = "102")]
        pub is_background: Option<bool>,
        #[prost(uint32, optional, tag = "104")]
        pub pid: Option<u32>,
    }

    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Outcome {
        #[prost(message, tag = "1")]
        Success(Success),
        #[prost(message, tag = "2")]
        Failure(Failure),
        #[prost(message, tag = "3")]
        Timeout(pb::ShellTimeout),
        #[prost(message, tag = "4")]
        Rejected(pb::ShellRejected),
        #[prost(message, tag = "5")]
        SpawnError(pb::ShellSpawnError),
        #[prost(message, tag = "7")]
        PermissionDenied(pb::ShellPermissionDenied),
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Success {
        #[prost(string, tag = "1")]
        pub command: String,
        #[prost(string, tag = "2")]
        pub working_directory: String,
        #[prost(int32, tag = "3")]
        pub exit_code: i32,
        #[prost(uint32, optional, tag = "9")]
        pub shell_id: Option<u32>,
        #[prost(uint32, optional, tag = "11")]
        pub pid: Option<u32>,
        #[prost(int32, optional, tag = "12")]
        pub ms_to_wait: Option<i32>,
        #[prost(enumeration = "pb::ShellBackgroundReason", optional, tag = "14")]
        pub background_reason: Option<i32>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Failure {
        #[prost(int32, tag = "3")]
        pub exit_code: i32,
        #[prost(bool, tag = "11")]
        pub aborted: bool,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::{self, ReplyExtras};
    use crate::host::ExecRequest;
    use crate::proto::agent::v1 as pb;
    use bytes::Bytes;
    use prost::Message as _;

    fn shell_stream_request() -> ExecRequest {
        let raw = pb::ExecServerMessage {
            id: 7,
            exec_id: "e7".into(),
            message: Some(pb::exec_server_message::Message::ShellStreamArgs(pb::ShellArgs {
                command: "make".into(),
                ..Default::default()
            })),
            ..Default::default()
        }
        .encode_to_vec();
        bridge::decode_exec(&raw).unwrap().2.unwrap()
    }

    fn ending_of(json: serde_json::Value) -> Ending {
        ending(&bridge::exec_result(&shell_stream_request(), json, &ReplyExtras::NONE).unwrap())
    }

    #[test]
    fn the_ending_is_read_from_the_result_without_the_output() {
        let stdout = "log line\n".repeat(100_000);
        let pieces = bridge::exec_result(
            &shell_stream_request(),
            serde_json::json!({"success": {"exitCode": 3, "stdout": stdout, "stderr": "w"}}),
            &ReplyExtras::NONE,
        )
        .unwrap();
        // The output is a piece of its own, and the exit code sits in another.
        assert!(pieces.chunks().len() > 1);
        assert_eq!(ending(&pieces), Ending::Exited { code: 3, aborted: false });
        assert_eq!(
            ending_of(serde_json::json!({"success": {"stdout": stdout}})),
            Ending::Exited { code: 0, aborted: false }
        );
        assert_eq!(
            ending_of(serde_json::json!({"failure": {"exitCode": 130, "aborted": true, "stdout": stdout}})),
            Ending::Exited { code: 130, aborted: true }
        );
        assert_eq!(ending_of(serde_json::json!({"timeout": {"command": "make", "timeoutMs": 5}})), Ending::TimedOut);
        assert_eq!(ending_of(serde_json::json!({"spawnError": {"error": "no such shell"}})), Ending::NeverStarted);
        assert_eq!(ending_of(serde_json::json!({})), Ending::NeverStarted);
        // Not a shell result, or not protobuf at all: never started, no panic.
        assert_eq!(ending(&Pieces::from(Bytes::from_static(&[0x12, 0x05, 0x00]))), Ending::NeverStarted);
        assert_eq!(ending(&Pieces::default()), Ending::NeverStarted);
    }

    #[test]
    fn refusals_and_background_shells_keep_what_their_events_need() {
        let rejected = ending_of(serde_json::json!({"rejected": {"command": "rm -rf /", "reason": "User rejected"}}));
        assert_eq!(
            rejected,
            Ending::Rejected(pb::ShellRejected {
                command: "rm -rf /".into(),
                reason: "User rejected".into(),
                ..Default::default()
            })
        );
        let denied = ending_of(serde_json::json!({"permissionDenied": {"command": "x", "error": "read-only"}}));
        assert!(matches!(denied, Ending::PermissionDenied(p) if p.error == "read-only"));
        let background = ending_of(serde_json::json!({"isBackground": true, "pid": 42, "success": {
            "command": "server", "workingDirectory": "/w", "shellId": 3, "backgroundReason": "SHELL_BACKGROUND_REASON_USER_REQUEST"
        }}));
        assert_eq!(
            background,
            Ending::Backgrounded(pb::ShellStreamBackgrounded {
                shell_id: 3,
                command: "server".into(),
                working_directory: "/w".into(),
                pid: Some(42),
                ms_to_wait: None,
                reason: Some(pb::ShellBackgroundReason::UserRequest as i32),
            })
        );
    }

    #[test]
    fn the_views_use_the_schemas_numbers() {
        use crate::field::agent::v1 as f;
        assert_eq!(f::agent_client_message::EXEC_CLIENT_MESSAGE, 2);
        assert_eq!(f::exec_client_message::SHELL_RESULT, 2);
        assert_eq!(
            (f::shell_result::SUCCESS, f::shell_result::FAILURE, f::shell_result::TIMEOUT, f::shell_result::REJECTED),
            (1, 2, 3, 4)
        );
        assert_eq!((f::shell_result::SPAWN_ERROR, f::shell_result::PERMISSION_DENIED), (5, 7));
        assert_eq!((f::shell_result::IS_BACKGROUND, f::shell_result::PID), (102, 104));
        assert_eq!(
            (f::shell_success::COMMAND, f::shell_success::WORKING_DIRECTORY, f::shell_success::EXIT_CODE),
            (1, 2, 3)
        );
        assert_eq!((f::shell_success::SHELL_ID, f::shell_success::PID, f::shell_success::MS_TO_WAIT), (9, 11, 12));
        assert_eq!(f::shell_success::BACKGROUND_REASON, 14);
        assert_eq!((f::shell_failure::EXIT_CODE, f::shell_failure::ABORTED), (3, 11));
    }
}
