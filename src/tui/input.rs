//! The multi-line input box with its history.

use unicode_width::UnicodeWidthChar;

use crossterm::event::KeyCode;

/// An edit of the input text (keys the keymap does not claim).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputEdit {
    Insert(char),
    /// Bracketed paste: inserted as is, newlines included.
    Paste(String),
    Backspace,
    Delete,
    Left,
    Right,
    Home,
    End,
    /// Ctrl+U: delete to the start of the line.
    KillToStart,
    /// Ctrl+K: delete to the end of the line.
    KillToEnd,
    /// Ctrl+W: delete back to the whitespace before the cursor (readline's
    /// unix-word-rubout: `end?Y` goes whole, unlike Alt+B's alphanumeric words).
    DeleteWordBack,
    /// Alt+B: one word back.
    WordLeft,
    /// Alt+F: one word forward.
    WordRight,
}

/// The modifiers an editing key is pressed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mods {
    Ctrl,
    Alt,
    /// Whatever the modifiers.
    Any,
}

/// A key the input box edits with (where the keymap does not claim it).
pub struct EditKey {
    pub code: KeyCode,
    pub mods: Mods,
    pub edit: InputEdit,
    /// As the help lists it.
    pub key: &'static str,
    pub help: &'static str,
}

impl EditKey {
    /// The key as a terminal sends it (the modifiers it is listed with).
    pub fn event(&self) -> crossterm::event::KeyEvent {
        use crossterm::event::KeyModifiers;
        let mods = match self.mods {
            Mods::Ctrl => KeyModifiers::CONTROL,
            Mods::Alt => KeyModifiers::ALT,
            Mods::Any => KeyModifiers::NONE,
        };
        crossterm::event::KeyEvent::new(self.code, mods)
    }

    /// Whether a key with these modifiers is this one.
    pub fn matches(&self, code: KeyCode, ctrl: bool, alt: bool) -> bool {
        code == self.code
            && match self.mods {
                Mods::Ctrl => ctrl && !alt,
                Mods::Alt => alt && !ctrl,
                Mods::Any => true,
            }
    }
}

const fn edit(
    code: KeyCode,
    mods: Mods,
    edit: InputEdit,
    key: &'static str,
    help: &'static str,
) -> EditKey {
    EditKey {
        code,
        mods,
        edit,
        key,
        help,
    }
}

const CTRL: Mods = Mods::Ctrl;
const ALT: Mods = Mods::Alt;
const ANY: Mods = Mods::Any;

/// The input box's editing keys (readline's), in one table: what they do and what
/// the help's keys page lists.
pub const EDITING: &[EditKey] = &[
    edit(
        KeyCode::Char('a'),
        CTRL,
        InputEdit::Home,
        "Ctrl+A",
        "input: to the line's start",
    ),
    edit(
        KeyCode::Char('e'),
        CTRL,
        InputEdit::End,
        "Ctrl+E",
        "input: to the line's end",
    ),
    edit(
        KeyCode::Char('u'),
        CTRL,
        InputEdit::KillToStart,
        "Ctrl+U",
        "input: delete to the line's start",
    ),
    edit(
        KeyCode::Char('k'),
        CTRL,
        InputEdit::KillToEnd,
        "Ctrl+K",
        "input: delete to the line's end",
    ),
    edit(
        KeyCode::Char('w'),
        CTRL,
        InputEdit::DeleteWordBack,
        "Ctrl+W",
        "input: delete the word before the cursor",
    ),
    edit(
        KeyCode::Char('b'),
        ALT,
        InputEdit::WordLeft,
        "Alt+B",
        "input: one word back",
    ),
    edit(
        KeyCode::Char('f'),
        ALT,
        InputEdit::WordRight,
        "Alt+F",
        "input: one word forward",
    ),
    edit(
        KeyCode::Backspace,
        ANY,
        InputEdit::Backspace,
        "Backspace",
        "input: delete before the cursor",
    ),
    edit(
        KeyCode::Delete,
        ANY,
        InputEdit::Delete,
        "Delete",
        "input: delete at the cursor",
    ),
    edit(
        KeyCode::Left,
        ANY,
        InputEdit::Left,
        "←",
        "input: cursor left",
    ),
    edit(
        KeyCode::Right,
        ANY,
        InputEdit::Right,
        "→",
        "input: cursor right",
    ),
    edit(
        KeyCode::Home,
        ANY,
        InputEdit::Home,
        "Home",
        "input: to the line's start",
    ),
    edit(
        KeyCode::End,
        ANY,
        InputEdit::End,
        "End",
        "input: to the line's end",
    ),
];

/// Text being typed, a cursor (byte offset) and the previously sent messages.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Input {
    pub text: String,
    pub cursor: usize,
    pub history: Vec<String>,
    /// Position in `history` while browsing it.
    browsing: Option<usize>,
    /// What was typed before browsing started.
    draft: String,
}

impl Input {
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    pub fn edit(&mut self, e: InputEdit) {
        match e {
            InputEdit::Insert(c) => {
                self.text.insert(self.cursor, c);
                self.cursor += c.len_utf8();
            }
            InputEdit::Paste(s) => {
                let s = s.replace("\r\n", "\n").replace('\r', "\n");
                self.text.insert_str(self.cursor, &s);
                self.cursor += s.len();
            }
            InputEdit::Backspace => {
                if let Some(c) = self.text[..self.cursor].chars().next_back() {
                    self.cursor -= c.len_utf8();
                    self.text.remove(self.cursor);
                }
            }
            InputEdit::Delete => {
                if self.cursor < self.text.len() {
                    self.text.remove(self.cursor);
                }
            }
            InputEdit::Left => {
                if let Some(c) = self.text[..self.cursor].chars().next_back() {
                    self.cursor -= c.len_utf8();
                }
            }
            InputEdit::Right => {
                if let Some(c) = self.text[self.cursor..].chars().next() {
                    self.cursor += c.len_utf8();
                }
            }
            InputEdit::Home => self.cursor = self.line_start(),
            InputEdit::End => self.cursor = self.line_end(),
            InputEdit::KillToStart => {
                let start = self.line_start();
                self.text.replace_range(start..self.cursor, "");
                self.cursor = start;
            }
            InputEdit::KillToEnd => {
                let end = self.line_end();
                self.text.replace_range(self.cursor..end, "");
            }
            InputEdit::DeleteWordBack => {
                let start = self.blank_left();
                self.text.replace_range(start..self.cursor, "");
                self.cursor = start;
            }
            InputEdit::WordLeft => self.cursor = self.word_left(),
            InputEdit::WordRight => self.cursor = self.word_right(),
        }
        self.browsing = None;
    }

    fn line_start(&self) -> usize {
        self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1)
    }

    fn line_end(&self) -> usize {
        self.cursor
            + self.text[self.cursor..]
                .find('\n')
                .unwrap_or(self.text.len() - self.cursor)
    }

    /// The start of the word before the cursor (spaces before it skipped).
    fn word_left(&self) -> usize {
        let before = &self.text[..self.cursor];
        let trimmed = before.trim_end_matches(|c: char| !c.is_alphanumeric());
        trimmed
            .rfind(|c: char| !c.is_alphanumeric())
            .map_or(0, |i| {
                i + trimmed[i..].chars().next().map_or(1, char::len_utf8)
            })
    }

    /// The start of the whitespace-delimited word before the cursor (whitespace
    /// before the cursor skipped; a line break stops it like any whitespace).
    fn blank_left(&self) -> usize {
        let before = &self.text[..self.cursor];
        let trimmed = before.trim_end_matches([' ', '\t']);
        let start = trimmed.rfind(char::is_whitespace).map_or(0, |i| {
            i + trimmed[i..].chars().next().map_or(1, char::len_utf8)
        });
        // At a line's start the line break itself goes, as Backspace would.
        if start == self.cursor {
            before.char_indices().next_back().map_or(0, |(i, _)| i)
        } else {
            start
        }
    }

    /// The end of the word after the cursor.
    fn word_right(&self) -> usize {
        let after = &self.text[self.cursor..];
        let skip = after.len()
            - after
                .trim_start_matches(|c: char| !c.is_alphanumeric())
                .len();
        let rest = &after[skip..];
        self.cursor
            + skip
            + rest
                .find(|c: char| !c.is_alphanumeric())
                .unwrap_or(rest.len())
    }

    pub fn newline(&mut self) {
        self.edit(InputEdit::Insert('\n'));
    }

    pub fn clear(&mut self) {
        self.text.clear();
        self.cursor = 0;
        self.browsing = None;
    }

    /// Takes the text out (for sending) and remembers it in the history.
    pub fn take(&mut self) -> String {
        let text = std::mem::take(&mut self.text);
        self.cursor = 0;
        self.browsing = None;
        if !text.trim().is_empty() && self.history.last() != Some(&text) {
            self.history.push(text.clone());
        }
        text
    }

    pub fn history_prev(&mut self) {
        if self.history.is_empty() {
            return;
        }
        let i = match self.browsing {
            None => {
                self.draft = self.text.clone();
                self.history.len() - 1
            }
            Some(i) => i.saturating_sub(1),
        };
        self.browsing = Some(i);
        self.text = self.history[i].clone();
        self.cursor = self.text.len();
    }

    pub fn history_next(&mut self) {
        let Some(i) = self.browsing else { return };
        if i + 1 < self.history.len() {
            self.browsing = Some(i + 1);
            self.text = self.history[i + 1].clone();
        } else {
            self.browsing = None;
            self.text = std::mem::take(&mut self.draft);
        }
        self.cursor = self.text.len();
    }

    /// (line, column in chars) of the cursor.
    pub fn cursor_line_col(&self) -> (usize, usize) {
        let before = &self.text[..self.cursor];
        let line = before.matches('\n').count();
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count());
        (line, col)
    }

    /// The text wrapped into rows of at most `width` columns — at the last space that
    /// fits, or inside a word longer than a row — and the cursor's row and column
    /// among them. A line that fills its last row ends with an empty row when the
    /// cursor is at its end, so the cursor has a cell to stand in.
    pub fn rows(&self, width: usize) -> (Vec<String>, (usize, usize)) {
        let width = width.max(1);
        let (cl, cc) = self.cursor_line_col();
        let mut rows = Vec::new();
        let mut cursor = (0, 0);
        for (li, line) in self.text.split('\n').enumerate() {
            let chars: Vec<char> = line.chars().collect();
            let cw = |c: &char| c.width().unwrap_or(0);
            // Where each row starts, as char indices.
            let mut starts = vec![0];
            let (mut w, mut after_space) = (0, None);
            for (i, c) in chars.iter().enumerate() {
                let start = *starts.last().unwrap_or(&0);
                if w + cw(c) > width && i > start {
                    let next = after_space.filter(|&b| b > start).unwrap_or(i);
                    starts.push(next);
                    w = chars[next..i].iter().map(cw).sum();
                    after_space = None;
                }
                w += cw(c);
                if *c == ' ' {
                    after_space = Some(i + 1);
                }
            }
            let first = rows.len();
            for (k, &a) in starts.iter().enumerate() {
                let b = starts.get(k + 1).copied().unwrap_or(chars.len());
                rows.push(chars[a..b].iter().collect::<String>());
            }
            if li == cl {
                let k = starts.iter().rposition(|&a| a <= cc).unwrap_or(0);
                let x: usize = chars[starts[k]..cc.min(chars.len())].iter().map(cw).sum();
                cursor = if x >= width {
                    rows.push(String::new());
                    (rows.len() - 1, 0)
                } else {
                    (first + k, x)
                };
            }
        }
        (rows, cursor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_wrap_into_rows_with_the_cursor_on_them() {
        let mut i = Input::default();
        i.edit(InputEdit::Paste("abcdefghij\nxy".into()));
        let (rows, cursor) = i.rows(4);
        assert_eq!(rows, ["abcd", "efgh", "ij", "xy"]);
        assert_eq!(cursor, (3, 2), "after y");
        i.edit(InputEdit::Home);
        assert_eq!(i.rows(4).1, (3, 0));
        i.edit(InputEdit::Left);
        assert_eq!(i.rows(4).1, (2, 2), "end of the first line");
        // A full last row leaves a row for the cursor only when it is there.
        let mut full = Input::default();
        full.edit(InputEdit::Paste("abcd".into()));
        assert_eq!(full.rows(4), (vec!["abcd".into(), String::new()], (1, 0)));
        full.edit(InputEdit::Left);
        assert_eq!(full.rows(4), (vec!["abcd".into()], (0, 3)));
        // Rows break at the last space that fits.
        let mut words = Input::default();
        words.edit(InputEdit::Paste("ab cd ef".into()));
        assert_eq!(
            words.rows(4),
            (vec!["ab ".into(), "cd ".into(), "ef".into()], (2, 2))
        );
        words.edit(InputEdit::Home);
        assert_eq!(words.rows(4).1, (0, 0));
        // Wide characters count their columns.
        let mut wide = Input::default();
        wide.edit(InputEdit::Paste("日本語".into()));
        assert_eq!(wide.rows(4).0, ["日本", "語"]);
        assert_eq!(Input::default().rows(4), (vec![String::new()], (0, 0)));
    }

    #[test]
    fn typing_editing_and_history() {
        let mut i = Input::default();
        for c in "hé!".chars() {
            i.edit(InputEdit::Insert(c));
        }
        i.edit(InputEdit::Left);
        i.edit(InputEdit::Backspace);
        assert_eq!(i.text, "h!");
        i.newline();
        i.edit(InputEdit::Paste("a\r\nb".into()));
        assert_eq!(i.text, "h\na\nb!");
        assert_eq!(i.cursor_line_col(), (2, 1));
        i.edit(InputEdit::Home);
        assert_eq!(i.cursor_line_col(), (2, 0));
        assert_eq!(i.take(), "h\na\nb!");
        i.edit(InputEdit::Insert('x'));
        i.take();
        i.edit(InputEdit::Insert('y'));
        i.history_prev();
        assert_eq!(i.text, "x");
        i.history_prev();
        assert_eq!(i.text, "h\na\nb!");
        i.history_next();
        i.history_next();
        assert_eq!(i.text, "y");
    }

    #[test]
    fn readline_keys() {
        let mut i = Input::default();
        i.edit(InputEdit::Paste("write a fün list".into()));
        i.edit(InputEdit::WordLeft);
        assert_eq!(&i.text[i.cursor..], "list");
        i.edit(InputEdit::WordLeft);
        assert_eq!(&i.text[i.cursor..], "fün list");
        i.edit(InputEdit::WordRight);
        assert_eq!(&i.text[i.cursor..], " list");
        i.edit(InputEdit::DeleteWordBack);
        assert_eq!(i.text, "write a  list");

        i.edit(InputEdit::KillToEnd);
        assert_eq!(i.text, "write a ");
        i.edit(InputEdit::Left);
        i.edit(InputEdit::KillToStart);
        assert_eq!((i.text.as_str(), i.cursor), (" ", 0));
        i.edit(InputEdit::End);
        assert_eq!(i.cursor, 1);
    }

    /// Ctrl+W removes the last whitespace-delimited word whatever it is made of
    /// (`end?Y`, `x.y()`, `naïve-ish`), keeping the whitespace before it.
    #[test]
    fn ctrl_w_deletes_back_to_whitespace_for_any_word() {
        let pieces = ["end", "?", "Y", "x.y()", "ï", "-", "42", "'s", "::"];
        let mut rng = crate::rng::Rng::new(11);
        let mut next = |n: usize| (rng.next_u64() % n as u64) as usize;
        for _ in 0..300 {
            let words: Vec<String> = (0..1 + next(4))
                .map(|_| {
                    (0..1 + next(4))
                        .map(|_| pieces[next(pieces.len())])
                        .collect()
                })
                .collect();
            let gaps = [" ", "  ", "\t", "\n"];
            let mut text = String::new();
            for w in &words[..words.len() - 1] {
                text.push_str(w);
                text.push_str(gaps[next(gaps.len())]);
            }
            let kept = text.clone();
            text.push_str(&words[words.len() - 1]);
            let trailing = ["", " ", "  "][next(3)];
            text.push_str(trailing);
            let mut i = Input::default();
            i.edit(InputEdit::Paste(text.clone()));
            i.edit(InputEdit::DeleteWordBack);
            assert_eq!(i.text, kept, "Ctrl+W on {text:?}");
            assert_eq!(i.cursor, kept.len());
        }
    }
}
