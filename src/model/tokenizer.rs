//! `tokenizer.json`, the chat template (rendered with minijinja) and a streaming
//! detokenizer that never emits half a UTF-8 character.

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::source::ModelFiles;

/// One chat turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: &str, content: &str) -> Self {
        Self {
            role: role.to_string(),
            content: content.to_string(),
        }
    }
}

/// Tokenizer plus the chat template and special tokens of a checkpoint. Cheap to clone.
#[derive(Clone)]
pub struct TextTokenizer {
    inner: Arc<tokenizers::Tokenizer>,
    template: Option<Arc<str>>,
    /// Where the template came from (for messages).
    template_name: Arc<str>,
    bos_token: Option<String>,
    eos_token: Option<String>,
    bos_id: Option<u32>,
}

/// `"<s>"` or `{"content": "<s>", ...}` in tokenizer_config.json.
fn token_string(v: Option<&serde_json::Value>) -> Option<String> {
    match v? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Object(o) => o.get("content")?.as_str().map(str::to_string),
        _ => None,
    }
}

impl TextTokenizer {
    /// Loads `tokenizer.json`, then the template from `chat_template.jinja` or
    /// `tokenizer_config.json`. `bos_id` comes from config.json when the tokenizer
    /// config does not name a BOS token.
    pub fn load(files: &ModelFiles, bos_id: Option<u32>) -> Result<Self> {
        // Bounded: the largest real tokenizer.json is a few tens of MiB.
        let text = crate::read_bounded(&files.tokenizer, 256 << 20)
            .with_context(|| format!("cannot read tokenizer {}", files.tokenizer.display()))?;
        let inner = tokenizers::Tokenizer::from_bytes(text.as_bytes())
            .map_err(|e| anyhow!("{e}"))
            .with_context(|| format!("cannot read tokenizer {}", files.tokenizer.display()))?;
        let tcfg: Option<serde_json::Value> = match &files.tokenizer_config {
            Some(p) => Some(read_json(p)?),
            None => None,
        };
        let (template, template_name) = match &files.chat_template {
            Some(p) => (
                Some(
                    crate::read_bounded(p, 1 << 20)
                        .with_context(|| format!("cannot read chat template {}", p.display()))?,
                ),
                p.display().to_string(),
            ),
            None => (
                tcfg.as_ref()
                    .and_then(|c| template_from_config(c.get("chat_template"))),
                files
                    .tokenizer_config
                    .as_ref()
                    .map_or("chat template".into(), |p| {
                        format!("the chat_template of {}", p.display())
                    }),
            ),
        };
        let mut bos_token = token_string(tcfg.as_ref().and_then(|c| c.get("bos_token")));
        let eos_token = token_string(tcfg.as_ref().and_then(|c| c.get("eos_token")));
        let bos_id = match &bos_token {
            Some(t) => match inner.token_to_id(t) {
                Some(id) => Some(id),
                None => bail!(
                    "{}: bos_token `{t}` is not a token of {}",
                    files
                        .tokenizer_config
                        .as_ref()
                        .map_or("tokenizer_config.json".into(), |p| p.display().to_string()),
                    files.tokenizer.display()
                ),
            },
            None => bos_id,
        };
        if bos_token.is_none() {
            bos_token = bos_id.and_then(|id| inner.id_to_token(id));
        }
        let tok = Self {
            inner: Arc::new(inner),
            template: template.map(Arc::from),
            template_name: Arc::from(template_name),
            bos_token,
            eos_token,
            bos_id,
        };
        // A template that renders without the user's message (empty, or ignoring
        // `messages`) would have every question answered blind: refuse it now.
        if tok.template.is_some() {
            let probe = [ChatMessage::new(
                "user",
                "specscope probe 7f3a: is this message here?",
            )];
            if let Ok(text) = tok.render_chat(&probe, false) {
                tok.check_has_message(&text, &probe[0].content)?;
            }
        }
        Ok(tok)
    }

    /// Errs when the rendered `text` does not hold the user's `message`.
    fn check_has_message(&self, text: &str, message: &str) -> Result<()> {
        let m = message.trim();
        if !m.is_empty() && !text.contains(m) {
            bail!(
                "{} leaves the user's message out of the prompt it renders (rendered: {:?}); the model would answer without it",
                self.template_name,
                text.chars().take(120).collect::<String>()
            );
        }
        Ok(())
    }

    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }

    pub fn has_chat_template(&self) -> bool {
        self.template.is_some()
    }

    pub fn bos_id(&self) -> Option<u32> {
        self.bos_id
    }

    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The token with the largest id (added tokens included).
    pub fn largest_id(&self) -> Option<(u32, String)> {
        self.inner
            .get_vocab(true)
            .into_iter()
            .max_by_key(|(_, id)| *id)
            .map(|(t, id)| (id, t))
    }

    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Renders the chat template (generation prompt on) to text.
    pub fn render_chat(&self, messages: &[ChatMessage], enable_thinking: bool) -> Result<String> {
        let Some(src) = &self.template else {
            bail!("this model has no chat template (chat_template.jinja or tokenizer_config.json); use --raw");
        };
        render_template(
            src,
            messages,
            enable_thinking,
            self.bos_token.as_deref().unwrap_or_default(),
            self.eos_token.as_deref().unwrap_or_default(),
        )
        .with_context(|| format!("chat template {}", self.template_name))
    }

    /// Says what goes wrong when the model can emit ids this tokenizer cannot decode,
    /// or this tokenizer has ids the model has no embedding for (a prompt using one is
    /// refused; some checkpoints carry such added tokens unused, so it is no error).
    pub fn vocab_warning(&self, cfg: &super::Config) -> Option<String> {
        if let Some((id, text)) = self
            .largest_id()
            .filter(|(id, _)| *id as usize >= cfg.vocab_size)
        {
            return Some(format!(
                "token {text:?} has id {id}, but the model's vocab_size is {}: the model has no embedding for it, and a prompt that uses it is refused (a tokenizer of another model?)",
                cfg.vocab_size
            ));
        }
        let n = self.vocab_size();
        (cfg.vocab_size > n).then(|| {
            format!(
                "the tokenizer has {n} tokens but the model's vocab_size is {}: ids {n} to {} decode to nothing (shown as ⟨id⟩ on the screen)",
                cfg.vocab_size,
                cfg.vocab_size - 1
            )
        })
    }

    /// Token ids of a chat, starting with exactly one BOS.
    pub fn encode_chat(&self, messages: &[ChatMessage], enable_thinking: bool) -> Result<Vec<u32>> {
        let text = self.render_chat(messages, enable_thinking)?;
        if let Some(last) = messages.iter().rev().find(|m| m.role == "user") {
            self.check_has_message(&text, &last.content)?;
        }
        self.encode_raw(&text)
    }

    /// Token ids of plain text (special-token strings are recognised), starting with
    /// exactly one BOS when the model has one.
    pub fn encode_raw(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|e| anyhow!("cannot tokenize the prompt: {e}"))?;
        let mut ids = enc.get_ids().to_vec();
        if let Some(bos) = self.bos_id {
            let leading = ids.iter().take_while(|&&t| t == bos).count();
            match leading {
                0 => ids.insert(0, bos),
                1 => {}
                n => {
                    ids.drain(..n - 1);
                }
            }
        }
        Ok(ids)
    }

    /// Text of `ids` with special tokens skipped.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner
            .decode(ids, true)
            .map_err(|e| anyhow!("cannot decode tokens: {e}"))
    }

    /// The token's own text (special tokens included), for per-token displays.
    pub fn token_text(&self, id: u32) -> String {
        self.inner
            .decode(&[id], false)
            .unwrap_or_else(|_| format!("<{id}>"))
    }

    pub fn stream(&self) -> TokenStream {
        TokenStream::new(self.clone())
    }
}

/// Steps a chat template may take (a real one takes a few thousand per message).
const TEMPLATE_FUEL: u64 = 5_000_000;
/// Text a chat template may write.
const TEMPLATE_OUTPUT: usize = 4 << 20;

/// A writer that refuses to grow past `TEMPLATE_OUTPUT`.
#[derive(Default)]
struct Bounded {
    out: Vec<u8>,
    overflow: bool,
}

impl std::io::Write for &mut Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.out.len() + buf.len() > TEMPLATE_OUTPUT {
            self.overflow = true;
            return Err(std::io::Error::other("template output too large"));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Renders a HF chat template with minijinja (HF's trim/lstrip settings, Python string
/// methods, `raise_exception`), generation prompt on.
pub fn render_template(
    src: &str,
    messages: &[ChatMessage],
    enable_thinking: bool,
    bos_token: &str,
    eos_token: &str,
) -> Result<String> {
    let mut env = minijinja::Environment::new();
    env.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| anyhow!("chat template syntax: {e}"))?,
    );
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    minijinja_contrib::add_to_environment(&mut env);
    env.add_function(
        "raise_exception",
        |msg: String| -> std::result::Result<String, minijinja::Error> {
            Err(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                msg,
            ))
        },
    );
    // Bounded: a template that loops for ever, or writes megabytes, is an error.
    env.set_fuel(Some(TEMPLATE_FUEL));
    env.add_template("chat", src)
        .map_err(|e| anyhow!("{e:#}"))
        .context("invalid chat template")?;
    let tmpl = env.get_template("chat").map_err(|e| anyhow!("{e}"))?;
    let mut out = Bounded::default();
    let r = tmpl.render_captured_to(
        minijinja::context! {
            messages => minijinja::value::Serde(messages),
            add_generation_prompt => true,
            enable_thinking => enable_thinking,
            bos_token => bos_token,
            eos_token => eos_token,
        },
        &mut out,
    );
    match r {
        Ok(_) => {
            String::from_utf8(out.out).map_err(|_| anyhow!("the template wrote invalid UTF-8"))
        }
        Err(_) if out.overflow => Err(anyhow!(
            "the template wrote more than {} KiB",
            TEMPLATE_OUTPUT / 1024
        )),
        Err(e) if e.kind() == minijinja::ErrorKind::OutOfFuel => Err(anyhow!(
            "the template ran too long (more than {TEMPLATE_FUEL} steps)"
        )),
        Err(e) => Err(anyhow!("{e:#}")),
    }
    .context("cannot render the chat template")
}

fn read_json(p: &Path) -> Result<serde_json::Value> {
    let text = crate::read_bounded(p, 16 << 20)?;
    serde_json::from_str(&text).with_context(|| format!("invalid JSON in {}", p.display()))
}

/// `chat_template` is a string, or a list of `{name, template}` (take "default").
fn template_from_config(v: Option<&serde_json::Value>) -> Option<String> {
    match v? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(list) => list
            .iter()
            .find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default"))
            .or_else(|| list.first())
            .and_then(|t| t.get("template")?.as_str().map(str::to_string)),
        _ => None,
    }
}

/// Incremental detokenizer: emits text only once it is complete UTF-8, and only the
/// text that the new tokens add (byte-level BPE can split a character across tokens).
pub struct TokenStream {
    tok: TextTokenizer,
    ids: Vec<u32>,
    prefix_offset: usize,
    read_offset: usize,
}

impl TokenStream {
    fn new(tok: TextTokenizer) -> Self {
        Self {
            tok,
            ids: Vec::new(),
            prefix_offset: 0,
            read_offset: 0,
        }
    }

    /// Adds tokens; returns the text that became complete (possibly empty).
    pub fn push(&mut self, new: &[u32]) -> Result<String> {
        self.ids.extend_from_slice(new);
        let prefix = self
            .tok
            .decode(&self.ids[self.prefix_offset..self.read_offset])?;
        let full = self.tok.decode(&self.ids[self.prefix_offset..])?;
        if full.len() > prefix.len() && !full.ends_with('\u{FFFD}') {
            let out = match full.get(prefix.len()..) {
                Some(s) if full.starts_with(&prefix) => s.to_string(),
                _ => full.clone(),
            };
            self.prefix_offset = self.read_offset;
            self.read_offset = self.ids.len();
            Ok(out)
        } else {
            Ok(String::new())
        }
    }

    /// Whatever is still held back (an incomplete character is emitted lossily).
    pub fn finish(&mut self) -> Result<String> {
        let prefix = self
            .tok
            .decode(&self.ids[self.prefix_offset..self.read_offset])?;
        let full = self.tok.decode(&self.ids[self.prefix_offset..])?;
        self.prefix_offset = self.ids.len();
        self.read_offset = self.ids.len();
        Ok(full.get(prefix.len()..).unwrap_or_default().to_string())
    }
}
