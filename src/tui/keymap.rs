//! Keys → actions: the built-in table, merged with the user's keymap.toml entry by
//! entry. The help screen is generated from the same table.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, bail, Result};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde::Deserialize;

use super::action::Action;
use super::config::{line_of, line_of_key};

const DEFAULT: &str = include_str!("default_keymap.toml");
/// Largest keymap or theme file read (they are a few KiB).
pub const CONFIG_MAX: u64 = 256 * 1024;

/// A key with modifiers, in the canonical form the keymap uses (`ctrl-c`, `alt-left`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeySpec(pub String);

impl KeySpec {
    /// Modifiers in a fixed order, then the key: `alt-shift-left`.
    fn new<S: AsRef<str> + Ord>(mut mods: Vec<S>, key: &str) -> Self {
        mods.sort();
        mods.dedup();
        let mut out: String = mods.iter().map(|m| format!("{}-", m.as_ref())).collect();
        out.push_str(key);
        KeySpec(out)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeymapFile {
    #[serde(default)]
    keys: BTreeMap<String, String>,
}

/// The active key bindings.
#[derive(Debug, Clone)]
pub struct Keymap {
    map: BTreeMap<KeySpec, Action>,
}

impl Keymap {
    /// The built-in keymap.
    pub fn builtin() -> Self {
        let mut map = BTreeMap::new();
        // The built-in file is tested; a failure here is a bug caught by the tests.
        if let Ok(entries) = parse(DEFAULT, "built-in keymap") {
            for (k, a) in entries {
                if let Some(a) = a {
                    map.insert(k, a);
                }
            }
        }
        Self { map }
    }

    /// Built-in keys merged with `path` when it exists. A bad file is reported (with its
    /// line) in the returned warnings and the built-in keys are used.
    pub fn load(path: &Path) -> (Self, Vec<String>) {
        let mut km = Self::builtin();
        if !path.exists() {
            return (km, Vec::new());
        }
        let name = path.display().to_string();
        let text = match crate::read_bounded(path, CONFIG_MAX) {
            Ok(t) => t,
            Err(e) => return (km, vec![format!("{e:#}; using the built-in keys")]),
        };
        match parse(&text, &name) {
            Ok(entries) => {
                let builtin = km.clone();
                for (k, a) in entries {
                    match a {
                        Some(a) => km.map.insert(k, a),
                        None => km.map.remove(&k),
                    };
                }
                // A keymap with no way out would trap the user in the screen.
                if km.keys_for(Action::Quit).is_empty() {
                    let warning = format!(
                        "{name}: no key quits with this keymap; keeping the built-in {}",
                        builtin.hint(Action::Quit)
                    );
                    for (k, a) in &builtin.map {
                        if *a == Action::Quit {
                            km.map.insert(k.clone(), Action::Quit);
                        }
                    }
                    return (km, vec![warning]);
                }
                (km, Vec::new())
            }
            Err(e) => (km, vec![format!("{e:#}; using the built-in keys")]),
        }
    }

    pub fn action(&self, key: &KeyEvent) -> Option<Action> {
        self.map.get(&canonical(key)?).copied()
    }

    /// Keys bound to `action`, as written in the keymap.
    pub fn keys_for(&self, action: Action) -> Vec<&str> {
        self.map
            .iter()
            .filter(|(_, a)| **a == action)
            .map(|(k, _)| k.0.as_str())
            .collect()
    }

    /// `(keys, action, help)` for every bound action, in help order.
    pub fn help_rows(&self) -> Vec<(String, Action, &'static str)> {
        Action::ALL
            .iter()
            .filter_map(|a| {
                let keys = self.keys_for(*a);
                // Written as people write keys (`Ctrl+R`, `Alt+-`), as hints are.
                let shown: Vec<String> = keys.iter().map(|k| pretty(k)).collect();
                (!keys.is_empty()).then(|| (shown.join(" "), *a, a.help()))
            })
            .collect()
    }

    /// The first key bound to `action`, as people write keys (`Ctrl+R`, `F5`), or `-`.
    /// The key shown for `action`: a function key where one is bound (the documented
    /// keys: F5, not its Ctrl+P alias), else the first.
    pub fn hint(&self, action: Action) -> String {
        let keys = self.keys_for(action);
        let fkey = keys.iter().find(|k| {
            k.len() > 1 && k.starts_with('f') && k[1..].bytes().all(|b| b.is_ascii_digit())
        });
        fkey.or(keys.first()).map_or("-".to_string(), |k| pretty(k))
    }
}

/// A keymap key as people write it: `ctrl-r` → `Ctrl+R`, `f5` → `F5`, `alt-minus` →
/// `Alt+-`.
pub fn pretty(spec: &str) -> String {
    let (mods, key) = match spec.rsplit_once('-') {
        // `alt--`: the key itself is `-`.
        Some((m, "")) => (m.trim_end_matches('-'), "-"),
        Some((m, k)) => (m, k),
        None => ("", spec),
    };
    let key = match key {
        "minus" => "-".to_string(),
        "pageup" => "PgUp".to_string(),
        "pagedown" => "PgDn".to_string(),
        k if k.len() == 1 => k.to_uppercase(),
        k => {
            let mut c = k.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect())
                .unwrap_or_default()
        }
    };
    let mut out = String::new();
    for m in mods.split('-').filter(|m| !m.is_empty()) {
        let mut c = m.chars();
        if let Some(f) = c.next() {
            out.extend(f.to_uppercase().chain(c));
            out.push('+');
        }
    }
    out.push_str(&key);
    out
}

/// Parses a keymap file; `None` actions unbind.
fn parse(text: &str, name: &str) -> Result<Vec<(KeySpec, Option<Action>)>> {
    // A binding written above the table (`"ctrl-x" = "quit"` on its own) is the
    // likely slip: say where it belongs rather than serde's "expected `keys`".
    if let Ok(top) = text.parse::<toml::Table>() {
        // The topmost one (the table is sorted by key); one whose line cannot be found
        // is left to serde's message, which has its line.
        let stray = top
            .iter()
            .filter(|(k, v)| *k != "keys" && !v.is_table())
            .map(|(k, _)| (line_of_key(text, k), k))
            .filter(|(line, _)| *line > 0)
            .min();
        if let Some((line, k)) = stray {
            bail!("{name}:{line}: `{k}` is outside the [keys] table: bindings go below a `[keys]` line");
        }
    }
    let file: KeymapFile = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(0, |s| line_of(text, s.start));
        anyhow!("{name}:{line}: {}", e.message())
    })?;
    let mut out = Vec::new();
    for (key, action) in file.keys {
        let line = line_of_key(text, &key);
        let spec = parse_key(&key).map_err(|e| anyhow!("{name}:{line}: key `{key}`: {e}"))?;
        let action = if action == "none" {
            None
        } else {
            Some(
                serde_json::from_value::<Action>(serde_json::Value::String(action.clone()))
                    .map_err(|_| {
                        anyhow!("{name}:{line}: unknown action `{action}` (see `?` for the list)")
                    })?,
            )
        };
        out.push((spec, action));
    }
    Ok(out)
}

const NAMED: &[&str] = &[
    "enter",
    "esc",
    "tab",
    "backspace",
    "delete",
    "up",
    "down",
    "left",
    "right",
    "home",
    "end",
    "pageup",
    "pagedown",
    "space",
    "minus",
];

/// Validates and normalises a key string (`Ctrl-C` → `ctrl-c`).
pub fn parse_key(s: &str) -> Result<KeySpec> {
    let lower = s.to_string();
    let mut mods = Vec::new();
    let mut rest = lower.as_str();
    loop {
        let l = rest.to_ascii_lowercase();
        if let Some(m) = ["ctrl-", "alt-", "shift-"]
            .iter()
            .find(|m| l.starts_with(**m))
        {
            if rest.len() > m.len() {
                mods.push(m.trim_end_matches('-').to_string());
                rest = &rest[m.len()..];
                continue;
            }
        }
        break;
    }
    let key = if rest.chars().count() == 1 {
        let c = rest.chars().next().unwrap_or(' ');
        if mods.iter().any(|m| m == "ctrl" || m == "alt") {
            c.to_ascii_lowercase().to_string()
        } else {
            c.to_string()
        }
    } else {
        let l = rest.to_ascii_lowercase();
        let fkey = l
            .strip_prefix('f')
            .and_then(|n| n.parse::<u8>().ok())
            .is_some_and(|n| (1..=12).contains(&n));
        if !NAMED.contains(&l.as_str()) && !fkey {
            bail!("unknown key name `{rest}`");
        }
        l
    };
    Ok(KeySpec::new(mods, &key))
}

/// The keymap form of a terminal key event (`None` for keys the keymap cannot name).
pub fn canonical(key: &KeyEvent) -> Option<KeySpec> {
    let mut mods = Vec::new();
    let m = key.modifiers;
    if m.contains(KeyModifiers::ALT) {
        mods.push("alt");
    }
    if m.contains(KeyModifiers::CONTROL) {
        mods.push("ctrl");
    }
    let name = match key.code {
        KeyCode::Char(' ') => "space".to_string(),
        KeyCode::Char('-') if !mods.is_empty() => "minus".to_string(),
        KeyCode::Char(c) if !mods.is_empty() => c.to_ascii_lowercase().to_string(),
        // A character already carries its shift state.
        KeyCode::Char(c) => c.to_string(),
        other => {
            if m.contains(KeyModifiers::SHIFT) {
                mods.push("shift");
            }
            match other {
                KeyCode::Enter => "enter".into(),
                KeyCode::Esc => "esc".into(),
                KeyCode::Tab => "tab".into(),
                KeyCode::BackTab => {
                    mods.push("shift");
                    "tab".into()
                }
                KeyCode::Backspace => "backspace".into(),
                KeyCode::Delete => "delete".into(),
                KeyCode::Up => "up".into(),
                KeyCode::Down => "down".into(),
                KeyCode::Left => "left".into(),
                KeyCode::Right => "right".into(),
                KeyCode::Home => "home".into(),
                KeyCode::End => "end".into(),
                KeyCode::PageUp => "pageup".into(),
                KeyCode::PageDown => "pagedown".into(),
                KeyCode::F(n) => format!("f{n}"),
                _ => return None,
            }
        }
    };
    Some(KeySpec::new(mods, &name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, m: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, m)
    }

    #[test]
    fn builtin_keymap_parses_and_binds_the_essentials() {
        let entries = parse(DEFAULT, "built-in").unwrap();
        assert!(entries.len() > 30);
        let km = Keymap::builtin();
        assert_eq!(
            km.action(&key(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some(Action::Interrupt)
        );
        assert_eq!(
            km.action(&key(KeyCode::Enter, KeyModifiers::NONE)),
            Some(Action::Submit)
        );
        assert_eq!(
            km.action(&key(KeyCode::Char('?'), KeyModifiers::SHIFT)),
            Some(Action::Help)
        );
        assert_eq!(
            km.action(&key(KeyCode::F(5), KeyModifiers::NONE)),
            Some(Action::TogglePause)
        );
        assert_eq!(
            km.action(&key(KeyCode::Left, KeyModifiers::ALT)),
            Some(Action::RoundPrev)
        );
        assert_eq!(
            km.action(&key(KeyCode::Char('-'), KeyModifiers::ALT)),
            Some(Action::Slower)
        );
        // Every bindable action reachable from some key.
        for a in Action::ALL {
            assert!(!km.keys_for(*a).is_empty(), "{a:?} has no key");
        }
    }

    #[test]
    fn key_strings_normalise() {
        assert_eq!(parse_key("Ctrl-C").unwrap().0, "ctrl-c");
        assert_eq!(parse_key("shift-alt-Left").unwrap().0, "alt-shift-left");
        assert_eq!(parse_key("F12").unwrap().0, "f12");
        assert_eq!(parse_key("?").unwrap().0, "?");
        assert!(parse_key("ctrl-banana").is_err());
        assert!(parse_key("f13").is_err());
    }

    #[test]
    fn user_file_merges_unbinds_and_reports_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("keymap.toml");
        std::fs::write(&p, "[keys]\n\"ctrl-x\" = \"quit\"\n\"ctrl-q\" = \"none\"\n").unwrap();
        let (km, warn) = Keymap::load(&p);
        assert!(warn.is_empty(), "{warn:?}");
        assert_eq!(
            km.action(&key(KeyCode::Char('x'), KeyModifiers::CONTROL)),
            Some(Action::Quit)
        );
        assert_eq!(
            km.action(&key(KeyCode::Char('q'), KeyModifiers::CONTROL)),
            None
        );
        // Defaults not mentioned survive.
        assert_eq!(
            km.action(&key(KeyCode::Enter, KeyModifiers::NONE)),
            Some(Action::Submit)
        );

        std::fs::write(&p, "[keys]\n\"ctrl-x\" = \"quit\"\n\"ctrl-z\" = \"fly\"\n").unwrap();
        let (km, warn) = Keymap::load(&p);
        assert_eq!(warn.len(), 1);
        assert!(
            warn[0].contains("keymap.toml:3") && warn[0].contains("fly"),
            "{}",
            warn[0]
        );
        assert_eq!(
            km.action(&key(KeyCode::Char('x'), KeyModifiers::CONTROL)),
            None
        );

        std::fs::write(&p, "[keys]\n\"ctrl-x\" = \n").unwrap();
        let (_, warn) = Keymap::load(&p);
        assert!(warn[0].contains("keymap.toml:2"), "{}", warn[0]);

        // Bindings without their table: the line, and where they belong.
        std::fs::write(&p, "# mine\n\"ctrl-x\" = \"quit\"\n\"alt-a\" = \"quit\"\n").unwrap();
        let (_, warn) = Keymap::load(&p);
        assert!(
            warn[0].contains("keymap.toml:2") && warn[0].contains("[keys]"),
            "{}",
            warn[0]
        );
    }
}
