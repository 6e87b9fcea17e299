//! The environment of every process the tools start (shells, background shells).
//!
//! A model-run `env` sends whatever it prints to the server, so a shell does not simply inherit
//! the host's environment. It is built from an explicit policy, after Codex's shell environment
//! policy: start from all, a core set or none of the host's variables, plus those the host
//! includes by name; drop this product's own credentials always, and every name that looks
//! like a secret unless the host included it; then set the variables the host configured,
//! which win over everything.

use std::ffi::{OsStr, OsString};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// Names that look like secrets, never inherited unless [`EnvPolicy::include`] names them.
pub const SECRET_LOOKING: &[&str] = &["*KEY*", "*SECRET*", "*TOKEN*", "*PASSWORD*", "*PASSWD*", "*CREDENTIAL*"];

/// This product's own credentials: never inherited, whatever the policy includes. A host that
/// really wants a shell to have one sets it explicitly (`env`).
pub const OWN_CREDENTIALS: &[&str] = &["CURSOR_API_KEY", "CURSOR_ACCESS_TOKEN"];

/// What [`Inherit::Core`] keeps: what programs need to find themselves, the user and a temp
/// dir, the locale and the terminal (and on Windows what its programs cannot start without).
const CORE: &[&str] = &[
    "HOME",
    "LOGNAME",
    "PATH",
    "SHELL",
    "USER",
    "USERNAME",
    "TMPDIR",
    "TEMP",
    "TMP",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "TZ",
    "SYSTEMROOT",
    "WINDIR",
    "COMSPEC",
    "PATHEXT",
    "USERPROFILE",
    "APPDATA",
    "LOCALAPPDATA",
    "PROGRAMDATA",
    "PROGRAMFILES",
    "PROGRAMFILES(X86)",
    "SYSTEMDRIVE",
    "HOMEDRIVE",
    "HOMEPATH",
];

/// Which of the host's variables a tool's process starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Inherit {
    /// Every variable (less secrets and credentials).
    #[default]
    All,
    /// Only the core set (`PATH`, `HOME`, `USER`, `TMPDIR`, `LANG`, …), less secrets.
    Core,
    /// None: only what the host sets.
    None,
}

/// How the environment of the tools' processes is made from the host's.
#[derive(Debug, Clone, Default)]
pub struct EnvPolicy {
    pub inherit: Inherit,
    /// More names (globs, case-insensitive: `AWS_*`) never to inherit, beyond
    /// [`SECRET_LOOKING`].
    pub exclude: Vec<String>,
    /// Names (globs, case-insensitive) inherited whatever `inherit` and the excludes say, such
    /// as `GITHUB_TOKEN` for a shell that runs `gh`, or `MYAPP_*` over [`Inherit::Core`]. Never
    /// [`OWN_CREDENTIALS`].
    pub include: Vec<String>,
}

/// A policy with its patterns compiled, and the variables to set.
#[derive(Debug, Clone)]
pub(crate) struct ShellEnvironment {
    inherit: Inherit,
    core: GlobSet,
    excluded: GlobSet,
    included: GlobSet,
    set: Vec<(String, String)>,
}

fn glob_set<'a>(patterns: impl IntoIterator<Item = &'a str>) -> Result<GlobSet, String> {
    let mut set = GlobSetBuilder::new();
    for pattern in patterns {
        let glob = GlobBuilder::new(pattern)
            .case_insensitive(true)
            .build()
            .map_err(|e| format!("invalid environment variable pattern {pattern:?}: {e}"))?;
        set.add(glob);
    }
    set.build().map_err(|e| e.to_string())
}

impl ShellEnvironment {
    /// `set`: variables given explicitly by the host, over whatever is inherited.
    pub(crate) fn new(policy: &EnvPolicy, set: &[(String, String)]) -> Result<Self, String> {
        let excludes = SECRET_LOOKING.iter().copied().chain(policy.exclude.iter().map(String::as_str));
        Ok(ShellEnvironment {
            inherit: policy.inherit,
            core: glob_set(CORE.iter().copied())?,
            excluded: glob_set(excludes)?,
            included: glob_set(policy.include.iter().map(String::as_str))?,
            set: set.to_vec(),
        })
    }

    fn inherits(&self, name: &OsStr) -> bool {
        // A name that is not Unicode cannot be checked against the patterns: not inherited.
        let Some(name) = name.to_str() else { return false };
        if OWN_CREDENTIALS.iter().any(|c| c.eq_ignore_ascii_case(name)) {
            return false;
        }
        if self.included.is_match(name) {
            return true;
        }
        let wanted = match self.inherit {
            Inherit::All => true,
            Inherit::Core => self.core.is_match(name),
            Inherit::None => false,
        };
        wanted && !self.excluded.is_match(name)
    }

    /// The environment for a process, from the host's `parent` variables.
    pub(crate) fn build(&self, parent: impl IntoIterator<Item = (OsString, OsString)>) -> Vec<(OsString, OsString)> {
        let mut env: Vec<(OsString, OsString)> = parent.into_iter().filter(|(name, _)| self.inherits(name)).collect();
        for (name, value) in &self.set {
            env.retain(|(n, _)| !same_name(n, name));
            env.push((name.into(), value.into()));
        }
        env
    }
}

/// Windows compares variable names without case.
fn same_name(a: &OsStr, b: &str) -> bool {
    if cfg!(windows) {
        a.to_str().is_some_and(|a| a.eq_ignore_ascii_case(b))
    } else {
        a == b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(names: &[&str]) -> Vec<(OsString, OsString)> {
        names.iter().map(|n| (OsString::from(n), OsString::from(format!("value of {n}")))).collect()
    }

    fn names(env: &[(OsString, OsString)]) -> Vec<String> {
        let mut names: Vec<String> = env.iter().map(|(n, _)| n.to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    const PARENT: &[&str] = &[
        "CURSOR_API_KEY",
        "CURSOR_ACCESS_TOKEN",
        "GITHUB_TOKEN",
        "MY_SECRET",
        "db_password",
        "PATH",
        "HOME",
        "EDITOR",
    ];

    #[test]
    fn by_default_everything_but_credentials_and_secret_looking_names_is_inherited() {
        let env = ShellEnvironment::new(&EnvPolicy::default(), &[]).unwrap().build(vars(PARENT));
        assert_eq!(names(&env), ["EDITOR", "HOME", "PATH"]);
    }

    #[test]
    fn core_none_exclude_include_and_set() {
        let policy = |inherit, exclude: &[&str], include: &[&str]| EnvPolicy {
            inherit,
            exclude: exclude.iter().map(|s| s.to_string()).collect(),
            include: include.iter().map(|s| s.to_string()).collect(),
        };
        let build = |p: EnvPolicy, set: &[(String, String)]| {
            names(&ShellEnvironment::new(&p, set).unwrap().build(vars(PARENT)))
        };
        assert_eq!(build(policy(Inherit::Core, &[], &[]), &[]), ["HOME", "PATH"]);
        assert_eq!(build(policy(Inherit::Core, &[], &["git*"]), &[]), ["GITHUB_TOKEN", "HOME", "PATH"]);
        assert_eq!(build(policy(Inherit::None, &[], &["path"]), &[]), ["PATH"]);
        assert_eq!(build(policy(Inherit::All, &["ed*"], &[]), &[]), ["HOME", "PATH"]);
        assert_eq!(
            build(policy(Inherit::All, &[], &["github_token", "CURSOR_*"]), &[]),
            ["EDITOR", "GITHUB_TOKEN", "HOME", "PATH"],
            "include brings back a secret-looking name, never this product's credentials"
        );
        let set = [("CURSOR_API_KEY".to_string(), "asked for".to_string()), ("X".to_string(), "1".to_string())];
        assert_eq!(build(policy(Inherit::None, &[], &[]), &set), ["CURSOR_API_KEY", "X"]);
        assert!(ShellEnvironment::new(&policy(Inherit::All, &["[oops"], &[]), &[]).unwrap_err().contains("[oops"));
    }
}
