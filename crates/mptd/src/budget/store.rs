//! The budgets' counts kept across restarts: `budget.json` in the state directory, version 1,
//! keyed by path name. Written whole to a temporary file, synced, and renamed over the old
//! one, so that a crash or a power cut leaves the old file or the new one, never half of
//! one. The daemon writes it at most once a minute, and at exit: a router's flash wears.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::calendar::Window;
use super::Count;

/// The file's name in the state directory.
pub const FILE: &str = "budget.json";

#[derive(Debug, Serialize, Deserialize)]
struct FileV1 {
    version: u32,
    paths: BTreeMap<String, SavedCount>,
}

#[derive(Debug, Serialize, Deserialize)]
struct SavedCount {
    used: u64,
    start: i64,
    end: i64,
    warned: bool,
    exhausted: bool,
}

/// What reading the file found.
#[derive(Debug, Default)]
pub struct Loaded {
    pub counts: BTreeMap<String, Count>,
    /// The file was unreadable or not a budget file: what was wrong, and where it was moved
    /// (`budget.json.bad`) so that the next write does not lose it.
    pub corrupt: Option<String>,
}

/// Read `dir`'s budget file. None there is no count yet; a file that cannot be read as one is
/// renamed `.bad` and said in [`Loaded::corrupt`].
pub fn load(dir: &Path) -> Loaded {
    let file = dir.join(FILE);
    let text = match std::fs::read(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Loaded::default(),
        Err(e) => {
            return Loaded {
                counts: BTreeMap::new(),
                corrupt: Some(format!("cannot read {}: {e}", file.display())),
            }
        }
    };
    match parse(&text) {
        Ok(counts) => Loaded {
            counts,
            corrupt: None,
        },
        Err(why) => {
            let bad = bad_name(&file);
            let moved = match std::fs::rename(&file, &bad) {
                Ok(()) => format!("moved to {}", bad.display()),
                Err(e) => format!("could not be moved to {}: {e}", bad.display()),
            };
            Loaded {
                counts: BTreeMap::new(),
                corrupt: Some(format!(
                    "{} is not a budget file ({why}): {moved}",
                    file.display()
                )),
            }
        }
    }
}

fn bad_name(file: &Path) -> PathBuf {
    let mut s = file.as_os_str().to_owned();
    s.push(".bad");
    PathBuf::from(s)
}

/// The counts of a file's text, or what is wrong with it.
pub fn parse(text: &[u8]) -> Result<BTreeMap<String, Count>, String> {
    let f: FileV1 = serde_json::from_slice(text).map_err(|e| e.to_string())?;
    if f.version != 1 {
        return Err(format!("version {}, expected 1", f.version));
    }
    let mut out = BTreeMap::new();
    for (name, c) in f.paths {
        if c.start >= c.end {
            return Err(format!("path {name:?}: its period ends before it starts"));
        }
        out.insert(
            name,
            Count {
                used: c.used,
                window: Window {
                    start: c.start,
                    end: c.end,
                },
                warned: c.warned,
                exhausted: c.exhausted,
            },
        );
    }
    Ok(out)
}

/// The file's text for `counts`.
pub fn render(counts: &BTreeMap<String, Count>) -> String {
    let f = FileV1 {
        version: 1,
        paths: counts
            .iter()
            .map(|(n, c)| {
                let saved = SavedCount {
                    used: c.used,
                    start: c.window.start,
                    end: c.window.end,
                    warned: c.warned,
                    exhausted: c.exhausted,
                };
                (n.clone(), saved)
            })
            .collect(),
    };
    serde_json::to_string_pretty(&f).unwrap_or_default() + "\n"
}

/// Write `counts` to `dir`'s budget file: a temporary file, synced, renamed over the old one,
/// and the directory synced.
pub fn save(dir: &Path, counts: &BTreeMap<String, Count>) -> std::io::Result<()> {
    let file = dir.join(FILE);
    let tmp = dir.join(format!("{FILE}.tmp"));
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(render(counts).as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &file)?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mptd-budget-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    }

    #[test]
    fn counts_written_are_read_back() {
        let d = dir("roundtrip");
        let mut counts = BTreeMap::new();
        let count = Count {
            used: 5_123_456,
            window: Window {
                start: 100,
                end: 200,
            },
            warned: true,
            exhausted: false,
        };
        counts.insert("lte".to_owned(), count);
        save(&d, &counts).expect("saved");
        let l = load(&d);
        assert_eq!((l.counts, l.corrupt), (counts, None));
        assert!(!d.join("budget.json.tmp").exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_missing_file_is_no_count_and_a_corrupt_one_is_moved_aside() {
        let d = dir("corrupt");
        assert!(load(&d).counts.is_empty() && load(&d).corrupt.is_none());
        std::fs::write(d.join(FILE), "{\"version\": 1, \"paths\": {\"lte\": 3").expect("write");
        let l = load(&d);
        assert!(l.counts.is_empty());
        assert!(l.corrupt.expect("said").contains("budget.json.bad"));
        assert!(d.join("budget.json.bad").exists() && !d.join(FILE).exists());
        let bad_period = "{\"version\":1,\"paths\":{\"a\":{\"used\":1,\"start\":9,\"end\":9,\"warned\":false,\"exhausted\":false}}}";
        assert!(parse(bad_period.as_bytes()).is_err());
        assert!(parse(b"{\"version\":2,\"paths\":{}}").is_err());
        let _ = std::fs::remove_dir_all(&d);
    }
}
