//! Colour themes with semantic roles: built-ins from themes/*.toml, user files merged
//! over a parent.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, bail, Result};
use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;
use toml::Spanned;

use super::config::{line_of, line_of_key};

/// Built-in themes: (name, TOML).
pub const BUILTIN: &[(&str, &str)] = &[
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    ("basic16", include_str!("../../themes/basic16.toml")),
];

macro_rules! roles {
    ($($role:ident: $doc:literal,)*) => {
        /// Styles by role; every pane draws with these names only.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Theme {
            pub name: String,
            $(#[doc = $doc] pub $role: Style,)*
        }

        /// Every role a theme file may set.
        pub const ROLES: &[&str] = &[$(stringify!($role)),*];

        impl Theme {
            fn blank(name: &str) -> Self {
                Self { name: name.to_string(), $($role: Style::default(),)* }
            }

            /// The style of a role by name.
            pub fn get(&self, role: &str) -> Option<Style> {
                match role {
                    $(stringify!($role) => Some(self.$role),)*
                    _ => None,
                }
            }

            fn set(&mut self, role: &str, style: Style) -> bool {
                match role {
                    $(stringify!($role) => self.$role = style,)*
                    _ => return false,
                }
                true
            }
        }
    };
}

roles! {
    text: "Body text.",
    dim: "Secondary text and hints.",
    border: "Pane borders.",
    title: "Pane titles.",
    user: "The user's name in the chat.",
    assistant: "The model's name in the chat.",
    accepted: "Draft tokens the verifier accepted.",
    rejected: "The first rejected draft position.",
    discarded: "Draft positions after the first reject or past the answer's end.",
    risky: "Low-margin draft positions (also marked with a glyph).",
    bonus: "The verifier's own token ending a round.",
    correction: "Correction branch rows.",
    continuation: "Continuation branch rows.",
    reused: "Tokens from a reused branch block.",
    prefill: "The first answer token (from the prefill).",
    seed: "Position 0 of a block (already committed).",
    hit: "A branch that was reused.",
    miss: "A branch that was discarded.",
    selected: "The inspected position.",
    status: "The status line.",
    status_key: "Highlights in the status line.",
    recording: "The recording badge.",
    warning: "Warnings.",
    error: "Errors.",
    bar_full: "History bars of fully accepted rounds.",
    bar_partial: "History bars of rounds with a reject.",
    bar_reused: "History bars of rounds that reused a branch.",
    help_key: "Keys in the help.",
    background: "The whole screen under the panes (a light theme paints its own).",
    code: "Code blocks in answers.",
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    name: Option<String>,
    parent: Option<String>,
    /// Spanned so an error names the line of the role it is about, wherever the file
    /// sets it (`risky = …`, `"risky" = …`, a `[styles.risky]` table).
    #[serde(default)]
    styles: BTreeMap<Spanned<String>, Spanned<StyleSpec>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum StyleSpec {
    Fg(String),
    Full(FullStyle),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FullStyle {
    fg: Option<String>,
    bg: Option<String>,
    #[serde(default)]
    bold: bool,
    #[serde(default)]
    italic: bool,
    #[serde(default)]
    underline: bool,
    #[serde(default)]
    reversed: bool,
    #[serde(default)]
    dim: bool,
}

/// Parses a colour: `#rrggbb`, an ANSI name, `indexed:N` or `reset`.
pub fn parse_color(s: &str) -> Result<Color> {
    let l = s.trim().to_ascii_lowercase().replace('_', "-");
    if let Some(hex) = l.strip_prefix('#') {
        if hex.len() == 6 {
            if let Ok(v) = u32::from_str_radix(hex, 16) {
                return Ok(Color::Rgb((v >> 16) as u8, (v >> 8) as u8, v as u8));
            }
        }
        bail!("`{s}` is not a #rrggbb colour");
    }
    if let Some(n) = l.strip_prefix("indexed:") {
        return n
            .parse::<u8>()
            .map(Color::Indexed)
            .map_err(|_| anyhow!("`{s}`: indexed colours are 0..255"));
    }
    Ok(match l.as_str() {
        "reset" | "default" => Color::Reset,
        "black" => Color::Black,
        "red" => Color::Red,
        "green" => Color::Green,
        "yellow" => Color::Yellow,
        "blue" => Color::Blue,
        "magenta" => Color::Magenta,
        "cyan" => Color::Cyan,
        "gray" | "grey" | "white-dim" => Color::Gray,
        "dark-gray" | "dark-grey" | "bright-black" => Color::DarkGray,
        "bright-red" | "light-red" => Color::LightRed,
        "bright-green" | "light-green" => Color::LightGreen,
        "bright-yellow" | "light-yellow" => Color::LightYellow,
        "bright-blue" | "light-blue" => Color::LightBlue,
        "bright-magenta" | "light-magenta" => Color::LightMagenta,
        "bright-cyan" | "light-cyan" => Color::LightCyan,
        "white" | "bright-white" => Color::White,
        _ => bail!("unknown colour `{s}` (use #rrggbb, an ANSI name or indexed:N)"),
    })
}

fn to_style(spec: &StyleSpec) -> Result<Style> {
    let full = match spec {
        StyleSpec::Fg(c) => {
            return Ok(Style::default().fg(parse_color(c)?));
        }
        StyleSpec::Full(f) => f,
    };
    let mut st = Style::default();
    if let Some(c) = &full.fg {
        st = st.fg(parse_color(c)?);
    }
    if let Some(c) = &full.bg {
        st = st.bg(parse_color(c)?);
    }
    for (on, m) in [
        (full.bold, Modifier::BOLD),
        (full.italic, Modifier::ITALIC),
        (full.underline, Modifier::UNDERLINED),
        (full.reversed, Modifier::REVERSED),
        (full.dim, Modifier::DIM),
    ] {
        if on {
            st = st.add_modifier(m);
        }
    }
    Ok(st)
}

impl Theme {
    /// A built-in theme by name.
    pub fn builtin(name: &str) -> Option<Theme> {
        let (_, text) = BUILTIN.iter().find(|(n, _)| *n == name)?;
        let file = parse_file(text, name).ok()?;
        let mut t = Theme::blank(name);
        apply(&mut t, &file, text, name).ok()?;
        Some(t)
    }

    /// The default (dark) theme.
    pub fn dark() -> Theme {
        // Parsed once: the chat pane's line counting asks for it on every scroll.
        static DARK: std::sync::OnceLock<Theme> = std::sync::OnceLock::new();
        DARK.get_or_init(|| Theme::builtin("dark").unwrap_or_else(|| Theme::blank("dark")))
            .clone()
    }

    /// Resolves `name`: `<config_dir>/themes/NAME.toml` merged over its parent, else the
    /// built-in. Problems come back as warnings naming the file and line; the built-in
    /// (or dark) theme is used then.
    pub fn load(name: &str, config_dir: Option<&Path>) -> (Theme, Vec<String>) {
        let fallback = || Theme::builtin(name).unwrap_or_else(Theme::dark);
        let user = config_dir.map(|d| d.join("themes").join(format!("{name}.toml")));
        let Some(path) = user.filter(|p| p.exists()) else {
            return match Theme::builtin(name) {
                Some(t) => (t, Vec::new()),
                None => (
                    Theme::dark(),
                    vec![format!(
                        "unknown theme `{name}` (built-in: dark, light, basic16); using dark"
                    )],
                ),
            };
        };
        let label = path.display().to_string();
        let text = match crate::read_bounded(&path, super::keymap::CONFIG_MAX) {
            Ok(t) => t,
            Err(e) => return (fallback(), vec![format!("{e:#}; using the built-in theme")]),
        };
        match load_user(&text, &label, name) {
            Ok(t) => (t, Vec::new()),
            Err(e) => (fallback(), vec![format!("{e:#}; using the built-in theme")]),
        }
    }
}

fn load_user(text: &str, label: &str, name: &str) -> Result<Theme> {
    let file = parse_file(text, label)?;
    let parent = file.parent.clone().unwrap_or_else(|| {
        if BUILTIN.iter().any(|(n, _)| *n == name) {
            name.to_string()
        } else {
            "dark".to_string()
        }
    });
    let mut t = Theme::builtin(&parent).ok_or_else(|| {
        anyhow!(
            "{label}:{}: unknown parent theme `{parent}` (built-in: dark, light, basic16)",
            line_of_key(text, "parent")
        )
    })?;
    t.name = file.name.clone().unwrap_or_else(|| name.to_string());
    apply(&mut t, &file, text, label)?;
    Ok(t)
}

fn parse_file(text: &str, label: &str) -> Result<ThemeFile> {
    toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(0, |s| line_of(text, s.start));
        let msg = e.message().trim_end();
        // A role written outside `[styles]` is the likeliest slip: say where it goes.
        let misplaced = ROLES
            .iter()
            .find(|r| msg.starts_with(&format!("unknown field `{r}`")));
        match misplaced {
            Some(r) => anyhow!(
                "{label}:{line}: `{r}` is a role: roles go under a `[styles]` table \
                 (themes/README.md)"
            ),
            None => anyhow!("{label}:{line}: {msg}"),
        }
    })
}

fn apply(t: &mut Theme, file: &ThemeFile, text: &str, label: &str) -> Result<()> {
    for (role, spec) in &file.styles {
        let line = line_of(text, role.span().start);
        let role = role.get_ref();
        let style =
            to_style(spec.get_ref()).map_err(|e| anyhow!("{label}:{line}: `{role}`: {e}"))?;
        if !t.set(role, style) {
            bail!(
                "{label}:{line}: unknown role `{role}` (roles: {})",
                ROLES.join(", ")
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_set_every_role() {
        for (name, text) in BUILTIN {
            let file = parse_file(text, name).unwrap();
            for role in ROLES {
                assert!(file.styles.contains_key(*role), "{name} lacks {role}");
            }
            assert!(Theme::builtin(name).is_some());
        }
    }

    #[test]
    fn basic16_uses_only_ansi_colours() {
        // Every role, from the file itself: a role set to a truecolour or indexed
        // colour fails, whichever it is.
        let text = BUILTIN.iter().find(|b| b.0 == "basic16").unwrap().1;
        let file = parse_file(text, "basic16").unwrap();
        assert_eq!(file.styles.len(), ROLES.len(), "basic16 sets every role");
        let t = Theme::builtin("basic16").unwrap();
        for role in ROLES {
            let s = t.get(role).unwrap();
            for c in [s.fg, s.bg].into_iter().flatten() {
                assert!(
                    !matches!(c, Color::Rgb(..) | Color::Indexed(_)),
                    "{role}: {c:?}"
                );
            }
        }
    }

    #[test]
    fn user_theme_is_partial_and_bad_files_name_their_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("themes")).unwrap();
        let p = dir.path().join("themes").join("mine.toml");
        std::fs::write(&p, "parent = \"light\"\n[styles]\nrisky = \"#ff0000\"\n").unwrap();
        let (t, w) = Theme::load("mine", Some(dir.path()));
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(t.risky.fg, Some(Color::Rgb(255, 0, 0)));
        assert_eq!(t.accepted, Theme::builtin("light").unwrap().accepted);

        std::fs::write(&p, "[styles]\naccepted = \"green\"\nrisky = \"#ff00zz\"\n").unwrap();
        let (t, w) = Theme::load("mine", Some(dir.path()));
        assert!(
            w[0].contains("mine.toml:3") && w[0].contains("risky"),
            "{w:?}"
        );
        assert_eq!(t, Theme::dark());

        std::fs::write(&p, "[styles]\nsparkly = \"red\"\n").unwrap();
        let (_, w) = Theme::load("mine", Some(dir.path()));
        assert!(
            w[0].contains("mine.toml:2") && w[0].contains("unknown role"),
            "{w:?}"
        );

        std::fs::write(&p, "[styles\n").unwrap();
        let (_, w) = Theme::load("mine", Some(dir.path()));
        assert!(w[0].contains("mine.toml:1"), "{w:?}");

        let (t, w) = Theme::load("nope", None);
        assert_eq!(t.name, "dark");
        assert!(w[0].contains("unknown theme"));
    }

    /// Every role, every way a file can set it, after other lines: a bad value names
    /// the line that sets it, and a role outside `[styles]` says where roles go.
    #[test]
    fn errors_name_the_line_of_the_role_however_it_is_written() {
        let pad = "# my theme\nname = \"risky dim text\"\nparent = \"dark\"\n\n";
        for (i, role) in ROLES.iter().enumerate() {
            let other = ROLES[(i + 1) % ROLES.len()];
            let before = format!("{pad}[styles]\n{other} = {{ fg = \"red\", dim = true }}\n");
            let at = before.lines().count() + 1;
            let shapes = [
                format!("{before}{role} = \"#ff00zz\"\n"),
                format!("{before}\"{role}\" = \"indexed:300\"\n"),
                format!("{before}{role} = {{ fg = \"sparkly\" }}\n"),
                format!("{before}\n[styles.{role}]\nfg = \"#12\"\n"),
            ];
            for (k, text) in shapes.iter().enumerate() {
                let want = if k == 3 { at + 1 } else { at };
                let e = load_user(text, "t.toml", "t").unwrap_err().to_string();
                assert!(
                    e.starts_with(&format!("t.toml:{want}: `{role}`")),
                    "shape {k}: {e}\n{text}"
                );
            }
            let top = format!("{pad}{role} = \"red\"\n");
            let e = load_user(&top, "t.toml", "t").unwrap_err().to_string();
            let want = pad.lines().count() + 1;
            assert!(
                e.starts_with(&format!("t.toml:{want}: `{role}` is a role"))
                    && e.contains("[styles]"),
                "{e}"
            );
        }
    }
}
