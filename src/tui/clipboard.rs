//! Copying the last answer. Outside tmux: OSC 52, which works over SSH and needs no
//! clipboard daemon (a terminal without it ignores it). Inside tmux: tmux ignores an
//! application's OSC 52 under its default `set-clipboard external`, and its
//! passthrough needs `allow-passthrough`; so the text goes to `tmux load-buffer -w`,
//! which fills tmux's paste buffer and, as tmux itself sets clipboards, the outer
//! terminal's too where it can.

use std::io::Write;
use std::process::{Command, Stdio};

use crossterm::clipboard::CopyToClipboard;
use crossterm::Command as _;

/// The escape sequence that puts `text` on the terminal's clipboard (crossterm's
/// OSC 52, ended by ST).
pub fn osc52(text: &str) -> String {
    let mut seq = String::new();
    // Writing into a String cannot fail.
    let _ = CopyToClipboard::to_clipboard_from(text).write_ansi(&mut seq);
    seq
}

/// Gives `text` to tmux's `load-buffer` (`-w`: also the outer clipboard, tmux 3.2+;
/// retried without it for older tmux).
fn tmux_load_buffer(tmux: &str, text: &str) -> std::io::Result<bool> {
    for args in [&["load-buffer", "-w", "-"][..], &["load-buffer", "-"][..]] {
        let mut child = Command::new(tmux)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(text.as_bytes())?;
        }
        if child.wait()?.success() {
            return Ok(args.len() == 3);
        }
    }
    Ok(false)
}

/// Copies `text` by what works where the app runs; says what was done.
pub fn copy(text: &str) -> String {
    copy_with(text, std::env::var_os("TMUX").is_some(), "tmux", |seq| {
        let mut out = std::io::stdout();
        let _ = out.write_all(seq.as_bytes()).and_then(|_| out.flush());
    })
}

/// `copy` with its surroundings given (tests).
pub fn copy_with(text: &str, inside_tmux: bool, tmux: &str, send: impl FnOnce(&str)) -> String {
    if inside_tmux {
        return match tmux_load_buffer(tmux, text) {
            Ok(true) => "copied to tmux's paste buffer (prefix ] pastes it) and to the terminal's clipboard if tmux can set it".into(),
            Ok(false) => "copied to tmux's paste buffer (prefix ] pastes it)".into(),
            Err(e) => format!("not copied: cannot run tmux ({e})"),
        };
    }
    send(&osc52(text));
    "sent to the terminal's clipboard (OSC 52; terminals without it ignore it)".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osc52_carries_the_text_in_base64() {
        assert_eq!(osc52("hi"), "\x1b]52;c;aGk=\x1b\\");
        assert_eq!(osc52("foobar"), "\x1b]52;c;Zm9vYmFy\x1b\\");
    }

    #[test]
    fn outside_tmux_osc52_goes_out() {
        let mut sent = String::new();
        let said = copy_with("hi", false, "tmux", |s| sent = s.to_string());
        assert_eq!(sent, osc52("hi"));
        assert!(said.contains("OSC 52"));
    }

    #[cfg(unix)]
    #[test]
    fn inside_tmux_the_text_goes_to_load_buffer() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let got = dir.path().join("got");
        let fake = dir.path().join("tmux");
        std::fs::write(
            &fake,
            format!(
                "#!/bin/sh\necho \"$@\" > {0}.args\ncat > {0}\n",
                got.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut sent = false;
        let said = copy_with("the answer", true, fake.to_str().unwrap(), |_| sent = true);
        assert!(!sent, "no OSC 52 inside tmux");
        assert_eq!(std::fs::read_to_string(&got).unwrap(), "the answer");
        assert!(std::fs::read_to_string(dir.path().join("got.args"))
            .unwrap()
            .contains("-w"));
        assert!(said.contains("paste buffer"), "{said}");
        // No tmux to run: the message says so, nothing pretends.
        let said = copy_with("x", true, "/nonexistent/tmux", |_| {});
        assert!(said.starts_with("not copied"), "{said}");
    }
}
