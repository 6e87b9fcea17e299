//! No file of a crate imports from a file that imports it back, directly or through others
//! (docs/architecture.md). Checked for every crate of the workspace: the core (`crates/core/src`),
//! the embedded backend (`crates/embedded/src`), the binding (`src/`), `crates/bench/src` and
//! `crates/hugepages/src`.
//!
//! A file depends on another when its code names an item the other file defines: through a
//! `use` (`use crate::…`, `use super::…`, `use self::…`, a child module's name) or a path written
//! out in code (`crate::error::CoreError::Invalid(…)`, `super::render::fenced(…)`). Names are
//! followed through the imports of the module that names them (a `pub use` in a `mod.rs`, a
//! private `use` a child reaches with `super::`) to the file that defines them, so a `mod.rs` that
//! only re-exports its children is not a step between them. A `pub use` itself is no dependency
//! of the file that holds it; a private `use` is. Comments, strings and `mod x;` declarations are
//! not read.
//!
//! Std only: it reads source text, builds the graph and finds its strongly connected components
//! (Tarjan), so a failure lists each cycle's files and the lines that close it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

/// A module's path from its crate's root (`["transport", "config"]`); `[]` is the root.
type ModPath = Vec<String>;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Sep,
    Punct(char),
}

/// One token and the line it starts on.
#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    line: usize,
}

/// Source text without comments, strings and character literals, as tokens.
fn tokenize(src: &str) -> Vec<Token> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if c == '"' || ((c == 'b' || c == 'c') && next == Some('"')) {
            // A string: skip to its unescaped closing quote.
            i += if c == '"' { 1 } else { 2 };
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                if chars.get(i) == Some(&'\n') {
                    line += 1;
                }
                i += 1;
            }
            i += 1;
        } else if raw_string_hashes(&chars, i).is_some() {
            // r"…", r#"…"#, br#"…"#: no escapes, ends at a quote and as many hashes.
            let (start, hashes) = raw_string_hashes(&chars, i).unwrap_or_default();
            i = start;
            loop {
                if i >= chars.len() {
                    break;
                }
                if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                if chars[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
        } else if c == '\'' {
            // A character literal ('a', '\n', '\u{1F600}') or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let word = word.strip_prefix("r#").map(str::to_owned).unwrap_or(word);
            out.push(Token { tok: Tok::Ident(word), line });
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '.') {
                i += 1;
            }
        } else if c == ':' && next == Some(':') {
            out.push(Token { tok: Tok::Sep, line });
            i += 2;
        } else {
            out.push(Token { tok: Tok::Punct(c), line });
            i += 1;
        }
    }
    out
}

/// At a raw string's start (`r"`, `r#"`, `br##"`): where its text begins and how many hashes
/// close it.
fn raw_string_hashes(chars: &[char], i: usize) -> Option<(usize, usize)> {
    if i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') {
        return None;
    }
    let mut j = i;
    if chars.get(j) == Some(&'b') || chars.get(j) == Some(&'c') {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while chars.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (chars.get(j) == Some(&'"')).then_some((j + 1, hashes))
}

/// A path as written, in the module it is written in.
#[derive(Debug, Clone)]
struct Reference {
    scope: ModPath,
    segments: Vec<String>,
    line: usize,
}

/// A name a `use` brings into a module, and the path it names.
#[derive(Debug, Clone)]
struct Import {
    path: Vec<String>,
}

#[derive(Debug, Default)]
struct Parsed {
    /// The paths the file's code depends on (private `use`s and paths in code).
    references: Vec<Reference>,
    /// Per module the file holds (itself and its inline modules): the names its `use`s bring in.
    imports: Vec<(ModPath, String, Import)>,
    /// Inline modules (`mod tests { … }`).
    inline: Vec<ModPath>,
}

fn ident(tokens: &[Token], i: usize) -> Option<&str> {
    match tokens.get(i).map(|t| &t.tok) {
        Some(Tok::Ident(s)) => Some(s),
        _ => None,
    }
}

fn is(tokens: &[Token], i: usize, tok: &Tok) -> bool {
    tokens.get(i).map(|t| &t.tok) == Some(tok)
}

/// Expands a use tree (`a::{b, c::{d as e, self}, *}`) from `i` into (path, name) pairs; returns
/// the index after it.
fn use_tree(tokens: &[Token], mut i: usize, prefix: &[String], out: &mut Vec<(Vec<String>, String)>) -> usize {
    let mut path = prefix.to_vec();
    loop {
        if is(tokens, i, &Tok::Punct('{')) {
            i += 1;
            loop {
                if is(tokens, i, &Tok::Punct('}')) {
                    return i + 1;
                }
                i = use_tree(tokens, i, &path, out);
                if is(tokens, i, &Tok::Punct(',')) {
                    i += 1;
                }
                if i >= tokens.len() {
                    return i;
                }
            }
        }
        if is(tokens, i, &Tok::Punct('*')) {
            path.push("*".into());
            out.push((path, "*".into()));
            return i + 1;
        }
        let Some(seg) = ident(tokens, i) else { return i + 1 };
        i += 1;
        if seg == "self" && !path.is_empty() && !is(tokens, i, &Tok::Sep) {
            let name = path.last().cloned().unwrap_or_default();
            let name = alias(tokens, &mut i).unwrap_or(name);
            out.push((path, name));
            return i;
        }
        path.push(seg.to_owned());
        if is(tokens, i, &Tok::Sep) {
            i += 1;
            continue;
        }
        let name = alias(tokens, &mut i).unwrap_or_else(|| seg.to_owned());
        out.push((path, name));
        return i;
    }
}

fn alias(tokens: &[Token], i: &mut usize) -> Option<String> {
    if ident(tokens, *i) == Some("as") {
        let name = ident(tokens, *i + 1).map(str::to_owned);
        *i += 2;
        return name;
    }
    None
}

/// Reads a file's imports and references. `children` are the module paths that exist, so that a
/// path starting with a child module's name (`terminals::TerminalsFolder` in `tools/mod.rs`) is
/// read as one.
fn parse(tokens: &[Token], file_mod: &ModPath, modules: &BTreeSet<ModPath>) -> Parsed {
    let mut parsed = Parsed::default();
    // Inline modules open at a brace depth.
    let mut scopes: Vec<(ModPath, usize)> = vec![(file_mod.clone(), 0)];
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let scope = scopes.last().map(|(m, _)| m.clone()).unwrap_or_default();
        match &tokens[i].tok {
            Tok::Punct('{') => {
                depth += 1;
                i += 1;
            }
            Tok::Punct('}') => {
                if scopes.len() > 1 && scopes.last().map(|s| s.1) == Some(depth) {
                    scopes.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Ident(w) if w == "mod" && ident(tokens, i + 1).is_some() && is(tokens, i + 2, &Tok::Punct('{')) => {
                let mut inner = scope.clone();
                inner.push(ident(tokens, i + 1).unwrap_or_default().to_owned());
                parsed.inline.push(inner.clone());
                depth += 1;
                scopes.push((inner, depth));
                i += 3;
            }
            Tok::Ident(w) if w == "use" => {
                let line = tokens[i].line;
                let public = i > 0
                    && (ident(tokens, i - 1) == Some("pub")
                        || (is(tokens, i - 1, &Tok::Punct(')')) && ident(tokens, i - 3) == Some("pub"))
                        || (is(tokens, i - 1, &Tok::Punct(')')) && ident(tokens, i - 4) == Some("pub")));
                let mut trees = Vec::new();
                let start = if is(tokens, i + 1, &Tok::Sep) { i + 2 } else { i + 1 };
                i = use_tree(tokens, start, &[], &mut trees);
                for (path, name) in trees {
                    if !public {
                        parsed.references.push(Reference { scope: scope.clone(), segments: path.clone(), line });
                    }
                    parsed.imports.push((scope.clone(), name, Import { path }));
                }
            }
            Tok::Ident(w) if is(tokens, i + 1, &Tok::Sep) && !(i > 0 && is(tokens, i - 1, &Tok::Sep)) => {
                let line = tokens[i].line;
                let first = w.clone();
                let mut child = scope.clone();
                child.push(first.clone());
                let local = modules.contains(&child);
                if matches!(first.as_str(), "crate" | "super" | "self") || local {
                    let mut segments = vec![first];
                    i += 1;
                    while is(tokens, i, &Tok::Sep) {
                        match ident(tokens, i + 1) {
                            Some(seg) => segments.push(seg.to_owned()),
                            None => break,
                        }
                        i += 2;
                    }
                    parsed.references.push(Reference { scope: scope.clone(), segments, line });
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    parsed
}

/// One crate's files and what they name.
struct Crate {
    /// Module → the file that holds it (inline modules: their file).
    files: BTreeMap<ModPath, PathBuf>,
    /// (module, name) → the import that brings the name in.
    imports: HashMap<(ModPath, String), Import>,
    references: Vec<(PathBuf, Reference)>,
}

fn module_of(root: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(root).unwrap_or(file);
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !(parts.is_empty() && (stem == "lib" || stem == "main")) && stem != "mod" {
        parts.push(stem.to_owned());
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn read_crate(root: &Path) -> Crate {
    let mut paths = Vec::new();
    rust_files(root, &mut paths);
    paths.sort();
    let mut files: BTreeMap<ModPath, PathBuf> = paths.iter().map(|p| (module_of(root, p), p.clone())).collect();
    let mut modules: BTreeSet<ModPath> = files.keys().cloned().collect();
    let texts: Vec<(PathBuf, Vec<Token>)> = paths
        .iter()
        .map(|p| (p.clone(), tokenize(&fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))))
        .collect();
    // Inline modules first, so that paths through them resolve.
    for (path, tokens) in &texts {
        for inline in parse(tokens, &module_of(root, path), &modules).inline {
            files.insert(inline.clone(), path.clone());
            modules.insert(inline);
        }
    }
    let mut imports = HashMap::new();
    let mut references = Vec::new();
    for (path, tokens) in &texts {
        let parsed = parse(tokens, &module_of(root, path), &modules);
        for (scope, name, import) in parsed.imports {
            imports.insert((scope, name), import);
        }
        references.extend(parsed.references.into_iter().map(|r| (path.clone(), r)));
    }
    Crate { files, imports, references }
}

impl Crate {
    /// The file that defines what `segments` names from `scope`, or None for another crate's.
    fn resolve(&self, scope: &ModPath, segments: &[String], hops: usize) -> Option<PathBuf> {
        if hops > 16 {
            return None;
        }
        let mut module: ModPath = match segments.first().map(String::as_str) {
            Some("crate") => Vec::new(),
            Some("self") | Some("super") => scope.clone(),
            Some(first) => {
                let mut child = scope.clone();
                child.push(first.to_owned());
                if self.files.contains_key(&child) {
                    scope.clone()
                } else if let Some(import) = self.imports.get(&(scope.clone(), first.to_owned())) {
                    // A name imported into this module (`use super::config;` then `config::X`).
                    let mut path = import.path.clone();
                    path.extend(segments[1..].iter().cloned());
                    return self.resolve(scope, &path, hops + 1);
                } else {
                    return None;
                }
            }
            None => return None,
        };
        let mut rest = match segments.first().map(String::as_str) {
            Some("crate") | Some("self") => &segments[1..],
            Some("super") => {
                let mut rest = segments;
                while rest.first().map(String::as_str) == Some("super") {
                    module.pop();
                    rest = &rest[1..];
                }
                rest
            }
            _ => segments,
        };
        while let Some(seg) = rest.first() {
            if seg == "*" || seg == "self" {
                break;
            }
            let mut child = module.clone();
            child.push(seg.clone());
            if self.files.contains_key(&child) {
                module = child;
                rest = &rest[1..];
                continue;
            }
            // An item of `module`: defined there, or imported there from elsewhere.
            if let Some(import) = self.imports.get(&(module.clone(), seg.clone())) {
                let mut path = import.path.clone();
                path.extend(rest[1..].iter().cloned());
                if let Some(found) = self.resolve(&module, &path, hops + 1) {
                    return Some(found);
                }
                // Imported from another crate: that import is the item.
            }
            break;
        }
        self.files.get(&module).cloned()
    }
}

/// Tarjan's strongly connected components of a graph over `0..n`.
fn components(n: usize, edges: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        edges: &'a [BTreeSet<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in s.edges[v].iter() {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let mut s = State {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The cycles between a crate's files, each as its files and the references that close it.
fn cycles(root: &Path) -> Vec<String> {
    let krate = read_crate(root);
    let files: Vec<PathBuf> = krate.files.values().cloned().collect::<BTreeSet<_>>().into_iter().collect();
    let id: HashMap<&PathBuf, usize> = files.iter().enumerate().map(|(i, f)| (f, i)).collect();
    let mut edges = vec![BTreeSet::new(); files.len()];
    let mut why: BTreeMap<(usize, usize), Vec<String>> = BTreeMap::new();
    for (from, reference) in &krate.references {
        let Some(to) = krate.resolve(&reference.scope, &reference.segments, 0) else { continue };
        if &to == from {
            continue;
        }
        let (a, b) = (id[from], id[&to]);
        edges[a].insert(b);
        why.entry((a, b)).or_default().push(format!("line {}: {}", reference.line, reference.segments.join("::")));
    }
    let name = |i: usize| files[i].strip_prefix(root).unwrap_or(&files[i]).display().to_string();
    let mut found = Vec::new();
    for component in components(files.len(), &edges) {
        if component.len() < 2 {
            continue;
        }
        let members: BTreeSet<usize> = component.iter().copied().collect();
        let mut report = format!("cycle between {}:", members.iter().map(|&i| name(i)).collect::<Vec<_>>().join(", "));
        for (&(a, b), lines) in &why {
            if members.contains(&a) && members.contains(&b) {
                report.push_str(&format!("\n  {} → {} ({})", name(a), name(b), lines.join("; ")));
            }
        }
        found.push(report);
    }
    found
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn no_file_of_a_crate_imports_a_file_that_imports_it_back() {
    let roots = ["crates/core/src", "crates/embedded/src", "src", "crates/bench/src", "crates/hugepages/src"];
    let mut found = Vec::new();
    for root in roots {
        assert!(workspace().join(root).join("lib.rs").is_file(), "{root} has no lib.rs");
        found.extend(cycles(&workspace().join(root)).into_iter().map(|c| format!("{root}: {c}")));
    }
    assert!(found.is_empty(), "import cycles between files:\n{}", found.join("\n"));
}

/// The check sees the kinds of reference the crates use: a cycle through `use super::…`, one
/// through a path in code, and one through a re-export; and none where a `mod.rs` only
/// re-exports.
#[test]
fn the_check_finds_cycles_of_every_kind() {
    let dir = std::env::temp_dir().join(format!("import-cycles-{}", std::process::id()));
    let write = |path: &str, text: &str| {
        let path = dir.join(path);
        fs::create_dir_all(path.parent().unwrap_or(&dir)).unwrap_or_else(|e| panic!("{e}"));
        fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
    };
    write("lib.rs", "mod a;\nmod b;\npub use b::Thing;\n");
    write("a/mod.rs", "mod x;\nmod y;\npub use x::X;\npub use y::Y;\nfn helper() {}\n");
    write("a/x.rs", "use super::y::Y; // use super::z\npub struct X;\nfn f() { let s = \"crate::b::Thing\"; }\n");
    write("a/y.rs", "pub struct Y;\nfn g() { crate::a::X; }\n");
    write("b.rs", "pub struct Thing;\n#[cfg(test)]\nmod tests { use super::*; }\n");
    let found = cycles(&dir);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].contains("a/x.rs → a/y.rs (line 1: super::y::Y)"), "{}", found[0]);
    assert!(found[0].contains("a/y.rs → a/x.rs (line 2: crate::a::X)"), "{}", found[0]);

    // A child that uses its parent's own item, and the parent that uses the child: a cycle.
    write("a/y.rs", "pub struct Y;\nfn g() { super::helper(); }\n");
    write("a/mod.rs", "mod x;\nmod y;\nuse y::Y;\npub use x::X;\nfn helper() {}\n");
    let found = cycles(&dir);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].contains("a/mod.rs → a/y.rs") && found[0].contains("a/y.rs → a/mod.rs"), "{}", found[0]);

    // Through the crate root's re-export: b → a/x (via lib.rs's `pub use`), a/x → b.
    write("a/mod.rs", "mod x;\nmod y;\npub use x::X;\npub use y::Y;\nfn helper() {}\n");
    write("a/y.rs", "pub struct Y;\n");
    write("lib.rs", "mod a;\nmod b;\npub use a::X;\npub use b::Thing;\n");
    write("a/x.rs", "pub struct X;\nfn f() -> crate::Thing { todo!() }\n");
    write("b.rs", "pub struct Thing;\nuse crate::X;\n");
    let found = cycles(&dir);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].contains("b.rs → a/x.rs (line 2: crate::X)"), "{}", found[0]);

    // Re-exports alone make no cycle.
    write("b.rs", "pub struct Thing;\n");
    assert!(cycles(&dir).is_empty());
    #[allow(clippy::let_underscore_must_use, reason = "best-effort clean-up of a temporary folder")]
    let _ = fs::remove_dir_all(&dir);
}
