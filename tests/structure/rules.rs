//! The rules, on sources held as text: comments and string literals are masked first, so that
//! braces and paths are read from code only.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use regex::Regex;

/// One crate's production sources: each file's path and its text, masked.
pub struct Source {
    pub root: PathBuf,
    pub files: Vec<(PathBuf, String)>,
}

impl Source {
    /// Every `.rs` file under `src` except `bin/`, masked ([`mask`]).
    pub fn read(src: &Path) -> Source {
        let mut files = Vec::new();
        let mut dirs = vec![src.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    if path != src.join("bin") {
                        dirs.push(path);
                    }
                } else if path.extension().is_some_and(|e| e == "rs") && !is_test(&path) {
                    let text = std::fs::read_to_string(&path).unwrap();
                    files.push((path, mask(&text)));
                }
            }
        }
        files.sort();
        Source {
            root: src.to_path_buf(),
            files,
        }
    }

    /// A crate made of `(path under src, text)` pairs (the rules' own tests).
    #[cfg(test)]
    pub fn of(files: &[(&str, &str)]) -> Source {
        Source {
            root: PathBuf::from("src"),
            files: files
                .iter()
                .map(|(p, t)| (Path::new("src").join(p), mask(t)))
                .collect(),
        }
    }

    /// The module path a file defines: `a/b.rs` and `a/b/mod.rs` are `[a, b]`, `lib.rs` is `[]`.
    fn module_of(&self, file: &Path) -> Vec<String> {
        let rel = file.strip_prefix(&self.root).unwrap().with_extension("");
        let mut parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts.last().is_some_and(|l| l == "mod") {
            parts.pop();
        }
        if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
            parts.clear();
        }
        parts
    }
}

/// A file of tests (`tests.rs`, or under a `tests/` folder): not production code.
fn is_test(path: &Path) -> bool {
    path.components().any(|c| c.as_os_str() == "tests") || path.ends_with("tests.rs")
}

/// One breach of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breach {
    /// The rule broken, and where: what [`crate::OWED`] lists.
    pub key: String,
    /// What was found, for the reader.
    pub detail: String,
}

impl Breach {
    pub fn key(&self) -> String {
        self.key.clone()
    }
}

impl fmt::Display for Breach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.key, self.detail)
    }
}

/// `text` with every comment blanked and every string's and char's contents replaced by `s`,
/// line breaks kept: braces, paths and line counts then come from code only.
pub fn mask(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let keep = |c: char, blank: char| if c == '\n' { '\n' } else { blank };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(keep(b[i], ' '));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !(b[i - 1].is_alphanumeric() || b[i - 1] == '_'))
        {
            // a raw string: r"..." or r#"..."#
            let mut j = i + 1;
            while j < b.len() && b[j] == '#' {
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            out.extend(&b[i..=j]);
            i = j + 1;
            while i < b.len() {
                if b[i] == '"' && (0..hashes).all(|h| b.get(i + 1 + h) == Some(&'#')) {
                    out.push('"');
                    out.extend(std::iter::repeat_n('#', hashes));
                    i += 1 + hashes;
                    break;
                }
                out.push(keep(b[i], 's'));
                i += 1;
            }
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push('s');
                    i += 1;
                }
                if i < b.len() {
                    out.push(keep(b[i], 's'));
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c == '\'' {
            // a char ('x', '\n', '\u{..}') or a lifetime ('a)
            if next == Some('\\') {
                out.push('\'');
                i += 2;
                while i < b.len() && b[i] != '\'' {
                    i += 1;
                }
                out.push_str("s'");
                i += 1;
            } else if b.get(i + 2) == Some(&'\'') {
                out.push_str("'s'");
                i += 3;
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The part of a masked file before its tests.
fn production(text: &str) -> &str {
    match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    }
}

/// Each top-level module's imports of the crate's other top-level modules.
pub fn top_graph(src: &Source) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeMap<Vec<String>, &str> = src
        .files
        .iter()
        .map(|(p, t)| (src.module_of(p), production(t)))
        .collect();
    let reexports = reexports(modules.get(&Vec::new()).copied().unwrap_or(""));
    let use_re = Regex::new(r"\buse\s+([^;]+);").unwrap();
    let inline_re = Regex::new(r"\b((?:crate|super|self)(?:::\w+)+)").unwrap();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in &modules {
        let Some(top) = module.first() else { continue };
        graph.entry(top.clone()).or_default();
        let mut paths: Vec<String> = Vec::new();
        for u in use_re.captures_iter(text) {
            paths.extend(expand_use(&u[1]));
        }
        paths.extend(inline_re.captures_iter(text).map(|c| c[1].to_string()));
        for path in paths {
            let target = absolute(module, &path);
            let Some(to) = resolve(&target, &modules, &reexports) else {
                continue;
            };
            if let Some(to_top) = to.first() {
                if to_top != top {
                    graph.entry(top.clone()).or_default().insert(to_top.clone());
                }
            }
        }
    }
    graph
}

/// The root's `pub use a::b::{X, Y}` and `pub use a::b::X;`: each name and the module it is from.
fn reexports(root: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let group = Regex::new(r"pub\s+use\s+([\w:]+)::\{([^}]*)\}").unwrap();
    let single = Regex::new(r"pub\s+use\s+([\w:]+)::(\w+)\s*;").unwrap();
    let base = |s: &str| -> Vec<String> {
        s.split("::")
            .filter(|x| *x != "crate" && *x != "self" && !x.is_empty())
            .map(str::to_string)
            .collect()
    };
    for c in group.captures_iter(root) {
        for name in c[2].split(',') {
            let name = name.rsplit(" as ").next().unwrap_or("").trim();
            if !name.is_empty() {
                out.insert(name.to_string(), base(&c[1]));
            }
        }
    }
    for c in single.captures_iter(root) {
        out.insert(c[2].to_string(), base(&c[1]));
    }
    out
}

/// `a::b::{c, d::e as f}` as `a::b::c` and `a::b::d::e`.
fn expand_use(body: &str) -> Vec<String> {
    let body: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let Some(open) = body.find("::{") else {
        return vec![body.split(" as ").next().unwrap_or("").trim().to_string()];
    };
    let prefix = &body[..open];
    let inner = body[open + 3..].trim_end().trim_end_matches('}');
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
        .into_iter()
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .map(|i| {
            let head = i.split("::{").next().unwrap_or("");
            let head = head.split(" as ").next().unwrap_or("").trim();
            format!("{prefix}::{head}")
        })
        .collect()
}

/// A path as written in `module`, from the crate root (`crate::`, `super::`, `self::`);
/// empty for a path outside the crate.
fn absolute(module: &[String], path: &str) -> Vec<String> {
    let seg: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    match seg.first() {
        Some(&"crate") => seg[1..].iter().map(|s| s.to_string()).collect(),
        Some(&"self") => module
            .iter()
            .cloned()
            .chain(seg[1..].iter().map(|s| s.to_string()))
            .collect(),
        Some(&"super") => {
            let mut base = module[..module.len().saturating_sub(1)].to_vec();
            let mut k = 1;
            while seg.get(k) == Some(&"super") {
                base.pop();
                k += 1;
            }
            base.extend(seg[k..].iter().map(|s| s.to_string()));
            base
        }
        _ => Vec::new(),
    }
}

/// The module that defines `target`: its longest prefix that is a module, or the module a root
/// re-export names.
fn resolve<'a>(
    target: &[String],
    modules: &'a BTreeMap<Vec<String>, &str>,
    reexports: &'a BTreeMap<String, Vec<String>>,
) -> Option<&'a Vec<String>> {
    for n in (1..=target.len()).rev() {
        if let Some((k, _)) = modules.get_key_value(&target[..n]) {
            return Some(k);
        }
    }
    let first = target.first()?;
    let base = reexports.get(first)?;
    modules.get_key_value(base).map(|(k, _)| k)
}

/// Strongly connected sets of more than one node (Tarjan).
pub fn cycles_of(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// The import cycles between `name`'s top-level modules.
pub fn cycles(name: &str, src: &Source) -> Vec<Breach> {
    let graph = top_graph(src);
    cycles_of(&graph)
        .into_iter()
        .map(|comp| {
            let edges: Vec<String> = comp
                .iter()
                .map(|m| {
                    let to: Vec<&str> = graph[m]
                        .iter()
                        .filter(|w| comp.contains(w))
                        .map(String::as_str)
                        .collect();
                    format!("{m} -> {}", to.join(" "))
                })
                .collect();
            Breach {
                key: format!("cycle {name}: {}", comp.join(", ")),
                detail: edges.join("; "),
            }
        })
        .collect()
}

/// A file with more than `max` code lines before its tests.
pub fn long_file(rel: &str, text: &str, max: usize) -> Option<Breach> {
    let n = production(text)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count();
    (n > max).then(|| Breach {
        key: format!("long file {rel}"),
        detail: format!("{n} code lines, at most {max}"),
    })
}

/// Each `too_many_arguments` allowance.
pub fn too_many_arguments(rel: &str, text: &str) -> Vec<Breach> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains("too_many_arguments"))
        .map(|(i, _)| Breach {
            key: format!("too_many_arguments {rel}"),
            detail: format!("line {}", i + 1),
        })
        .collect()
}

/// Each `impl Connection` block.
pub fn impl_connection(rel: &str, text: &str) -> Option<Breach> {
    let re =
        Regex::new(r"(?m)^\s*impl\s*(<[^>]*>)?\s*(crate::)?Connection\s*(<[^>]*>)?\s*\{").unwrap();
    let lines: Vec<usize> = re
        .find_iter(production(text))
        .map(|m| text[..m.start()].lines().count() + 1)
        .collect();
    (!lines.is_empty()).then(|| Breach {
        key: format!("impl Connection in {rel}"),
        detail: format!("at lines {lines:?}"),
    })
}

/// Each function with a tuple pattern among its parameters (`(a, b): (A, B)`): a pair packed
/// to dodge `too_many_arguments`, or values that want a name.
pub fn tuple_parameters(rel: &str, text: &str) -> Vec<Breach> {
    let re =
        Regex::new(r"(?m)^[ \t]*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)")
            .unwrap();
    let text = production(text);
    let mut out = Vec::new();
    for c in re.captures_iter(text) {
        let name = &c[6];
        let sig = &text[c.get(0).unwrap().end()..];
        // generics first, then the parameter list
        let Some(open) = sig.find('(') else { continue };
        let mut depth = 0i32;
        let mut expect_param = false;
        for ch in sig[open..].chars() {
            match ch {
                c if c.is_whitespace() => continue,
                '(' if expect_param && depth == 1 => {
                    out.push(Breach {
                        key: format!("tuple parameter {rel}::{name}"),
                        detail: "a parameter is a tuple pattern".into(),
                    });
                    break;
                }
                '(' | '[' | '<' => depth += 1,
                ')' | ']' | '>' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                break;
            }
            expect_param = depth == 1 && (ch == '(' || ch == ',');
        }
    }
    out
}

/// Each function spanning more than `max` lines, by name.
pub fn long_functions(rel: &str, text: &str, max: usize) -> Vec<Breach> {
    let re = Regex::new(
        r#"(?m)^[ \t]*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+"s*"\s+)?fn\s+(\w+)"#,
    )
    .unwrap();
    let text = production(text);
    let mut out = Vec::new();
    for c in re.captures_iter(text) {
        let start = c.get(0).unwrap().start();
        let name = &c[7];
        // the body: from the first `{` at the signature's depth to its match; a `;` first is a
        // declaration without one
        let mut depth = 0i32;
        let mut body = None;
        for (i, ch) in text[start..].char_indices() {
            match ch {
                '(' | '[' if body.is_none() => depth += 1,
                ')' | ']' if body.is_none() => depth -= 1,
                ';' if body.is_none() && depth == 0 => break,
                '{' if body.is_none() && depth == 0 => {
                    body = Some(start + i);
                    break;
                }
                _ => {}
            }
        }
        let Some(open) = body else { continue };
        let mut depth = 0;
        let mut end = text.len();
        for (i, ch) in text[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let lines = text[start..=end.min(text.len() - 1)].lines().count();
        if lines > max {
            out.push(Breach {
                key: format!("long fn {rel}::{name}"),
                detail: format!("{lines} lines, at most {max}"),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tuple_parameter_is_caught() {
        let text = "fn f(now: u64, (a, b): (u8, u8)) {}\nfn g(x: (u8, u8), y: Vec<(u8, u8)>) {}\nfn h<T: Fn((u8,))>(\n    t: T,\n    (c, d): (u8, u8),\n) {}\n";
        let found = tuple_parameters("x.rs", text);
        let keys: Vec<String> = found.iter().map(Breach::key).collect();
        assert_eq!(keys, ["tuple parameter x.rs::f", "tuple parameter x.rs::h"]);
    }

    #[test]
    fn a_cycle_between_top_level_modules_is_caught() {
        let src = Source::of(&[
            ("lib.rs", "mod a;\nmod b;\nmod c;\npub use a::{Alpha};\n"),
            ("a.rs", "use crate::b::Beta;\npub struct Alpha;\n"),
            (
                "b.rs",
                "pub struct Beta;\nfn f() -> crate::Alpha { todo!() }\n",
            ),
            ("c.rs", "use super::a::Alpha;\n"),
        ]);
        let found = cycles("demo", &src);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].key, "cycle demo: a, b");
    }

    #[test]
    fn a_module_and_its_submodules_are_one() {
        let src = Source::of(&[
            ("lib.rs", "mod a;\nmod b;\n"),
            ("a/mod.rs", "mod inner;\nuse self::inner::X;\n"),
            ("a/inner.rs", "use super::Y;\nuse crate::b::Z;\n"),
            ("b.rs", "pub struct Z;\n"),
        ]);
        assert!(cycles("demo", &src).is_empty());
        let graph = top_graph(&src);
        assert_eq!(graph["a"], BTreeSet::from(["b".to_string()]));
    }

    #[test]
    fn paths_in_comments_strings_and_tests_are_not_imports() {
        let src = Source::of(&[
            ("lib.rs", "mod a;\nmod b;\n"),
            ("a.rs", "use crate::b::B;\n"),
            (
                "b.rs",
                "// crate::a::A\nconst S: &str = \"crate::a::A\";\n#[cfg(test)]\nmod tests { use crate::a::A; }\n",
            ),
        ]);
        assert!(cycles("demo", &src).is_empty());
    }

    #[test]
    fn grouped_and_nested_uses_are_read() {
        assert_eq!(
            expand_use("crate::{a::X, b::{Y, Z}, c as d}"),
            ["crate::a::X", "crate::b", "crate::c"]
        );
    }

    #[test]
    fn impl_connection_is_found_in_either_form() {
        assert!(impl_connection("x.rs", "impl<P> Connection<P> {\n}\n").is_some());
        assert!(impl_connection("x.rs", "impl<P> crate::Connection<P> {}\n").is_some());
        assert!(impl_connection("x.rs", "impl ConnectionConfig {}\n").is_none());
        assert!(impl_connection("x.rs", "impl<P> Debug for Connection<P> {}\n").is_none());
    }

    #[test]
    fn long_functions_and_files_are_counted_from_code() {
        let body = "    x += 1;\n".repeat(120);
        let text = mask(&format!(
            "/// doc\npub(crate) fn long(a: &[u8; 4]) -> u32 {{\n    let s = \"}}\";\n{body}}}\nfn short() {{ let c = '{{'; }}\ntrait T {{ fn decl(&self); }}\n"
        ));
        let found = long_functions("f.rs", &text, 100);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].key, "long fn f.rs::long");
        assert!(long_file("f.rs", &text, 100).is_some());
        let comments = mask(&"// a comment\n\n/* block\n */\n".repeat(200));
        assert!(long_file("c.rs", &comments, 10).is_none());
    }

    #[test]
    fn too_many_arguments_allowances_are_found() {
        let text = "#[allow(clippy::too_many_arguments)]\nfn f() {}\n";
        assert_eq!(too_many_arguments("f.rs", text).len(), 1);
    }
}
