//! The round pane rendered into a `TestBackend`: the draft, the verdict, the block
//! choice, branch rows, diffusion blocks and the position inspector, at small and large
//! sizes.

use super::*;

/// The answer ends inside a block the verifier accepted whole: the positions past the
/// end and the bonus are drawn as discarded, the verdict says how many were kept, and
/// the continuation that hit says it went unused.
#[test]
fn positions_past_the_answers_end_are_not_drawn_as_accepted() {
    let theme = Theme::dark();
    let mut s = scripted();
    feed(
        &mut s,
        0.07,
        DecodeEvent::Drafted {
            req: 1,
            round: 2,
            block: vec![18, 14, 15, 16],
            margins: vec![0.9, 0.9, 0.9],
            risky: vec![],
            reused: None,
            detail: vec![],
            rows: None,
        },
    );
    feed(
        &mut s,
        0.07,
        DecodeEvent::BranchesBuilt {
            req: 1,
            round: 2,
            branches: vec![BranchView {
                kind: BranchKind::Continuation,
                at: 3,
                alt: None,
                tokens: 8,
                block: vec![17, 10],
            }],
        },
    );
    feed(
        &mut s,
        0.08,
        DecodeEvent::Verified {
            req: 1,
            round: 2,
            accepted: 3,
            first_reject: None,
            verifier_tokens: vec![14, 15, 16, 17],
            bonus: 17,
            detail: vec![],
        },
    );
    let before = draw(&s, &theme, 160, 48);
    // " Done" is drawn "·Done" in the draft row (the chat has a plain space).
    let (x, y) = find_text(&before, "·Done").expect("the draft row");
    assert_eq!(before[(x, y)].fg, theme.accepted.fg.unwrap(), "not cut yet");
    // Only ". Done" made it into the answer (say " Done" was the end of turn).
    feed(
        &mut s,
        0.08,
        DecodeEvent::Committed {
            req: 1,
            round: 2,
            tokens: vec![14, 15],
            origins: vec![Origin::Draft, Origin::Draft],
            text: ". Done".into(),
        },
    );
    feed(
        &mut s,
        0.08,
        DecodeEvent::BranchResolved {
            req: 1,
            round: 2,
            outcome: BranchOutcome::Hit {
                index: 0,
                kind: BranchKind::Continuation,
            },
        },
    );
    let live = screen_text(&draw(&s, &theme, 160, 48));
    assert!(
        live.contains("✓ HIT") && !live.contains("unused"),
        "still answering"
    );
    // Stopped by the user, the hit went unused for that reason.
    let mut stopped = s.clone();
    cancel(&mut stopped, 0.08);
    let all = screen_text(&draw(&stopped, &theme, 160, 48));
    assert!(all.contains("HIT, unused: the answer was stopped"), "{all}");
    // Ctrl+L clears the chat, not what the round pane knows of the request.
    feed(&mut stopped, 0.09, SessionEvent::ChatCleared);
    let all = screen_text(&draw(&stopped, &theme, 160, 48));
    assert!(all.contains("HIT, unused: the answer was stopped"), "{all}");
    finish(&mut s);
    let buf = draw(&s, &theme, 160, 48);
    let all = screen_text(&buf);
    assert!(
        all.contains("→ 2 tokens kept: the answer ends here"),
        "{all}"
    );
    assert!(all.contains("HIT, unused: the answer ended"), "{all}");
    // The round's history bar shows the 2 kept of its 4, not the 4 it advanced.
    let (hx, top) = find_text(&buf, "adv/B").expect("the history's bars");
    let base = (top + 1..top + 6)
        .find(|&y| text_at(&buf, hx, y, 5) == "block")
        .expect("the block row");
    let first = (hx + 5..hx + 20)
        .find(|&x| buf[(x, base)].symbol() != " ")
        .expect("round 1's block glyph");
    let column: String = (top..base)
        .map(|y| buf[(first + 1, y)].symbol().to_string())
        .collect();
    let rows = usize::from(base - top);
    let full = column.chars().filter(|c| *c == '█').count();
    assert_eq!(full, rows / 2, "half the rows: {column:?}");
    // The verdict counts up to the end: no "full block", no bonus after it.
    assert!(
        all.contains("✓ accepted 2 of 3  → 2 tokens kept: the answer ends here"),
        "{all}"
    );
    assert!(
        !all.contains("full block") && !all.contains("bonus '⏎'"),
        "{all}"
    );
    let (x, y) = find_text(&buf, "·Done").unwrap();
    let row = text_at(&buf, x, y, 12);
    assert_eq!(buf[(x, y)].fg, theme.accepted.fg.unwrap(), "{row}");
    let col = |c: char| x + row.chars().position(|r| r == c).expect("on the row") as u16;
    let bang = col('!');
    assert_eq!(buf[(bang, y)].fg, theme.discarded.fg.unwrap(), "{row}");
    // The verifier's token after the end is no bonus: not drawn.
    assert!(!row.contains('+'), "{row}");
}

#[test]
fn round_choice_shows_its_rate_and_each_candidate() {
    let reason = BlockDecision {
        rule: Rule::Round,
        rate: Some(1.25),
        candidates: vec![
            BlockCandidate {
                block: 1,
                value: 1.0,
                cost_ms: 0.5,
                rows_ms: 0.0,
            },
            BlockCandidate {
                block: 8,
                value: 5.0,
                cost_ms: 2.0,
                rows_ms: 0.0,
            },
        ],
        ..ratio_reason()
    };
    let buf = draw(&scripted_with(reason), &Theme::dark(), 160, 48);
    let all = screen_text(&buf);
    let (_, y) =
        find_text(&buf, "block 8 · best tokens per ms for the round").expect("the reason in words");
    assert!(
        !all.contains("λ") && !all.contains("ratio"),
        "no internal ids: {all}"
    );
    // Each size shows the figure the rule picked the largest of: V − T × the round's
    // rate (1.0 − 0.5 × 1.25, 5.0 − 2.0 × 1.25), so the pick is the largest shown.
    let (_, cy) = find_text(&buf, "net tokens V − T×1.25/ms per size:").unwrap();
    assert!(cy > y);
    let line = text_at(&buf, 0, cy, 160) + &text_at(&buf, 0, cy + 1, 160);
    assert!(
        line.contains("1: +0.38") && line.contains("8: +2.50◀"),
        "{line}"
    );
    let (x, y) = find_text(&buf, "8: +2.50◀").unwrap();
    assert_eq!(buf[(x, y)].fg, Theme::dark().title.fg.unwrap());
}

#[test]
fn an_ar_regime_step_shows_the_measured_rates() {
    let reason = BlockDecision {
        rule: Rule::ArRegime,
        candidates: Vec::new(),
        measured: Some(RegimeRates {
            draft: Some(0.78),
            ar: Some(0.93),
        }),
        ..ratio_reason()
    };
    // The scripted round drafted 8; an AR step's reason reads the same whatever B.
    let buf = draw(&scripted_with(reason.clone()), &Theme::dark(), 160, 48);
    let (x, y) = find_text(&buf, "AR step (measured regime)").expect("the reason line");
    let all = screen_text(&buf);
    assert!(
        all.contains("measured tokens/ms here: AR steps 0.93 · drafting 0.78"),
        "{all}"
    );
    assert_eq!(buf[(x, y)].fg, Theme::dark().text.fg.unwrap());
    // Not measured yet: a dash.
    let trial = BlockDecision {
        rule: Rule::ArTrial,
        measured: Some(RegimeRates {
            draft: Some(0.78),
            ar: None,
        }),
        ..reason
    };
    let buf = draw(&scripted_with(trial), &Theme::dark(), 160, 48);
    assert!(screen_text(&buf).contains("AR steps — · drafting 0.78"));
}

/// The candidates show whole or not at all: never their heading without the figures.
#[test]
fn the_candidates_heading_never_shows_without_its_figures() {
    // Chosen for the round: the heading is long enough to take rows of its own.
    let s = scripted_with(BlockDecision {
        rule: Rule::Round,
        rate: Some(0.13),
        ..ratio_reason()
    });
    let mut shown = 0;
    for h in 16..40 {
        let all = screen_text(&draw(&s, &Theme::dark(), 80, h));
        if all.contains("net tokens") {
            assert!(all.contains('◀'), "80×{h}: {all}");
            shown += 1;
        }
    }
    // Not vacuous: tall panes do show them.
    assert!(shown > 0, "the candidates never showed at 80 columns");
}

/// An AR step's token is never cut at the pane's border: it wraps whole.
#[test]
fn an_ar_step_shows_its_whole_token_at_80_columns() {
    let mut s = scripted();
    feed(
        &mut s,
        0.1,
        SessionEvent::TokenText {
            tokens: vec![(20, " sufficiently".to_string())],
        },
    );
    feed(
        &mut s,
        0.1,
        DecodeEvent::Verified {
            req: 1,
            round: 2,
            accepted: 0,
            first_reject: None,
            verifier_tokens: vec![20],
            bonus: 20,
            detail: vec![],
        },
    );
    let buf = draw(&s, &Theme::dark(), 80, 24);
    let all = screen_text(&buf);
    assert!(all.contains("AR step: one token per forward"), "{all}");
    let (x, y) = find_text(&buf, "'·sufficiently'").expect("the whole token");
    assert_eq!(buf[(x, y)].fg, Theme::dark().bonus.fg.unwrap(), "{all}");
}

#[test]
fn inspector_shows_draft_and_verifier_top_k() {
    let mut s = scripted();
    for _ in 0..4 {
        update(&mut s, Msg::Action(Action::PosNext));
    }
    assert_eq!(s.rounds.selected, Some(3));
    let buf = draw(&s, &Theme::dark(), 160, 48);
    let (_, y) = find_text(&buf, "draft top-k").unwrap();
    let line = text_at(&buf, 0, y, 160);
    assert!(
        line.contains("·19 0.50") && line.contains("·91 0.40"),
        "{line}"
    );
    let (_, y) = find_text(&buf, "verifier top-k").unwrap();
    assert!(text_at(&buf, 0, y, 160).contains("·91 0.70"));
    // The heading names the token: the draft's, and the verifier's where it differs.
    assert!(
        find_text(&buf, "position 3: drafted '·19', verifier '·91'").is_some(),
        "{}",
        screen_text(&buf)
    );
    // At 80×24 the round folds (the decision on one line) so that both sides'
    // figures and both top-k lists show.
    let all = screen_text(&draw(&s, &Theme::dark(), 80, 24));
    assert!(
        all.contains("draft:    margin") && all.contains("verifier: margin"),
        "{all}"
    );
    assert!(
        all.contains("draft top-k    ·19 0.50  ·91 0.40")
            && all.contains("verifier top-k ·91 0.70  ·19 0.10"),
        "{all}"
    );
}

/// A live default-configuration round at a size: the draft row and the verdict are on
/// screen, and the status line keeps its markers.
fn default_round_at(w: u16, h: u16) -> Buffer {
    let mut s = scripted();
    update(&mut s, Msg::Recording(Some("x.jsonl".into())));
    s.status.pace = 2;
    s.status.paused = true;
    draw(&s, &Theme::dark(), w, h)
}

#[test]
fn at_80x24_the_draft_and_verdict_show_and_the_markers_stay() {
    let buf = default_round_at(80, 24);
    let all = screen_text(&buf);
    // The draft row: the seed, the tokens, the risky glyph on a margin.
    assert!(all.contains("seed"), "{all}");
    assert!(find(&buf, RISKY_GLYPH).len() >= 2, "{all}");
    assert!(all.contains("first reject at 3"), "{all}");
    // The status line (last row) keeps the markers at 80 columns.
    let status = text_at(&buf, 0, 23, 80);
    for m in ["● REC", "⏸", "slow 300ms", "help"] {
        assert!(status.contains(m), "{m} missing: {status}");
    }
    insta::assert_snapshot!("screen_80x24", format!("{buf:?}"));
}

#[test]
fn at_120x30_the_round_shows_whole() {
    let buf = default_round_at(120, 30);
    let all = screen_text(&buf);
    assert!(
        all.contains("seed") && all.contains("first reject at 3"),
        "{all}"
    );
    assert!(all.contains("HIT"), "{all}");
    insta::assert_snapshot!("screen_120x30", format!("{buf:?}"));
}

#[test]
fn the_verdict_wraps_instead_of_being_cut() {
    let buf = draw(&scripted(), &Theme::dark(), 80, 30);
    let all = screen_text(&buf);
    assert!(all.contains("verifier says"), "{all}");
    assert!(
        all.contains("→ 3 tokens"),
        "the end of the verdict shows: {all}"
    );
}

/// The round pane says "live" only while the request answers.
#[test]
fn round_title_says_live_only_while_answering() {
    let mut s = scripted();
    let live = screen_text(&draw(&s, &Theme::dark(), 120, 30));
    assert!(live.contains("request 1 live"), "{live}");
    finish(&mut s);
    let done = screen_text(&draw(&s, &Theme::dark(), 120, 30));
    assert!(done.contains("request 1 latest"), "{done}");
}

/// A round's one miss reason is about the kind of row it names: at a full block the
/// correction rows were not needed and the continuation missed; at a rejection the
/// continuation was not needed.
#[test]
fn branch_rows_say_which_of_them_missed() {
    use specscope::engine::events::MissReason;
    let rows = |reason: MissReason| {
        let mut s = scripted();
        let last = s.rounds.list.back_mut().unwrap();
        last.kept.as_mut().expect("committed").outcome = Some(BranchOutcome::Miss { reason });
        let all = screen_text(&draw(&s, &Theme::dark(), 200, 50));
        let line = |head: &str| {
            all.lines()
                .find(|l| l.contains(head))
                .unwrap_or_else(|| panic!("{head}: {all}"))
                .to_string()
        };
        (line("P1 @3"), line("new @8"))
    };
    let (p1, new) = rows(MissReason::ContinuationMiss);
    assert!(p1.contains("not needed") && !p1.contains("miss:"), "{p1}");
    assert!(
        new.contains("miss: continuation guessed another bonus"),
        "{new}"
    );
    let (p1, new) = rows(MissReason::WrongCandidate);
    assert!(p1.contains("miss: verifier chose another token"), "{p1}");
    assert!(new.contains("not needed"), "{new}");
}

/// A block diffusion canvas fills step by step in the round pane (masks, the step under
/// each token), and once written marks where AR would have said another token, in the
/// risky style; the history counts the block's agreement. At 80×24 and 200×50.
#[test]
fn a_diffusion_block_fills_and_shows_where_ar_disagrees() {
    let mut s = State::new("tiny", "cpu", opts());
    let words = [
        (10, "The"),
        (11, " sum"),
        (12, " is"),
        (13, " 19"),
        (14, " 91"),
    ];
    feed(
        &mut s,
        0.0,
        SessionEvent::TokenText {
            tokens: words.iter().map(|(i, w)| (*i, w.to_string())).collect(),
        },
    );
    feed(
        &mut s,
        0.01,
        DecodeEvent::RequestStarted {
            req: 1,
            mode: Mode::Diffusion,
            blocks: Blocks::Fixed(4),
            overlap: true,
            prompt_tokens: 12,
            max_new_tokens: 64,
            family: None,
        },
    );
    feed(
        &mut s,
        0.02,
        DecodeEvent::Denoised {
            req: 1,
            round: 1,
            step: 1,
            canvas: vec![Some(10), Some(11), None, None],
            positions: vec![0, 1],
            confidence: vec![0.97, 0.93],
        },
    );
    let theme = Theme::dark();
    for (w, h) in [(80, 24), (200, 50)] {
        let all = screen_text(&draw(&s, &theme, w, h));
        assert!(all.contains("step 1 · 2 masked of 4"), "{all}");
        assert!(all.contains("The ·sum"), "{all}");
        assert!(all.contains("░░"), "masks: {all}");
        assert!(all.contains("s1"), "the step under a token: {all}");
    }
    feed(
        &mut s,
        0.03,
        DecodeEvent::BlockWritten {
            req: 1,
            round: 1,
            block: vec![10, 11, 12, 14],
            steps: vec![1, 1, 2, 2],
            ar: vec![10, 11, 12, 13],
        },
    );
    let buf = draw(&s, &theme, 80, 24);
    let all = screen_text(&buf);
    assert!(all.contains("2 steps + 1 cache"), "{all}");
    assert!(all.contains("AR agrees at 3 of 4"), "{all}");
    assert!(all.contains("at 3 AR would say"), "{all}");
    assert!(all.contains("not lossless"), "{all}");
    // The disagreeing token carries ≠ and the risky style.
    let (x, y) = (0..buf.area.height)
        .find_map(|y| {
            let row = text_at(&buf, 0, y, buf.area.width);
            row.find("≠").map(|b| (row[..b].chars().count() as u16, y))
        })
        .expect("a ≠ mark");
    assert_eq!(buf[(x, y)].fg, theme.risky.fg.unwrap());
    // The history pane counts it: the block's bar and what diffusion cost.
    assert!(all.contains("=AR"), "{all}");
    // A selected position says how it was committed and what AR would say there.
    s.rounds.selected = Some(3);
    let all = screen_text(&draw(&s, &theme, 80, 24));
    assert!(all.contains("position 3: '·91' at step 2"), "{all}");
}

/// The round pane's rows, inside its border (the pane whose title starts "round").
fn round_pane_lines(buf: &Buffer) -> Vec<String> {
    let Some((x, y0)) = find_text(buf, "┌ round") else {
        return Vec::new();
    };
    let width = buf.area.width - x;
    let mut out = Vec::new();
    let mut y = y0 + 1;
    while y < buf.area.height && buf[(x, y)].symbol() == "│" {
        out.push(text_at(buf, x + 1, y, width - 2).trim_end().to_string());
        y += 1;
    }
    out
}

/// Whether a round pane line starts a branch row (`P1 @3 …`, `new @8 …`).
fn is_branch_head(l: &str) -> bool {
    ["P1 ", "P2 ", "P3 ", "new "]
        .iter()
        .any(|p| l.starts_with(p))
        && l.contains(" @")
}

/// Every frame of the demo at sizes from 80×24 up, with and without a selected
/// position: a branch row shows whole (its head through its verdict) or not at all,
/// however short the pane.
#[test]
fn branch_rows_are_never_cut_in_the_middle() {
    use specscope::engine::overlap::MissReason::*;
    let reasons = [
        NoBranches,
        Before,
        Between,
        After,
        WrongCandidate,
        ContinuationMiss,
        ContinuationAbsent,
        Ended,
    ];
    let mut endings: Vec<String> = reasons
        .iter()
        .map(|r| format!("miss: {}", r.describe()))
        .collect();
    endings.extend(
        [
            "HIT",
            "not needed",
            "…",
            "unused: the answer ended",
            "unused: the answer was stopped",
        ]
        .map(String::from),
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl");
    let trace = read_trace(&path).unwrap();
    let mut s = State::new("demo", "cpu", opts());
    let mut player = Player::new(trace.clone(), "demo".into());
    let (mut rows_seen, mut frames) = (0, 0);
    while player.pos < trace.events.len() {
        player.step(&mut s);
        frames += 1;
        if frames % 2 == 0 {
            update(&mut s, Msg::Action(Action::PosNext));
        }
        for (w, h) in [(80, 24), (80, 26), (96, 24), (100, 30), (120, 28)] {
            let lines = round_pane_lines(&draw(&s, &Theme::dark(), w, h));
            let mut i = 0;
            while i < lines.len() {
                if !is_branch_head(&lines[i]) {
                    i += 1;
                    continue;
                }
                let mut row = lines[i].clone();
                i += 1;
                while i < lines.len()
                    && !is_branch_head(&lines[i])
                    && !lines[i].starts_with("… (a larger pane")
                    && !lines[i].starts_with("net tokens")
                    && !lines[i].starts_with("tokens per ms")
                    && !lines[i].starts_with("measured tokens")
                {
                    row = format!("{row} {}", lines[i].trim());
                    i += 1;
                }
                rows_seen += 1;
                assert!(
                    endings.iter().any(|e| row.trim_end().ends_with(e.as_str())),
                    "a branch row cut at {w}x{h}: {row:?}\n{}",
                    lines.join("\n")
                );
            }
        }
    }
    assert!(rows_seen > 100, "the demo shows branch rows ({rows_seen})");
}

/// Every frame of the demo whose shown round built branch rows, as a chat shows it
/// (no position selected): at 80×24, 120×40 and 200×50 a branch row is on screen in
/// at least 98% of them, and where a pane says "a larger pane shows the
/// rest" the lines left blank under it are fewer than the next row would take.
#[test]
fn branch_rows_show_in_the_frames_whose_round_built_them() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl");
    let trace = read_trace(&path).unwrap();
    // The floor is 80% at 80×24; the demo's frames reach all 149 (the layout
    // before folding showed 140), so anything short of 98% is a regression.
    for ((w, h), target) in [((80, 24), 0.98), ((120, 40), 0.98), ((200, 50), 0.98)] {
        let mut s = State::new("demo", "cpu", opts());
        let mut player = Player::new(trace.clone(), "demo".into());
        let (mut built, mut shown) = (0usize, 0usize);
        while player.pos < trace.events.len() {
            player.step(&mut s);
            let Some(r) = s.shown_round() else { continue };
            if r.branches.is_empty() {
                continue;
            }
            built += 1;
            let lines = round_pane_lines(&draw(&s, &Theme::dark(), w, h));
            // A note on what a cut hides is whole, never cut at the border itself.
            for l in lines.iter().filter(|l| l.starts_with("… ")) {
                assert!(l.ends_with(')'), "a note cut at {w}x{h}: {l:?}");
            }
            let heads = lines.iter().filter(|l| is_branch_head(l)).count();
            shown += usize::from(heads > 0);
            if let Some(k) = lines
                .iter()
                .position(|l| l == "… (a larger pane shows the rest)")
            {
                let blank = lines.len() - k - 1;
                // The next row, as a taller pane of the same width draws it.
                let tall = round_pane_lines(&draw(&s, &Theme::dark(), w, h + 40));
                let starts: Vec<usize> = (0..tall.len())
                    .filter(|&i| is_branch_head(&tall[i]))
                    .collect();
                if let Some(&at) = starts.get(heads) {
                    let next = tall[at + 1..]
                        .iter()
                        .take_while(|l| {
                            !is_branch_head(l)
                                && !l.is_empty()
                                && !["net tokens", "tokens per ms", "measured tokens"]
                                    .iter()
                                    .any(|p| l.starts_with(p))
                        })
                        .count()
                        + 1;
                    assert!(
                        blank < next,
                        "{blank} blank lines beside the note at {w}x{h}, where the next row takes {next}:\n{}",
                        lines.join("\n")
                    );
                }
            }
        }
        let share = shown as f64 / built.max(1) as f64;
        eprintln!("{w}x{h}: a branch row in {shown} of {built} frames whose round built one");
        assert!(built > 50, "{built}");
        assert!(
            share >= target,
            "{w}x{h}: a branch row in {shown} of {built} frames whose round built one"
        );
    }
}

/// A round of a real NLD log (the SGLang confidence-trace fixture) at 80×24: the block
/// with its accepted confidences and the rejected draft marked in the rejected
/// style, the verifier's token's rank in the draft, the source on the status line of
/// a wide screen, and no tokens per second (its forwards ran elsewhere).
#[test]
fn an_imported_round_shows_what_nld_did() {
    use specscope::trace::nld::import::{import, ImportOptions};
    let theme = Theme::dark();
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/nld/raw_trace_gsm8k.head12.jsonl");
    let trace = import(
        &[file],
        &ImportOptions {
            label: Some("SGLang LinearSpec, NLD-8B".into()),
            ..ImportOptions::default()
        },
    )
    .unwrap();
    let h = &trace.header;
    let mut s =
        State::new(&h.model, &h.device, h.options.decode.clone()).with_source(h.source.clone());
    // Up to line 8: request 191e…'s first round, one accepted draft (.9986), the
    // reject at 2 where the verifier's token was the draft's 2nd choice.
    for e in trace.events.iter().take_while(
        |e| !matches!(&e.event, TraceEvent::Session(SessionEvent::ImportedRound(r)) if r.line > 8),
    ) {
        feed(&mut s, e.t, e.event.clone());
    }
    let buf = draw(&s, &theme, 80, 24);
    let text = screen_text(&buf);
    assert!(
        text.contains("block 16 · LinearSpec, from its log"),
        "{text}"
    );
    assert!(text.contains("✓ accepted 1 of 15"), "{text}");
    assert!(text.contains("first reject at 2:"), "{text}");
    assert!(text.contains("the draft's 2nd"), "{text}");
    assert!(!text.contains("tok/s"), "{text}");
    let (x, y) = find_text(&buf, &format!("{REJECT_GLYPH}⟨2190⟩")).expect("the rejected draft");
    assert_eq!(buf[(x, y)].bg, theme.rejected.bg.unwrap());
    assert_eq!(buf[(x, y)].fg, theme.rejected.fg.unwrap());
    let (x, y) = find_text(&buf, "1.00").expect("the accepted draft's confidence");
    assert_eq!(buf[(x, y)].fg, theme.dim.fg.unwrap());
    // The history pane draws the round's bar.
    assert!(text.contains("history · 6 rounds"), "{text}");
    let wide = screen_text(&draw(&s, &theme, 180, 40));
    assert!(
        wide.contains("imported: SGLang LinearSpec, NLD-8B (from its log)"),
        "{wide}"
    );
    assert!(wide.contains("not in this log:"), "{wide}");
}
