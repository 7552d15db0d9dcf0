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
        // The built-in file is tested; an error here is a bug caught by the tests.
        let (entries, _) = parse(DEFAULT, "built-in keymap");
        for (k, a) in entries {
            if let Some(a) = a {
                map.insert(k, a);
            }
        }
        Self { map }
    }

    /// Built-in keys merged with `path` when it exists. Every bad entry is reported
    /// (with its line) in the returned warnings and the rest of the file applies; a
    /// file that is not a keymap at all leaves the built-in keys.
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
        let (entries, mut warnings) = parse(&text, &name);
        let builtin = km.clone();
        for (k, a) in entries {
            match a {
                Some(a) => km.map.insert(k, a),
                None => km.map.remove(&k),
            };
        }
        // A keymap with no way out would trap the user in the screen (every key it
        // binds can be pressed: `parse` refuses the others).
        if km.keys_for(Action::Quit).is_empty() {
            warnings.push(format!(
                "{name}: no key quits with this keymap; keeping the built-in {}",
                builtin.hint(Action::Quit)
            ));
            for (k, a) in &builtin.map {
                if *a == Action::Quit {
                    km.map.insert(k.clone(), Action::Quit);
                }
            }
        }
        (km, warnings)
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
        Action::all()
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

/// Each action's key as the help writes it, from the active keymap: what notices name
/// ("Esc stops it"), so a rebound key is the one they say.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyHints(BTreeMap<Action, String>);

impl KeyHints {
    pub fn of(keymap: &Keymap) -> Self {
        Self(Action::all().iter().map(|&a| (a, keymap.hint(a))).collect())
    }

    /// The key of `a` ("-" where nothing is bound to it).
    pub fn key(&self, a: Action) -> &str {
        self.0.get(&a).map_or("-", String::as_str)
    }
}

impl Default for KeyHints {
    fn default() -> Self {
        Self::of(&Keymap::builtin())
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

/// Parses a keymap file; `None` actions unbind. Returns the good entries and a message
/// per bad one (a file that is not a keymap at all: no entries and one message).
fn parse(text: &str, name: &str) -> (Vec<(KeySpec, Option<Action>)>, Vec<String>) {
    match parse_file(text, name) {
        Ok(x) => x,
        Err(e) => (Vec::new(), vec![format!("{e:#}; using the built-in keys")]),
    }
}

/// The action names a keymap may use, for error messages.
fn action_names() -> String {
    let mut names: Vec<String> = Action::all().iter().map(|a| a.name()).collect();
    names.push("none".into());
    names.join(", ")
}

#[allow(clippy::type_complexity)]
fn parse_file(text: &str, name: &str) -> Result<(Vec<(KeySpec, Option<Action>)>, Vec<String>)> {
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
    let mut errors = Vec::new();
    for (key, action) in file.keys {
        let line = line_of_key(text, &key);
        let spec = match parse_key(&key) {
            Ok(s) => s,
            Err(e) => {
                errors.push(format!("{name}:{line}: key `{key}`: {e}; entry skipped"));
                continue;
            }
        };
        let action = if action == "none" {
            None
        } else {
            match serde_json::from_value::<Action>(serde_json::Value::String(action.clone())) {
                Ok(a) => Some(a),
                Err(_) => {
                    errors.push(format!(
                        "{name}:{line}: unknown action `{action}`; entry skipped (actions: {})",
                        action_names()
                    ));
                    continue;
                }
            }
        };
        out.push((spec, action));
    }
    Ok((out, errors))
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
        // A typed character carries its shift state (`X`, `?`): the terminal never
        // reports shift with it, so `shift-x` could never be pressed.
        if mods.iter().any(|m| m == "shift") {
            let others: Vec<&String> = mods.iter().filter(|m| *m != "shift").collect();
            if others.is_empty() {
                bail!(
                    "shift with a character can never be pressed as written: write the character shift types (`{}` for a letter)",
                    c.to_uppercase()
                );
            }
            bail!("shift with a character can never be pressed as written: drop `shift-` (the terminal reports ctrl and alt with the plain key)");
        }
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
        if (l == "space" || l == "minus") && mods.iter().any(|m| m == "shift") {
            bail!("shift with `{l}` can never be pressed as written (the terminal reports the character)");
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
        let (entries, errors) = parse(DEFAULT, "built-in");
        assert!(errors.is_empty(), "{errors:?}");
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
        for &a in Action::all() {
            assert!(!km.keys_for(a).is_empty(), "{a:?} has no key");
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
            warn[0].contains("keymap.toml:3")
                && warn[0].contains("fly")
                && warn[0].contains("toggle_record"),
            "{}",
            warn[0]
        );
        // The rest of the file applies.
        assert_eq!(
            km.action(&key(KeyCode::Char('x'), KeyModifiers::CONTROL)),
            Some(Action::Quit)
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
