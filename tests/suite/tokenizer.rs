//! Tokenizer, chat template and streaming detokenizer.

use specscope::model::synthetic::{self, Spec};
use specscope::model::{ChatMessage, ModelSource, TextTokenizer};

fn tokenizer() -> (tempfile::TempDir, TextTokenizer) {
    let dir = tempfile::tempdir().unwrap();
    synthetic::write_checkpoint(dir.path(), &Spec::toy()).unwrap();
    let files = ModelSource::Local(dir.path().to_path_buf())
        .resolve()
        .unwrap();
    let tok = TextTokenizer::load(&files, Some(synthetic::BOS_ID)).unwrap();
    (dir, tok)
}

#[test]
fn chat_template_renders_nld_chatml_with_thinking_off() {
    let (_d, tok) = tokenizer();
    let msgs = [ChatMessage::new("user", "What is 2+2?")];
    let text = tok.render_chat(&msgs, false).unwrap();
    assert_eq!(
        text,
        "<s><|im_start|>system\n<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think></think>"
    );
    let think = tok.render_chat(&msgs, true).unwrap();
    assert!(
        think.ends_with("<|im_start|>assistant\n<think>\n"),
        "{think}"
    );
    let sys = tok
        .render_chat(
            &[ChatMessage::new("system", "Be brief."), msgs[0].clone()],
            false,
        )
        .unwrap();
    assert!(
        sys.starts_with("<s><|im_start|>system\nBe brief.<|im_end|>\n"),
        "{sys}"
    );
}

#[test]
fn exactly_one_bos_and_special_tokens_are_single_ids() {
    let (_d, tok) = tokenizer();
    let ids = tok
        .encode_chat(&[ChatMessage::new("user", "hi")], false)
        .unwrap();
    assert_eq!(ids[0], synthetic::BOS_ID);
    assert_eq!(ids.iter().filter(|&&t| t == synthetic::BOS_ID).count(), 1);
    assert_eq!(ids[1], tok.token_id("<|im_start|>").unwrap());
    // Raw text gets one BOS too, and a doubled one is collapsed.
    assert_eq!(tok.encode_raw("abc").unwrap()[0], synthetic::BOS_ID);
    let doubled = tok.encode_raw("<s><s>abc").unwrap();
    assert_eq!(
        &doubled[..2],
        &[synthetic::BOS_ID, synthetic::BYTE_BASE + b'a' as u32]
    );
    // Decoding skips special tokens.
    assert_eq!(tok.decode(&ids).unwrap(), "system\n\nuser\nhi\nassistant\n");
}

#[test]
fn stream_never_splits_a_character() {
    let (_d, tok) = tokenizer();
    let text = "naïve café — 数学 ✓";
    let ids = tok.encode_raw(text).unwrap();
    let mut stream = tok.stream();
    let mut out = String::new();
    for &id in &ids[1..] {
        let piece = stream.push(&[id]).unwrap();
        assert!(
            !piece.contains('\u{FFFD}'),
            "partial character emitted: {piece:?}"
        );
        out.push_str(&piece);
    }
    out.push_str(&stream.finish().unwrap());
    assert_eq!(out, text);
}

#[test]
fn missing_template_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    synthetic::write_checkpoint(dir.path(), &Spec::toy()).unwrap();
    std::fs::remove_file(dir.path().join("chat_template.jinja")).unwrap();
    let files = ModelSource::Local(dir.path().to_path_buf())
        .resolve()
        .unwrap();
    let tok = TextTokenizer::load(&files, Some(1)).unwrap();
    let err = tok
        .encode_chat(&[ChatMessage::new("user", "x")], false)
        .unwrap_err();
    assert!(err.to_string().contains("--raw"), "{err}");
}
