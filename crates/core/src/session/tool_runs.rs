//! The client's built-in tools, run by the core for the exec requests its host leaves (see
//! [`super::AgentClient::with_tools`]). Which kind goes where is one exhaustive table,
//! [`route`]:
//!
//! - what only reads (listings, searches, reads, git diffs) runs at once; a read goes through
//!   the editor when the host reads through it (it may hold unsaved text);
//! - what changes things (writes, deletes, shells, fetches, MCP calls) runs once the host's
//!   permission policy allows it, asked about a card the client already shows: the server's
//!   tool call, or a card of the core's own when the exec came without one;
//! - the server's allowlist prechecks are answered from the same policy, which never asks then;
//! - MCP resources and conversation search go to the host's MCP client and its saved
//!   conversations.
//!
//! The host keeps what only it can do: the policy, the editor's file hooks, its MCP client and
//! its list of conversations. One exec crosses to the host at most for those.

use std::time::Duration;

use agent_client_protocol_schema::v1 as acp;
use serde_json::{json, Value};

use super::inner::{QuestionCard as Shown, SessionInner};
use crate::cards::{self, Card, Paths};
use crate::error::CoreError;
use crate::host::{ExecContext, ExecRequest, McpCall, Permission, PermissionRequest};
use crate::kinds::ExecKind;
use crate::tools::LocalTools;

/// What the model reads when the user refuses a call.
pub const REJECTED_BY_USER: &str = "User rejected";
/// What the model reads when the turn was cancelled while a call waited for the user.
pub const CANCELLED_BY_USER: &str = "The user cancelled the turn";

/// The most of a fetched page the model gets.
const FETCH_LIMIT_BYTES: usize = 1024 * 1024;
/// How long one fetch may take, connection included.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Who answers an exec kind, when the client has built-in tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// The tools, at once: it only reads.
    Run,
    /// The tools, with the text from the editor when the host reads through it.
    Read,
    /// The tools (or the web, or the host's MCP client) once the policy allows it.
    Gated,
    /// "Would the policy allow this without asking?"
    Precheck,
    /// The host's MCP client, without a question (listing and reading resources, state).
    McpResources,
    /// The host's saved conversations, searched here.
    ConversationSearch,
    /// Not the tools': the host's answer, this client's default, or throw.
    Elsewhere,
}

fn route(kind: ExecKind) -> Route {
    use ExecKind as K;
    match kind {
        K::Ls | K::Grep | K::PiRead | K::PiGrep | K::PiFind | K::PiLs | K::GitDiffRequest => Route::Run,
        // Writes to a shell the model started (and the user allowed) already.
        K::WriteShellStdin => Route::Run,
        K::Read => Route::Read,
        K::Write | K::Delete | K::PiWrite | K::PiEdit => Route::Gated,
        K::Shell | K::ShellStream | K::BackgroundShellSpawn | K::MiniSweAgentBash | K::PiBash => Route::Gated,
        K::Fetch | K::Mcp => Route::Gated,
        K::ShellAllowlistPrecheck | K::McpAllowlistPrecheck | K::WebFetchAllowlistPrecheck => Route::Precheck,
        K::ListMcpResources | K::ReadMcpResource | K::McpState => Route::McpResources,
        K::ConversationSearch => Route::ConversationSearch,
        // A redacted read names no file the client may open; the rest are the server's own
        // machinery or capabilities this client does not have.
        K::RedactedRead | K::RequestContext | K::Diagnostics | K::CanvasDiagnostics => Route::Elsewhere,
        K::RecordScreen | K::ComputerUse | K::ExecuteHook | K::Subagent | K::SubagentAwait => Route::Elsewhere,
        K::ForceBackgroundShell | K::ForceBackgroundSubagent | K::SmartModeClassifier => Route::Elsewhere,
        K::AgentStoreConflict => Route::Elsewhere,
    }
}

/// Runs `request` with the session's built-in tools: `Ok(None)` when the session has none or
/// the kind is not theirs.
pub(super) async fn run(
    session: &SessionInner,
    request: &ExecRequest,
    ctx: &ExecContext,
) -> Result<Option<Value>, CoreError> {
    let (Some(tools), Some(kind)) = (session.tools.as_ref(), request.exec_kind()) else { return Ok(None) };
    let run = ToolRun { session, tools, request, kind, ctx };
    match route(kind) {
        Route::Run => tools.run_kind(kind, &request.args, ctx).await,
        Route::Read => run.read().await.map(Some),
        Route::Gated => run.gated().await.map(Some),
        Route::Precheck => run.precheck().await.map(Some),
        Route::McpResources => run.mcp_resources().await,
        Route::ConversationSearch => run.search_conversations().await,
        Route::Elsewhere => Ok(None),
    }
}

/// One exec request on its way through the tools.
struct ToolRun<'a> {
    session: &'a SessionInner,
    tools: &'a LocalTools,
    request: &'a ExecRequest,
    kind: ExecKind,
    ctx: &'a ExecContext,
}

/// What a gated call is about: its card and what the policy is told.
struct Subject {
    card: Card,
    question: PermissionRequest,
    /// The args the tool runs with (an MCP call's resolved names are in the question).
    args: Value,
}

impl ToolRun<'_> {
    fn paths(&self) -> Paths {
        Paths::new(self.session.lock().cwd.as_deref())
    }

    fn text(&self, key: &str) -> String {
        self.request.args.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
    }

    /// The card the client shows for this call (see `SessionInner::card_for_question`).
    async fn show(&self, card: &Card) -> Option<Shown> {
        self.session.card_for_question(&self.text("toolCallId"), own_card_id(self.request), card).await
    }

    /// Ends a card of the core's own from the call's result (the server settles its cards).
    fn settle_own(&self, shown: &Shown, result: &Value) {
        if shown.own {
            let outcome = cards::exec_outcome(self.kind.name(), &self.request.args, result, &self.paths());
            self.settle(shown, outcome.fields());
        }
    }

    fn settle(&self, shown: &Shown, fields: acp::ToolCallUpdateFields) {
        self.session.settle_card(acp::ToolCallUpdate::new(shown.local.clone(), fields));
    }

    fn failed(&self, shown: &Shown, text: &str) {
        let content = vec![cards::text_content(text)];
        self.settle(shown, acp::ToolCallUpdateFields::new().status(acp::ToolCallStatus::Failed).content(content));
    }

    /// A read by the tools; when it is whole text and the host reads through the editor, the
    /// editor's text (it may hold unsaved changes) with the tools' checks and counts.
    async fn read(&self) -> Result<Value, CoreError> {
        let local = self.tools.run_kind(self.kind, &self.request.args, self.ctx).await?.unwrap_or(Value::Null);
        let host = &self.session.host;
        let Some(success) = local.get("success") else { return Ok(local) };
        let whole_text = success.get("content").is_some_and(Value::is_string)
            && !success.get("truncated").and_then(Value::as_bool).unwrap_or(false);
        let offset = self.request.args.get("offset").and_then(Value::as_i64).unwrap_or(0);
        if !whole_text || offset < 0 || !host.reads_through_editor() {
            return Ok(local);
        }
        let path = success.get("path").and_then(Value::as_str).map_or_else(|| self.text("path"), str::to_string);
        let mut args = self.request.args.clone();
        args["path"] = Value::String(path.clone());
        let Some(card) = cards::exec_card(self.kind.name(), &args, &self.paths(), None) else { return Ok(local) };
        let Some(shown) = self.show(&card).await else { return Ok(local) };
        let limit = self.request.args.get("limit").and_then(Value::as_u64).filter(|l| *l > 0);
        let line = u32::try_from(offset).ok().filter(|l| *l > 0);
        let answer = match host.editor_read(path, line, limit.map(|l| l.min(u32::MAX as u64) as u32)).await {
            Ok(Some(content)) => {
                let mut answer = local.clone();
                answer["success"]["content"] = Value::String(content);
                answer
            }
            Ok(None) => local,
            Err(e) => {
                tracing::debug!(error = %e, "the editor's read failed; the file on disk answers");
                local
            }
        };
        self.settle_own(&shown, &answer);
        Ok(answer)
    }

    /// A call that changes something: its card, the policy's answer, then the call.
    async fn gated(&self) -> Result<Value, CoreError> {
        let subject = match self.subject().await {
            Ok(subject) => subject,
            Err(answer) => return Ok(answer),
        };
        let Some(shown) = self.show(&subject.card).await else { return Ok(self.refused(CANCELLED_BY_USER)) };
        let mut question = subject.question;
        question.tool_call = cards::acp_json(&subject.card.tool_call(shown.id.clone(), acp::ToolCallStatus::Pending));
        match self.session.host.permission(question, self.ctx.cancel.clone()).await {
            Ok(Permission::Allow) => {}
            Ok(Permission::Reject(reason)) => {
                // The server's card too: the user's refusal is what the client shows of it.
                self.failed(&shown, "Rejected by the user");
                return Ok(self.refused(reason.as_deref().unwrap_or(REJECTED_BY_USER)));
            }
            Ok(Permission::Cancelled) => {
                if shown.own {
                    self.failed(&shown, "Cancelled by the user.");
                }
                return Ok(self.refused(CANCELLED_BY_USER));
            }
            Err(e) => {
                tracing::warn!(kind = self.kind.name(), error = %e, "the permission policy failed: the call is refused");
                if shown.own {
                    self.failed(&shown, "The permission check failed.");
                }
                return Ok(self.refused(&format!("The permission check failed: {e}")));
            }
        }
        let result = self.allowed(&subject.args).await?;
        self.settle_own(&shown, &result);
        Ok(result)
    }

    /// What a gated call is about, or the answer it gets without a question (a path outside
    /// the workspace, an MCP tool that does not exist).
    async fn subject(&self) -> Result<Subject, Value> {
        use ExecKind as K;
        let paths = self.paths();
        let mut args = self.request.args.clone();
        let mut question = PermissionRequest {
            tool_call: Value::Null,
            kind: String::new(),
            command: None,
            programs: Vec::new(),
            paths: Vec::new(),
            url: None,
            mcp: None,
            may_ask: true,
        };
        let mut previous_text = None;
        match self.kind {
            K::Write | K::Delete | K::PiWrite | K::PiEdit => {
                let path =
                    self.tools.workspace().resolve(&self.text("path")).map_err(|e| self.refused(&e.to_string()))?;
                let abs = path.display().to_string();
                let binary = self.kind == K::Write && !self.text("fileBytes").is_empty();
                if !binary {
                    previous_text = text_or_none(&path, self.tools.options().max_read_bytes);
                }
                args["path"] = Value::String(abs.clone());
                question.paths.push(abs);
            }
            K::Shell | K::ShellStream | K::BackgroundShellSpawn | K::MiniSweAgentBash | K::PiBash => {
                question.command = Some(self.text("command"));
                let dir = self.text("workingDirectory");
                if let Ok(abs) = self.tools.workspace().resolve(&dir) {
                    // The card names the folder it runs in; the tool resolves it again itself.
                    if !dir.is_empty() {
                        args["workingDirectory"] = Value::String(abs.display().to_string());
                    }
                }
            }
            K::Fetch => question.url = Some(self.text("url")),
            K::Mcp => {
                let (server, tool) = self.mcp_target().await?;
                args["providerIdentifier"] = Value::String(server.clone());
                args["toolName"] = Value::String(tool.clone());
                question.mcp = Some((server, tool));
            }
            _ => {}
        }
        let card = cards::exec_card(self.kind.name(), &args, &paths, previous_text.as_deref())
            .unwrap_or_else(|| cards::tool_card(self.kind.name(), &args, &paths));
        question.kind = acp_json_name(&card.kind);
        // The tool itself runs with the args as the server sent them.
        let args = if self.kind == K::Mcp { args } else { self.request.args.clone() };
        Ok(Subject { card, question, args })
    }

    /// Runs a call the policy allowed.
    async fn allowed(&self, args: &Value) -> Result<Value, CoreError> {
        use ExecKind as K;
        match self.kind {
            K::Write => self.write().await,
            K::Fetch => Ok(fetch(&self.text("url"), &self.ctx.cancel).await),
            K::Mcp => self.call_mcp(args).await,
            kind => Ok(self.tools.run_kind(kind, args, self.ctx).await?.unwrap_or(Value::Null)),
        }
    }

    /// A text write goes through the editor when the host writes through it (its review then
    /// tracks the change); a binary one, or one the editor does not take, to the disk.
    async fn write(&self) -> Result<Value, CoreError> {
        let args = &self.request.args;
        let on_disk = || self.tools.run_kind(self.kind, args, self.ctx);
        if !self.text("fileBytes").is_empty() {
            return Ok(on_disk().await?.unwrap_or(Value::Null));
        }
        let path = match self.tools.workspace().resolve(&self.text("path")) {
            Ok(path) => path.display().to_string(),
            Err(e) => return Ok(self.refused(&e.to_string())),
        };
        let content = self.text("fileText");
        match self.session.host.editor_write(path.clone(), content.clone()).await {
            Ok(true) => {
                let mut success = json!({
                    "path": path,
                    "linesCreated": crate::tools::line_count(&content),
                    "fileSize": content.len(),
                });
                if args.get("returnFileContentAfterWrite").and_then(Value::as_bool).unwrap_or(false) {
                    success["fileContentAfterWrite"] = Value::String(content);
                }
                Ok(json!({ "success": success }))
            }
            Ok(false) => Ok(on_disk().await?.unwrap_or(Value::Null)),
            Err(e) => {
                Ok(json!({ "error": { "path": path, "error": format!("the editor did not write the file: {e}") } }))
            }
        }
    }

    /// The server and tool an `mcp` exec names, among the MCP tools of the last request
    /// context; else the `McpResult` saying what exists.
    async fn mcp_target(&self) -> Result<(String, String), Value> {
        let mut known = self.session.lock().mcp_tools.clone();
        if known.is_empty() {
            // No turn of this process has asked for the context yet (a resumed exec).
            if let Err(e) = super::request_context::for_session(self.session).await {
                tracing::debug!(error = %e, "no request context to resolve an MCP call against");
            }
            known = self.session.lock().mcp_tools.clone();
        }
        let (name, mut server, mut tool) = (self.text("name"), self.text("providerIdentifier"), self.text("toolName"));
        if server.is_empty() || !known.iter().any(|(_, s, _)| *s == server) {
            // The combined name `<server>-<tool>` of the request context.
            if let Some((_, s, t)) = known.iter().find(|(combined, _, _)| *combined == name) {
                (server, tool) = (s.clone(), t.clone());
            }
        }
        let mut servers: Vec<String> = known.iter().map(|(_, s, _)| s.clone()).collect();
        servers.dedup();
        if server.is_empty() || !servers.contains(&server) {
            let name = if server.is_empty() { name } else { server };
            return Err(json!({ "serverNotFound": { "name": name, "availableServers": servers } }));
        }
        let tools: Vec<String> = known.iter().filter(|(_, s, _)| *s == server).map(|(_, _, t)| t.clone()).collect();
        if !tools.contains(&tool) {
            return Err(json!({ "toolNotFound": { "name": tool, "availableTools": tools } }));
        }
        Ok((server, tool))
    }

    /// An allowed MCP call. `smartModeApprovalOnly`: the server only asked whether it may run;
    /// the answer is `approved`, and the tool is not called.
    async fn call_mcp(&self, args: &Value) -> Result<Value, CoreError> {
        if args.get("smartModeApprovalOnly").and_then(Value::as_bool).unwrap_or(false) {
            return Ok(json!({ "approved": {} }));
        }
        let text = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
        let call = McpCall::Tool {
            server: text("providerIdentifier"),
            tool: text("toolName"),
            args: args.get("args").cloned().unwrap_or_else(|| json!({})),
        };
        match self.session.host.mcp(call, self.ctx.cancel.clone()).await {
            Ok(Some(result)) => Ok(result),
            Ok(None) => Ok(json!({ "error": { "error": "This client has no MCP servers." } })),
            Err(e) => Ok(json!({ "error": { "error": e.to_string() } })),
        }
    }

    /// The server's allowlist prechecks: whether the policy would allow the call without a
    /// question. A command the server could not parse is never allowlisted.
    async fn precheck(&self) -> Result<Value, CoreError> {
        use ExecKind as K;
        let args = &self.request.args;
        let parsing = args.get("parsingResult");
        if parsing.and_then(|p| p.get("parsingFailed")).and_then(Value::as_bool).unwrap_or(false) {
            return Ok(json!({ "allowlisted": false }));
        }
        let (kind, title) = match self.kind {
            K::ShellAllowlistPrecheck => ("execute", self.text("command")),
            K::McpAllowlistPrecheck => {
                ("other", format!("{}: {}", self.text("providerIdentifier"), self.text("toolName")))
            }
            _ => ("fetch", self.text("url")),
        };
        let programs: Vec<String> = parsing
            .and_then(|p| p.get("executableCommands"))
            .and_then(Value::as_array)
            .map(|commands| {
                commands
                    .iter()
                    .filter_map(|c| c.get("name").and_then(Value::as_str))
                    .filter(|n| !n.trim().is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let question = PermissionRequest {
            tool_call: json!({ "title": title, "kind": kind }),
            kind: kind.to_string(),
            command: (self.kind == K::ShellAllowlistPrecheck).then(|| self.text("command")),
            programs,
            paths: Vec::new(),
            url: (self.kind == K::WebFetchAllowlistPrecheck).then(|| self.text("url")),
            mcp: (self.kind == K::McpAllowlistPrecheck)
                .then(|| (self.text("providerIdentifier"), self.text("toolName"))),
            may_ask: false,
        };
        let allowed =
            matches!(self.session.host.permission(question, self.ctx.cancel.clone()).await, Ok(Permission::Allow));
        Ok(json!({ "allowlisted": allowed }))
    }

    async fn mcp_resources(&self) -> Result<Option<Value>, CoreError> {
        use ExecKind as K;
        let args = &self.request.args;
        let call = match self.kind {
            K::ListMcpResources => {
                McpCall::ListResources { server: args.get("server").and_then(Value::as_str).map(str::to_string) }
            }
            K::ReadMcpResource => McpCall::ReadResource { server: self.text("server"), uri: self.text("uri") },
            _ => McpCall::State {
                servers: args
                    .get("serverIdentifiers")
                    .and_then(Value::as_array)
                    .map(|s| s.iter().filter_map(Value::as_str).map(str::to_string).collect())
                    .unwrap_or_default(),
            },
        };
        self.session.host.mcp(call, self.ctx.cancel.clone()).await
    }

    /// The host's conversations (not this one) whose title holds every word of the query,
    /// newest first.
    async fn search_conversations(&self) -> Result<Option<Value>, CoreError> {
        const DEFAULT_LIMIT: usize = 10;
        let Some(mut conversations) = self.session.host.past_conversations().await? else { return Ok(None) };
        conversations.sort_by_key(|c| std::cmp::Reverse(c.updated_at_ms));
        let query = self.text("query").to_lowercase();
        let words: Vec<&str> = query.split_whitespace().collect();
        let limit = self
            .request
            .args
            .get("limit")
            .and_then(Value::as_u64)
            .filter(|l| *l > 0)
            .map_or(DEFAULT_LIMIT, |l| l as usize);
        let own = &self.session.conversation_id;
        let matching: Vec<_> = conversations
            .iter()
            .filter(|c| c.conversation_id != *own && !c.title.is_empty())
            .filter(|c| {
                let title = c.title.to_lowercase();
                words.iter().all(|w| title.contains(w))
            })
            .collect();
        let hits: Vec<Value> = matching
            .iter()
            .take(limit)
            .map(|c| {
                let mut hit = json!({
                    "conversationId": c.conversation_id,
                    "title": c.title,
                    "source": "CONVERSATION_SEARCH_SOURCE_LOCAL",
                });
                if let Some(at) = c.updated_at_ms {
                    hit["updatedAtMs"] = Value::String(at.to_string());
                }
                hit
            })
            .collect();
        Ok(Some(json!({ "success": { "hits": hits, "truncated": matching.len() > limit } })))
    }

    /// The answer to a call that did not run, in its result type's own words.
    fn refused(&self, reason: &str) -> Value {
        use ExecKind as K;
        let path = self.text("path");
        match self.kind {
            K::Write | K::Delete => json!({ "rejected": { "path": path, "reason": reason } }),
            K::Shell | K::ShellStream | K::BackgroundShellSpawn => json!({ "rejected": {
                "command": self.text("command"),
                "workingDirectory": self.text("workingDirectory"),
                "reason": reason,
            } }),
            K::MiniSweAgentBash => json!({ "rejected": { "command": self.text("command"), "reason": reason } }),
            K::PiBash => json!({ "error": { "error": reason } }),
            K::Fetch => json!({ "error": { "url": self.text("url"), "error": reason } }),
            _ => json!({ "rejected": { "reason": reason } }),
        }
    }
}

/// The id in the session of the card the core opens for an exec that came without its tool call.
fn own_card_id(request: &ExecRequest) -> String {
    match request.exec_id.as_str() {
        "" => format!("exec-{}", request.id),
        exec_id => format!("exec-{exec_id}"),
    }
}

/// The id in the session of an exec's card: the server's tool call, else the core's own.
pub(super) fn card_id(request: &ExecRequest) -> String {
    match request.args.get("toolCallId").and_then(Value::as_str) {
        Some(call) if !call.is_empty() => call.to_string(),
        _ => own_card_id(request),
    }
}

/// ACP's name of a tool kind (`execute`, `edit`, …), as the policy is keyed.
fn acp_json_name(kind: &acp::ToolKind) -> String {
    serde_json::to_value(kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_else(|| "other".into())
}

/// A file's text for a diff: `None` when it is missing, not a file, larger than `limit` or
/// not text.
fn text_or_none(path: &std::path::Path, limit: usize) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > limit as u64 {
        return None;
    }
    let data = std::fs::read(path).ok()?;
    if data.contains(&0) {
        return None;
    }
    String::from_utf8(data).ok()
}

/// A web fetch on the same HTTP stack as turns (the system's proxy settings and certificates),
/// redirects followed, the page cut at [`FETCH_LIMIT_BYTES`]; a `FetchResult` either way.
async fn fetch(url: &str, cancel: &tokio_util::sync::CancellationToken) -> Value {
    let failed = |error: String| json!({ "error": { "url": url, "error": error } });
    let client = match crate::transport::web_client(FETCH_TIMEOUT) {
        Ok(client) => client,
        Err(e) => return failed(e.to_string()),
    };
    let read = async {
        let mut response = client.get(url).send().await.map_err(|e| crate::error::error_chain(&e))?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let mut body = Vec::new();
        let mut truncated = false;
        while let Some(chunk) = response.chunk().await.map_err(|e| crate::error::error_chain(&e))? {
            body.extend_from_slice(&chunk);
            if body.len() > FETCH_LIMIT_BYTES {
                truncated = true;
                break;
            }
        }
        let mut content = String::from_utf8_lossy(&body[..body.len().min(FETCH_LIMIT_BYTES)]).into_owned();
        if truncated {
            content.push_str("\n[… truncated …]");
        }
        Ok::<_, String>(json!({ "success": {
            "url": url,
            "content": content,
            "statusCode": status,
            "contentType": content_type,
        } }))
    };
    tokio::select! {
        result = read => result.unwrap_or_else(failed),
        _ = cancel.cancelled() => failed("aborted".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_the_tools_run_is_routed_to_them() {
        for &kind in ExecKind::ALL {
            let to_tools = matches!(route(kind), Route::Run | Route::Read)
                || (route(kind) == Route::Gated && !matches!(kind, ExecKind::Fetch | ExecKind::Mcp));
            assert_eq!(to_tools, LocalTools::handles(kind), "{}", kind.name());
        }
    }
}
