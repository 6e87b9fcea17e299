//! Paths as cards show them: relative to the session's folder in titles, absolute in locations
//! and diffs.

use agent_client_protocol_schema::v1 as acp;

/// The session's folder, against which paths are shown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Paths {
    cwd: Option<String>,
}

impl Paths {
    pub fn new(cwd: Option<&str>) -> Self {
        let cwd = cwd.map(|c| c.trim_end_matches(['/', '\\']).to_string()).filter(|c| !c.is_empty());
        Paths { cwd }
    }

    pub fn cwd(&self) -> Option<&str> {
        self.cwd.as_deref()
    }

    /// `path` relative to the folder when it is inside it (`.` for the folder itself).
    pub fn relative(&self, path: &str) -> String {
        let Some(cwd) = &self.cwd else { return path.to_string() };
        if path == cwd {
            return ".".to_string();
        }
        path.strip_prefix(cwd.as_str())
            .and_then(|rest| rest.strip_prefix('/').or_else(|| rest.strip_prefix('\\')))
            .filter(|rest| !rest.is_empty())
            .unwrap_or(path)
            .to_string()
    }

    /// `path` made absolute against the folder (an absolute path, Unix or Windows, as it is).
    pub fn absolute(&self, path: &str) -> String {
        let is_abs = path.starts_with('/') || path.starts_with('\\') || path.chars().nth(1) == Some(':');
        match &self.cwd {
            Some(cwd) if !is_abs && (path.is_empty() || path == ".") => cwd.clone(),
            Some(cwd) if !is_abs => format!("{cwd}/{}", path.trim_start_matches("./")),
            _ => path.to_string(),
        }
    }

    pub fn location(&self, path: &str, line: Option<u32>) -> acp::ToolCallLocation {
        acp::ToolCallLocation::new(self.absolute(path)).line(line)
    }
}

#[cfg(test)]
mod tests {
    use super::Paths;

    #[test]
    fn relative_inside_absolute_outside() {
        let p = Paths::new(Some("/w/"));
        assert_eq!(p.relative("/w/src/a.rs"), "src/a.rs");
        assert_eq!(p.relative("/w"), ".");
        assert_eq!(p.relative("/wx/a"), "/wx/a", "a sibling with the same prefix is outside");
        assert_eq!(p.absolute("src/a.rs"), "/w/src/a.rs");
        assert_eq!(p.absolute("./a"), "/w/a");
        assert_eq!(p.absolute(""), "/w");
        assert_eq!(p.absolute("C:\\x"), "C:\\x");
        assert_eq!(Paths::new(None).absolute("a"), "a");
    }
}
