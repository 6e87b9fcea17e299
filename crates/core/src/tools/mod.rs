//! Built-in local tools: native answers to the server's exec requests (read, write, delete, ls,
//! grep, shell, shellStream, miniSweAgentBash, backgroundShellSpawn, writeShellStdin, the
//! `pi*` family, gitDiffRequest) and a glob helper, confined to workspace roots and answering
//! with the typed result branches of the proto.
//!
//! Hosts delegate to them instead of re-implementing them: [`LocalTools::run`] takes the same
//! `ExecRequest`/`ExecContext` a `Host` gets and returns the result message as proto3 JSON, or
//! `None` for kinds it does not implement (the host then answers or lets the request be thrown).

mod background;
mod environment;
mod files;
mod git_diff;
#[cfg(windows)]
mod job;
mod ls;
mod options;
mod pi;
mod process;
mod reaper;
mod search;
mod shell;
mod shell_command;
mod shells;
mod terminals;
mod workspace;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use prost::Message;
use serde_json::Value;

use crate::error::CoreError;
use crate::host::{ExecContext, ExecRequest};
use crate::kinds::ExecKind;
use crate::proto::agent::v1 as pb;
use crate::protojson;
use terminals::TerminalsFolder;

pub use environment::{EnvPolicy, Inherit, OWN_CREDENTIALS, SECRET_LOOKING};
pub use files::line_count;
pub use ls::LS_MAX_DEPTH;
pub use options::{ToolOptions, DEFAULT_MAX_BINARY_BYTES};
pub use reaper::{forget_group, watch_child_group};
pub use shell_command::{default_shell, resolve_shell, SHELL_TAKES};
pub use shells::Shells;
pub use workspace::{PathRefused, Workspace, MAX_PATH_BYTES};

/// The tools for one workspace. Cheap to clone; background shells are shared and killed when
/// the last clone is dropped or [`LocalTools::close`] is called (their own terminals folder,
/// if any, is removed then too).
#[derive(Clone)]
pub struct LocalTools {
    inner: Arc<Inner>,
}

struct Inner {
    workspace: Workspace,
    options: ToolOptions,
    /// The shell commands run with: the configured one or the default, resolved once.
    shell: PathBuf,
    /// The processes' environment, or why the policy is invalid (then every shell fails to
    /// start with that reason).
    environment: Result<environment::ShellEnvironment, String>,
    shells: Shells,
    // After `shells`: fields drop in order, so the shells are killed before their folder goes.
    terminals: TerminalsFolder,
}

impl LocalTools {
    pub fn new(workspace: Workspace, mut options: ToolOptions) -> Self {
        let terminals = TerminalsFolder::new(&options.terminals_dir);
        options.terminals_dir = terminals.path().to_path_buf();
        // Background output must be readable back through `read`, so its folder joins the
        // roots, before it exists. A host's folder that exists already is taken as it resolves
        // (it may be a symlink on purpose); an own folder's name is never trusted that way.
        let existing = (!terminals.is_own())
            .then(|| workspace::canonical(terminals.path()).ok().filter(|dir| dir.is_dir()))
            .flatten();
        let workspace = existing
            .and_then(|dir| Workspace::new(workspace.roots().into_iter().chain([dir])).ok())
            .unwrap_or_else(|| workspace.with_pending_root(terminals.path()));
        let shell = options.shell.take().unwrap_or_else(default_shell);
        // SHELL first: a host that sets one in `env` wins, as with any variable it sets.
        let set: Vec<(String, String)> = [("SHELL".to_string(), shell.display().to_string())]
            .into_iter()
            .chain(options.env.iter().cloned())
            .collect();
        options.shell = Some(shell.clone());
        let environment = environment::ShellEnvironment::new(&options.env_policy, &set);
        Self { inner: Arc::new(Inner { workspace, options, shell, environment, shells: Shells::default(), terminals }) }
    }

    pub fn workspace(&self) -> &Workspace {
        &self.inner.workspace
    }

    pub fn options(&self) -> &ToolOptions {
        &self.inner.options
    }

    /// The shell commands run with (`<shell> -c <command>`): what a client answering execs with
    /// these tools names in its request context.
    pub fn shell(&self) -> &Path {
        &self.inner.shell
    }

    pub fn shells(&self) -> &Shells {
        &self.inner.shells
    }

    /// Whether [`LocalTools::run`] answers requests of `kind`.
    pub fn handles(kind: ExecKind) -> bool {
        use ExecKind as K;
        match kind {
            K::Read | K::Write | K::Delete | K::Ls | K::Grep | K::Shell | K::ShellStream | K::MiniSweAgentBash => true,
            K::BackgroundShellSpawn | K::WriteShellStdin | K::GitDiffRequest => true,
            K::PiRead | K::PiBash | K::PiEdit | K::PiWrite | K::PiGrep | K::PiFind | K::PiLs => true,
            K::RedactedRead | K::Diagnostics | K::RequestContext | K::Mcp | K::ListMcpResources => false,
            K::ReadMcpResource | K::McpState | K::Fetch | K::RecordScreen | K::ComputerUse | K::ExecuteHook => false,
            K::Subagent | K::ForceBackgroundShell | K::ForceBackgroundSubagent | K::SubagentAwait => false,
            K::SmartModeClassifier | K::CanvasDiagnostics | K::ShellAllowlistPrecheck => false,
            K::McpAllowlistPrecheck | K::WebFetchAllowlistPrecheck | K::ConversationSearch => false,
            K::AgentStoreConflict => false,
        }
    }

    /// Kills background shells and removes their output, with the tools' own terminals folder
    /// (a folder the host named stays). A later background shell makes the own folder again;
    /// a folder the host named is used while it is there but never made again: the host may
    /// remove it once the tools are closed (the stdio agent deleting a session) and no late
    /// shell brings it back.
    pub fn close(&self) {
        self.inner.shells.kill_all();
        self.inner.terminals.close();
    }

    /// Runs one exec request. `Ok(None)`: not a kind these tools implement. Failures of the
    /// tool itself are result branches (`error`, `rejected`, …), never `Err`; `Err` means the
    /// request's args were not a valid message, or (gitDiffRequest, whose result has no error
    /// branch) that git could not answer.
    pub async fn run(&self, request: &ExecRequest, ctx: &ExecContext) -> Result<Option<Value>, CoreError> {
        match request.exec_kind() {
            Some(kind) => self.run_kind(kind, &request.args, ctx).await,
            None => Ok(None),
        }
    }

    /// [`LocalTools::run`] from a kind and its args (proto3 JSON).
    pub async fn run_kind(&self, kind: ExecKind, args: &Value, ctx: &ExecContext) -> Result<Option<Value>, CoreError> {
        use ExecKind as K;
        if !Self::handles(kind) {
            return Ok(None);
        }
        let json = match kind {
            K::Read => {
                let args: pb::ReadArgs = parse("ReadArgs", args)?;
                to_json("ReadResult", &self.blocking(move |t| files::read(&t.workspace, &t.options, &args)).await?)
            }
            K::Write => {
                let args: pb::WriteArgs = parse("WriteArgs", args)?;
                to_json("WriteResult", &self.blocking(move |t| files::write(&t.workspace, &args)).await?)
            }
            K::Delete => {
                let args: pb::DeleteArgs = parse("DeleteArgs", args)?;
                to_json("DeleteResult", &self.blocking(move |t| files::delete(&t.workspace, &t.options, &args)).await?)
            }
            K::Ls => {
                let args: pb::LsArgs = parse("LsArgs", args)?;
                to_json("LsResult", &self.blocking(move |t| ls::ls(&t.workspace, &t.options, &args)).await?)
            }
            K::Grep => {
                let args: pb::GrepArgs = parse("GrepArgs", args)?;
                to_json("GrepResult", &self.blocking(move |t| search::grep(&t.workspace, &t.options, &args)).await?)
            }
            K::Shell | K::ShellStream | K::MiniSweAgentBash => {
                let args: pb::ShellArgs = parse("ShellArgs", args)?;
                let t = &self.inner;
                to_json("ShellResult", &shell::run(&t.shell_context(), &args, ctx).await)
            }
            K::BackgroundShellSpawn => {
                let args: pb::BackgroundShellSpawnArgs = parse("BackgroundShellSpawnArgs", args)?;
                let t = &self.inner;
                to_json("BackgroundShellSpawnResult", &background::spawn_background(&t.shell_context(), &args))
            }
            K::WriteShellStdin => {
                let args: pb::WriteShellStdinArgs = parse("WriteShellStdinArgs", args)?;
                to_json("WriteShellStdinResult", &background::write_stdin(&self.inner.shells, &args).await)
            }
            K::PiRead => {
                let args: pb::PiReadExecArgs = parse("PiReadExecArgs", args)?;
                to_json("PiReadExecResult", &self.blocking(move |t| pi::read(&t.workspace, &t.options, &args)).await?)
            }
            K::PiWrite => {
                let args: pb::PiWriteExecArgs = parse("PiWriteExecArgs", args)?;
                to_json("PiWriteExecResult", &self.blocking(move |t| pi::write(&t.workspace, &args)).await?)
            }
            K::PiEdit => {
                let args: pb::PiEditExecArgs = parse("PiEditExecArgs", args)?;
                to_json("PiEditExecResult", &self.blocking(move |t| pi::edit(&t.workspace, &t.options, &args)).await?)
            }
            K::PiGrep => {
                let args: pb::PiGrepExecArgs = parse("PiGrepExecArgs", args)?;
                to_json("PiGrepExecResult", &self.blocking(move |t| pi::grep(&t.workspace, &args)).await?)
            }
            K::PiFind => {
                let args: pb::PiFindExecArgs = parse("PiFindExecArgs", args)?;
                to_json("PiFindExecResult", &self.blocking(move |t| pi::find(&t.workspace, &args)).await?)
            }
            K::PiLs => {
                let args: pb::PiLsExecArgs = parse("PiLsExecArgs", args)?;
                to_json("PiLsExecResult", &self.blocking(move |t| pi::ls(&t.workspace, &args)).await?)
            }
            K::PiBash => {
                let args: pb::PiBashExecArgs = parse("PiBashExecArgs", args)?;
                to_json("PiBashExecResult", &pi::bash(&self.inner.shell_context(), &args, ctx).await)
            }
            K::GitDiffRequest => {
                // GetDiffResponse has no error branch: a repository git cannot read is an
                // error of the call (the server gets throw), not an empty diff.
                let args: pb::GetDiffRequest = parse("GetDiffRequest", args)?;
                let t = &self.inner;
                let diff = git_diff::git_diff(&t.workspace, t.environment.as_ref(), &args)
                    .await
                    .map_err(|e| CoreError::Callback(format!("git diff: {e}")))?;
                to_json("GetDiffResponse", &diff)
            }
            // `handles` said no above.
            _ => return Ok(None),
        };
        json.map(Some)
    }

    /// Files matching a glob under a directory (most recently modified first), as the
    /// `GlobToolResult` message in proto3 JSON. Args: `{ globPattern, targetDirectory? }`.
    pub async fn glob(&self, args: &Value) -> Result<Value, CoreError> {
        let args: pb::GlobToolArgs = parse("GlobToolArgs", args)?;
        to_json("GlobToolResult", &self.blocking(move |t| search::glob(&t.workspace, &t.options, &args)).await?)
    }

    /// Filesystem work runs on the blocking pool so a large grep never stalls the turn loop.
    async fn blocking<T: Send + 'static>(&self, f: impl FnOnce(&Inner) -> T + Send + 'static) -> Result<T, CoreError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || f(&inner))
            .await
            .map_err(|e| CoreError::Callback(format!("local tool failed: {e}")))
    }
}

impl Inner {
    fn shell_context(&self) -> shell_command::ShellContext<'_> {
        shell_command::ShellContext {
            workspace: &self.workspace,
            options: &self.options,
            environment: self.environment.as_ref(),
            shells: &self.shells,
            terminals: &self.terminals,
        }
    }
}

/// Checks a policy before tools are made with it (their constructor cannot fail).
/// The `shell` option checked and resolved (see [`resolve_shell`]): `None` gives the default.
/// An error is `E_INVALID` naming the option, the value and why it cannot run.
pub fn check_shell(configured: Option<&str>) -> Result<PathBuf, CoreError> {
    match configured {
        None => Ok(default_shell()),
        Some(value) => resolve_shell(value)
            .map_err(|why| CoreError::invalid_option("shell", SHELL_TAKES, &value.into(), Some(&why))),
    }
}

pub fn check_env_policy(policy: &EnvPolicy) -> Result<(), CoreError> {
    environment::ShellEnvironment::new(policy, &[]).map(drop).map_err(CoreError::InvalidInput)
}

fn parse<M: Message + Default>(name: &str, args: &Value) -> Result<M, CoreError> {
    protojson::from_json(&format!("agent.v1.{name}"), args).map_err(CoreError::InvalidInput)
}

fn to_json<M: Message>(name: &str, message: &M) -> Result<Value, CoreError> {
    protojson::to_json(&format!("agent.v1.{name}"), &message.encode_to_vec()).map_err(CoreError::Protocol)
}

/// The tools as a complete host: execs they implement are answered, the rest thrown.
impl crate::host::Host for LocalTools {
    fn exec(
        &self,
        request: ExecRequest,
        ctx: ExecContext,
    ) -> futures::future::BoxFuture<'static, Result<Option<Value>, CoreError>> {
        let tools = self.clone();
        Box::pin(async move { tools.run(&request, &ctx).await })
    }
}
