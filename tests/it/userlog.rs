//! Integration tests: the user-log parser, follower and `cosched log` commands.
//!
//! Parity is checked against dumps made by HTCondor's own reader
//! (`../shared/fixtures/userlogs/*.ref.jsonl`); crafted edge cases live in
//! `fixtures/userlogs/`.

use crate::util;
use cosched::userlog::{parse_bytes, AttrValue, Event, EventBody, Follower, Parser, TransferKind};
use proptest::prelude::*;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// The 1-based line of byte `offset` of `bytes`, counted here rather than
/// taken from the parser: what an editor shows for that byte.
fn line_of(bytes: &[u8], offset: u64) -> u64 {
    1 + bytes[..offset as usize].iter().filter(|&&b| b == b'\n').count() as u64
}

fn crafted(name: &str) -> Vec<u8> {
    let path = util::root().join("fixtures/userlogs").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn json_lines(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(bytes).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

/// `[ Cpus = 1; CondorScratchDir = "/x" ]` (HTCondor's ClassAd text) → object.
fn classad_text_to_json(text: &str) -> Value {
    let inner = text.trim().trim_start_matches('[').trim_end_matches(']');
    let mut map = serde_json::Map::new();
    for part in inner.split(';') {
        let Some((k, v)) = part.split_once('=') else { continue };
        let v = v.trim();
        let value = if let Some(s) = v.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
            Value::from(s)
        } else if let Ok(i) = v.parse::<i64>() {
            Value::from(i)
        } else {
            Value::from(v.parse::<f64>().unwrap_or(f64::NAN))
        };
        map.insert(k.trim().to_string(), value);
    }
    Value::Object(map)
}

#[test]
fn dump_matches_htcondors_reader_on_every_shared_fixture() {
    let tmp = util::tempdir();
    for log in util::shared_logs() {
        let reference = log.with_extension("ref.jsonl");
        let want = json_lines(&std::fs::read(&reference).unwrap());
        let out = util::cosched(tmp.path(), &["log", "dump", log.to_str().unwrap()]);
        let name = log.display();
        assert_eq!(out.status.code(), Some(0), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(out.stderr.is_empty(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let got = json_lines(&out.stdout);
        assert_eq!(got.len(), want.len(), "{name}: event count");
        // Legacy `MM/DD` stamps carry no year: both readers assume "now".
        let legacy = std::fs::read(&log).unwrap().get(20) == Some(&b'/');
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            for key in ["type", "cluster", "proc", "subproc"] {
                assert_eq!(g[key], w[key], "{name}: event {i} {key}");
            }
            let (gt, wt) = (g["time"].as_str().unwrap(), w["time"].as_str().unwrap());
            if legacy {
                assert_eq!(gt[4..], wt[4..], "{name}: event {i} time without the year");
            } else {
                assert_eq!(gt, wt, "{name}: event {i} time");
            }
            let (ga, wa) = (g["attrs"].as_object().unwrap(), w["attrs"].as_object().unwrap());
            let mut gk: Vec<&String> = ga.keys().collect();
            let mut wk: Vec<&String> = wa.keys().collect();
            gk.sort();
            wk.sort();
            assert_eq!(gk, wk, "{name}: event {i} attribute names");
            for (k, wv) in wa {
                let wv =
                    if k == "ExecuteProps" { classad_text_to_json(wv.as_str().unwrap()) } else { wv.clone() };
                assert_eq!(ga[k], wv, "{name}: event {i} attribute {k}");
            }
        }
    }
}

/// Per-job times computed straight from HTCondor's own dump.
fn reference_turnarounds(reference: &Path) -> Vec<f64> {
    use std::collections::BTreeMap;
    let secs = |t: &str| {
        let d = chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S%.f").unwrap();
        d.and_utc().timestamp_millis() as f64 / 1000.0
    };
    let mut jobs: BTreeMap<(i64, i64), (Option<f64>, Option<f64>)> = BTreeMap::new();
    for ev in json_lines(&std::fs::read(reference).unwrap()) {
        let key = (ev["cluster"].as_i64().unwrap(), ev["proc"].as_i64().unwrap());
        let t = secs(ev["time"].as_str().unwrap());
        let job = jobs.entry(key).or_default();
        match ev["type"].as_i64().unwrap() {
            0 => job.0 = job.0.or(Some(t)),
            5 => job.1 = Some(t),
            _ => {}
        }
    }
    jobs.values().filter_map(|(s, e)| Some(e.as_ref()? - s.as_ref()?)).collect()
}

#[test]
fn stats_agree_with_the_reference_dump() {
    let tmp = util::tempdir();
    for log in util::shared_logs() {
        let want = reference_turnarounds(&log.with_extension("ref.jsonl"));
        let out = util::cosched(tmp.path(), &["log", "stats", "--json", log.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", log.display());
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let ta = &doc["turnaround_s"];
        assert_eq!(ta["n"].as_u64().unwrap() as usize, want.len(), "{}", log.display());
        let mean = want.iter().sum::<f64>() / want.len() as f64;
        let max = want.iter().cloned().fold(f64::MIN, f64::max);
        assert!((ta["mean"].as_f64().unwrap() - mean).abs() < 1e-6, "{}: mean", log.display());
        assert!((ta["max"].as_f64().unwrap() - max).abs() < 1e-6, "{}: max", log.display());
        let lines = std::fs::read_to_string(log.with_extension("ref.jsonl")).unwrap().lines().count() as u64;
        let counted: u64 =
            doc["events"].as_array().unwrap().iter().map(|e| e["count"].as_u64().unwrap()).sum();
        assert_eq!(counted, lines, "{}: event count", log.display());
    }
    // grid-condorc: 8 jobs ran to completion, 34.0 and 35.0 were removed.
    let grid = util::shared().join("fixtures/userlogs/grid-condorc.log");
    let out = util::cosched(tmp.path(), &["log", "stats", "--json", grid.to_str().unwrap()]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["jobs"]["completed"], 8);
    assert_eq!(doc["jobs"]["removed"], 2);
    assert_eq!(doc["queue_wait_s"]["n"], 10);
    let text = util::cosched(tmp.path(), &["log", "stats", grid.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("turnaround"));
}

#[test]
fn every_event_code_in_the_crafted_log_gets_a_typed_body() {
    let bytes = crafted("all-events.log");
    let (events, diags) = parse_bytes(&bytes);
    assert!(diags.is_empty(), "{diags:?}");
    let header_codes: Vec<u16> = String::from_utf8_lossy(&bytes)
        .lines()
        .filter(|l| {
            l.len() > 4 && l.as_bytes()[..3].iter().all(u8::is_ascii_digit) && l.as_bytes()[3] == b' '
        })
        .map(|l| l[..3].parse().unwrap())
        .collect();
    assert_eq!(events.iter().map(|e| e.code).collect::<Vec<_>>(), header_codes);
    for ev in &events {
        assert!(!matches!(ev.body, EventBody::Other { .. }), "event {:03} not typed: {:?}", ev.code, ev.body);
        assert_eq!(&bytes[ev.offset as usize..ev.offset as usize + 3], format!("{:03}", ev.code).as_bytes());
    }
    let find = |code: u16| events.iter().filter(move |e| e.code == code).map(|e| &e.body);
    let mut terms = find(5);
    assert!(
        matches!(terms.next(), Some(EventBody::Terminated { normal: true, return_value: Some(3), signal: None, usage, .. })
        if usage.sent_bytes == 10.0 && usage.total_received_bytes == 40.0 && usage.total_remote.user_secs == 93_784
            && usage.resources.iter().any(|r| r.name == "Cpus" && r.usage == Some(AttrValue::Real(0.25))))
    );
    assert!(
        matches!(terms.next(), Some(EventBody::Terminated { normal: false, signal: Some(11), core_file: Some(c), .. })
        if c == "/tmp/core.123")
    );
    let held: Vec<_> = find(12).collect();
    assert!(matches!(held[0], EventBody::Held { reason, code: 0, subcode: 0 } if reason.is_empty()));
    assert!(matches!(held[1], EventBody::Held { code: 3, .. }));
    assert!(
        matches!(find(4).next(), Some(EventBody::Evicted { code: 1000, subcode: 102, reason: Some(r), .. })
        if r.contains("PeriodicHold"))
    );
    assert!(matches!(find(27).next(), Some(EventBody::GridSubmit { resource, job_id })
        if resource == "batch slurm" && job_id == "batch slurm 12345"));
    assert!(matches!(find(33).next(), Some(EventBody::AttributeUpdate { name, value, old_value: Some(o) })
        if name == "JobPrio" && value == "10" && o == "0"));
    assert!(matches!(
        find(40).next(),
        Some(EventBody::FileTransfer { kind: TransferKind::InputQueued, queueing_delay: Some(4), .. })
    ));
    assert!(matches!(find(28).next(), Some(EventBody::JobAd { attrs }) if attrs.len() == 4));
    assert!(matches!(find(1).next(), Some(EventBody::Execute { slot_name: Some(s), props, .. })
        if s == "slot1_1@vm" && props.len() == 3));
}

#[test]
fn crlf_log_reads_like_the_same_log_with_lf() {
    let crlf = crafted("crlf.log");
    let lf: Vec<u8> = String::from_utf8(crlf.clone()).unwrap().replace("\r\n", "\n").into_bytes();
    let (a, da) = parse_bytes(&crlf);
    let (b, db) = parse_bytes(&lf);
    assert!(da.is_empty() && db.is_empty(), "{da:?} {db:?}");
    assert_eq!(a.len(), 6);
    let strip = |v: &[Event]| {
        v.iter().map(|e| (e.code, e.cluster, e.proc, e.time, e.body.clone())).collect::<Vec<_>>()
    };
    assert_eq!(strip(&a), strip(&b));
}

#[test]
fn torn_write_is_held_back_until_complete() {
    let bytes = crafted("torn-write.log");
    let torn_at = bytes.windows(4).rposition(|w| w == b"005 ").unwrap() as u64;
    let mut parser = Parser::new();
    let events = parser.feed(&bytes);
    assert_eq!(events.len(), 3);
    assert_eq!(parser.consumed(), torn_at);
    assert!(parser.take_diagnostics().is_empty(), "a torn tail is not an error while following");
    let (events, diags) = parse_bytes(&bytes);
    assert_eq!(events.len(), 3);
    assert_eq!(diags.len(), 1);
    assert_eq!(diags[0].offset, torn_at, "{diags:?}");
    assert_eq!(diags[0].line, Some(line_of(&bytes, torn_at)), "{diags:?}");
}

#[test]
fn garbage_between_events_is_reported_and_skipped() {
    let bytes = crafted("garbage.log");
    let at = |needle: &str| bytes.windows(needle.len()).position(|w| w == needle.as_bytes()).unwrap() as u64;
    let (events, diags) = parse_bytes(&bytes);
    let ids: Vec<(u16, i64)> = events.iter().map(|e| (e.code, e.proc)).collect();
    assert_eq!(ids, [(0, 0), (1, 0), (5, 0), (9, 1), (12, 2)]);
    assert!(matches!(events[2].body, EventBody::Other { .. }), "the torn 005 is kept raw");
    let offsets: Vec<u64> = diags.iter().map(|d| d.offset).collect();
    for expected in [
        at("this line"),
        at("...\n001 (080"),
        at("001 (080.000.000) 2026-13"),
        at("garbage right"),
        at("005 (080"),
    ] {
        assert!(offsets.contains(&expected), "no diagnostic at {expected}: {diags:?}");
        let d = diags.iter().find(|d| d.offset == expected).unwrap();
        assert_eq!(d.line, Some(line_of(&bytes, expected)), "{d:?}");
    }
    let tmp = util::tempdir();
    let path = util::root().join("fixtures/userlogs/garbage.log");
    let out = util::cosched(tmp.path(), &["log", "dump", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json_lines(&out.stdout).len(), 5);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), diags.len(), "{stderr}");
    for (l, d) in stderr.lines().zip(&diags) {
        let want = format!("{}:{}: {}", path.display(), line_of(&bytes, d.offset), d.message);
        assert_eq!(l, want);
    }
}

#[test]
fn unknown_codes_and_huge_ids_are_never_fatal() {
    let (events, diags) = parse_bytes(&crafted("unknown-codes.log"));
    assert_eq!(events.iter().map(|e| e.code).collect::<Vec<_>>(), [0, 17, 39, 48, 999, 5, 1]);
    assert!(
        matches!(&events[3].body, EventBody::Other { text, body } if text == "Some future event" && body.contains("FutureAttr = 42"))
    );
    assert!(
        matches!(&events[6].body, EventBody::Execute { host, .. } if host.starts_with("condor ce.example.org"))
    );
    assert_eq!(diags.len(), 1, "only the 005 with a foreign body: {diags:?}");

    let (events, diags) = parse_bytes(&crafted("huge-ids.log"));
    let ids: Vec<(i64, i64, i64)> = events.iter().map(|e| (e.cluster, e.proc, e.subproc)).collect();
    assert_eq!(ids, [(12_345_678_901, 1000, 0), (-1, -1, -1), (1, 2, 3), (i64::MAX, 0, 0)]);
    assert_eq!(diags.len(), 1, "the id that does not fit in 64 bits: {diags:?}");
}

#[test]
fn xml_logs_and_mixed_logs() {
    let xml = crafted("xml.log");
    let (events, diags) = parse_bytes(&xml);
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(events.iter().map(|e| e.code).collect::<Vec<_>>(), [0, 1, 5, 12, 27, 9]);
    assert_eq!(events[0].time.iso(), "2026-11-21T06:30:00.125");
    assert!((events[1].time.naive_seconds() - events[0].time.naive_seconds() - 5.375).abs() < 1e-9);
    assert!(
        matches!(&events[1].body, EventBody::Execute { props, .. } if props.len() == 2),
        "nested <c> read"
    );
    assert!(
        matches!(&events[2].body, EventBody::Terminated { normal: true, return_value: Some(0), usage, .. }
        if usage.received_bytes == 125_652.0 && usage.run_remote.user_secs == 3)
    );
    assert!(
        matches!(&events[3].body, EventBody::Held { code: 6, subcode: 2, reason } if reason.contains("/nonexistent/prog"))
    );
    // Text and XML events in one log, as when jobs of both kinds share it.
    let text = crafted("crlf.log");
    let mixed = [text.clone(), xml.clone(), text.clone()].concat();
    let (events, diags) = parse_bytes(&mixed);
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(events.len(), 6 + 6 + 6);
}

#[test]
fn timestamps_give_naive_and_absolute_seconds() {
    let log = b"000 (1.0.0) 2026-11-21 05:00:00 Job submitted from host: x\n...\n\
                000 (1.1.0) 2026-11-21T05:00:01.250Z Job submitted from host: x\n...\n";
    let (events, _) = parse_bytes(log);
    let (a, b) = (events[0].time, events[1].time);
    assert!((b.naive_seconds() - a.naive_seconds() - 1.25).abs() < 1e-9);
    let utc = a.naive_seconds();
    assert_eq!(a.to_unix(3600), utc - 3600.0, "local stamps move by the offset");
    assert_eq!(b.to_unix(3600), b.naive_seconds(), "Z stamps ignore it");
    assert_eq!(a.iso(), "2026-11-21T05:00:00");
    assert_eq!(b.iso(), "2026-11-21T05:00:01.250");
    let (legacy, _) = cosched::userlog::parse_bytes_with_year(
        b"000 (1.0.0) 02/29 05:00:00 Job submitted from host: x\n...\n",
        2028,
    );
    assert_eq!(legacy[0].time.iso(), "2028-02-29T05:00:00");
}

#[test]
fn bad_inputs_give_a_one_line_error_and_exit_2() {
    let tmp = util::tempdir();
    let binary = tmp.path().join("core.bin");
    std::fs::write(&binary, [0x7f, b'E', b'L', b'F', 0, 1, 2, 0, 0, 0]).unwrap();
    let missing = tmp.path().join("nope.log");
    let dir = tmp.path().to_path_buf();
    for (path, what) in [(&missing, "no such file"), (&dir, "directory"), (&binary, "binary")] {
        for cmd in [&["log", "dump"][..], &["log", "stats"][..]] {
            let mut args: Vec<&str> = cmd.to_vec();
            args.push(path.to_str().unwrap());
            let out = util::cosched(tmp.path(), &args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
            assert!(stderr.contains(path.to_str().unwrap()) && stderr.contains(what), "{args:?}: {stderr}");
            assert!(out.stdout.is_empty());
        }
    }
}

/// All the logs, text and XML, as one stream.
fn corpus() -> Vec<u8> {
    let mut all = Vec::new();
    for log in util::shared_logs() {
        if !log.ends_with("many-jobs.log") {
            all.extend(std::fs::read(log).unwrap());
        }
    }
    for name in ["all-events.log", "crlf.log", "xml.log", "garbage.log", "unknown-codes.log"] {
        all.extend(crafted(name));
    }
    all
}

/// Feeds `bytes` in chunks of the given sizes (cycled), then finishes.
fn feed_in_chunks(bytes: &[u8], sizes: &[usize]) -> (Vec<Event>, Vec<cosched::userlog::Diagnostic>) {
    let mut parser = Parser::new();
    let mut events = Vec::new();
    let mut at = 0;
    for size in sizes.iter().cycle() {
        if at >= bytes.len() {
            break;
        }
        let end = (at + size.max(&1)).min(bytes.len());
        events.extend(parser.feed(&bytes[at..end]));
        assert!(parser.consumed() <= end as u64);
        at = end;
    }
    events.extend(parser.finish());
    (events, parser.take_diagnostics())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Chunk boundaries never change what is parsed.
    #[test]
    fn chunked_feeding_yields_the_events_of_feeding_whole(
        sizes in prop::collection::vec(prop_oneof![1usize..8, 1usize..5000], 1..40)
    ) {
        let bytes = corpus();
        let whole = parse_bytes(&bytes);
        let chunked = feed_in_chunks(&bytes, &sizes);
        prop_assert_eq!(&chunked.0, &whole.0);
        prop_assert_eq!(&chunked.1, &whole.1);
    }
}

/// Random edits of a valid log: bytes flipped, inserted, deleted, and
/// structure-looking pieces spliced in.
fn mutated() -> impl Strategy<Value = Vec<u8>> {
    let base = [crafted("all-events.log"), crafted("xml.log")].concat();
    let len = base.len();
    let pieces: Vec<&'static [u8]> = vec![
        b"\n...\n",
        b"<c>",
        b"</c>",
        b"\r",
        b"\n",
        b"000 (",
        b"<a n=\"",
        b"2026-11-21 ",
        b"\x00",
        b"\xff\xfe",
    ];
    let edit = (0..len, any::<u8>(), 0usize..4, 0..pieces.len());
    prop::collection::vec(edit, 1..30).prop_map(move |edits| {
        let mut b = base.clone();
        for (pos, byte, kind, piece) in edits {
            let pos = pos.min(b.len());
            match kind {
                0 if pos < b.len() => b[pos] = byte,
                1 => b.insert(pos, byte),
                2 if pos < b.len() => {
                    b.remove(pos);
                }
                _ => {
                    let p = pieces[piece];
                    b.splice(pos..pos, p.iter().copied());
                }
            }
        }
        b
    })
}

fn check_no_panic_and_consistent(bytes: &[u8], sizes: &[usize]) -> Result<(), TestCaseError> {
    let whole = parse_bytes(bytes);
    let mut last = None;
    for ev in &whole.0 {
        prop_assert!((ev.offset as usize) < bytes.len());
        prop_assert!(!matches!(last, Some(l) if l >= ev.offset), "offsets increase");
        last = Some(ev.offset);
        let _ = ev.to_json();
    }
    for d in &whole.1 {
        prop_assert!(d.offset as usize <= bytes.len());
        prop_assert_eq!(d.line, Some(line_of(bytes, d.offset)), "{:?}", d);
    }
    let chunked = feed_in_chunks(bytes, sizes);
    prop_assert_eq!(&chunked.0, &whole.0);
    prop_assert_eq!(&chunked.1, &whole.1);
    // Outlines: the same events and diagnostics, less detail.
    let mut outline = Parser::new().outline();
    let mut brief = outline.feed(bytes);
    brief.extend(outline.finish());
    prop_assert_eq!(&outline.take_diagnostics(), &whole.1);
    prop_assert_eq!(brief.len(), whole.0.len());
    for (b, w) in brief.iter().zip(&whole.0) {
        prop_assert_eq!((b.offset, b.code, b.job(), b.time), (w.offset, w.code, w.job(), w.time));
        prop_assert_eq!(std::mem::discriminant(&b.body), std::mem::discriminant(&w.body));
        prop_assert_eq!(cosched::report::model::from_userlog(b), cosched::report::model::from_userlog(w));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..3000),
                                sizes in prop::collection::vec(1usize..600, 1..8)) {
        check_no_panic_and_consistent(&bytes, &sizes)?;
    }

    #[test]
    fn mutated_logs_never_panic(bytes in mutated(), sizes in prop::collection::vec(1usize..900, 1..8)) {
        check_no_panic_and_consistent(&bytes, &sizes)?;
    }
}

// ---------------------------------------------------------------------------
// Follower: model-based test against a real file.

/// One event with a unique job id (the cluster).
fn event_text(n: i64) -> String {
    format!(
        "005 ({n:05}.000.000) 2026-11-21 05:{:02}:{:02} Job terminated.\n\t(1) Normal termination (return value {})\n...\n",
        n / 60 % 60,
        n % 60,
        n % 7
    )
}

/// xorshift: deterministic by seed without another dependency.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The in-memory model: what the log holds and what must be delivered.
struct Model {
    next_id: i64,
    /// Ids of complete events written, in order, that the follower must deliver.
    expected: Vec<i64>,
    /// The unwritten rest of an event whose beginning is in the file.
    pending_tail: Option<(i64, String)>,
}

impl Model {
    fn write_events(&mut self, out: &mut Vec<u8>, k: u64) {
        if let Some((id, tail)) = self.pending_tail.take() {
            out.extend_from_slice(tail.as_bytes());
            self.expected.push(id);
        }
        for _ in 0..k {
            out.extend_from_slice(event_text(self.next_id).as_bytes());
            self.expected.push(self.next_id);
            self.next_id += 1;
        }
    }
    fn write_partial(&mut self, out: &mut Vec<u8>, rng: &mut Rng) {
        self.write_events(out, 0);
        let text = event_text(self.next_id);
        let cut = 1 + rng.below(text.len() as u64 - 1) as usize;
        out.extend_from_slice(&text.as_bytes()[..cut]);
        self.pending_tail = Some((self.next_id, text[cut..].to_string()));
        self.next_id += 1;
    }
}

fn append(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

async fn drive_until(follower: &mut Follower, got: &mut Vec<i64>, want: usize, seed: u64, step: usize) {
    while got.len() < want {
        let batch = tokio::time::timeout(Duration::from_secs(10), follower.next())
            .await
            .unwrap_or_else(|_| {
                panic!("seed {seed} step {step}: follower stalled at {} of {want}", got.len())
            })
            .unwrap();
        got.extend(batch.iter().map(|e| e.cluster));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_matches_a_model_of_appends_rotations_and_truncations() {
    for seed in 1..=6u64 {
        let tmp = util::tempdir();
        let path = tmp.path().join("job.log");
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed);
        let mut model = Model { next_id: 1, expected: Vec::new(), pending_tail: None };
        let mut follower = Follower::new(path.clone(), 0);
        let mut got: Vec<i64> = Vec::new();
        // The log does not exist yet: nothing, and no error.
        assert!(follower.poll().unwrap().is_empty(), "seed {seed}");
        let mut rotations = 0;
        for step in 0..30 {
            let mut bytes = Vec::new();
            match rng.below(10) {
                0..=3 => {
                    let k = rng.below(4);
                    model.write_events(&mut bytes, k);
                    append(&path, &bytes);
                }
                4..=6 => {
                    model.write_partial(&mut bytes, &mut rng);
                    append(&path, &bytes);
                }
                7 | 8 => {
                    // Rotation: the file moves away (or is deleted) and a new one starts.
                    model.pending_tail = None;
                    rotations += 1;
                    if path.exists() {
                        if rng.below(2) == 0 {
                            std::fs::rename(&path, tmp.path().join(format!("job.log.{rotations}"))).unwrap();
                        } else {
                            std::fs::remove_file(&path).unwrap();
                        }
                    }
                    let k = 1 + rng.below(3);
                    model.write_events(&mut bytes, k);
                    append(&path, &bytes);
                }
                _ => {
                    // Truncation in place (same inode), then new events.
                    model.pending_tail = None;
                    if path.exists() {
                        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(0).unwrap();
                    }
                    let k = 1 + rng.below(3);
                    model.write_events(&mut bytes, k);
                    append(&path, &bytes);
                }
            }
            drive_until(&mut follower, &mut got, model.expected.len(), seed, step).await;
            assert_eq!(got, model.expected, "seed {seed} step {step}");
        }
        // Nothing more than the model says.
        assert!(follower.poll().unwrap().is_empty(), "seed {seed}: extra events");
        // Resuming from the checkpoint delivers only what comes after it.
        let checkpoint = follower.offset();
        drop(follower);
        let mut resumed = Follower::new(path.clone(), checkpoint);
        assert!(resumed.poll().unwrap().is_empty(), "seed {seed}: resume re-delivered events");
        let mut bytes = Vec::new();
        let before = model.expected.len();
        model.write_events(&mut bytes, 2);
        append(&path, &bytes);
        let mut after = Vec::new();
        drive_until(&mut resumed, &mut after, model.expected.len() - before, seed, 99).await;
        assert_eq!(after, model.expected[before..], "seed {seed}: after resume");
    }
}

#[tokio::test]
async fn follower_next_is_cancel_safe() {
    let tmp = util::tempdir();
    let path = tmp.path().join("job.log");
    let mut follower = Follower::new(path.clone(), 0);
    // Dropping a pending next() (nothing written yet) must lose nothing.
    for _ in 0..5 {
        assert!(tokio::time::timeout(Duration::from_millis(5), follower.next()).await.is_err());
    }
    append(&path, event_text(1).as_bytes());
    append(&path, event_text(2).as_bytes());
    let mut got = Vec::new();
    drive_until(&mut follower, &mut got, 2, 0, 0).await;
    assert_eq!(got, [1, 2]);
}

#[test]
fn log_follow_prints_events_as_they_are_written_until_interrupted() {
    use std::io::BufRead;
    let tmp = util::tempdir();
    let path = tmp.path().join("job.log");
    let mut child = std::process::Command::new(util::cosched_bin())
        .args(["log", "follow", path.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    // The log does not exist yet; then it grows, a write cut mid-event first.
    let first = event_text(1);
    append(&path, &first.as_bytes()[..10]);
    append(&path, &first.as_bytes()[10..]);
    let line = rx.recv_timeout(Duration::from_secs(10)).expect("first event printed");
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!((v["type"].as_i64(), v["cluster"].as_i64()), (Some(5), Some(1)));
    append(&path, event_text(2).as_bytes());
    let line = rx.recv_timeout(Duration::from_secs(10)).expect("second event printed");
    assert_eq!(serde_json::from_str::<Value>(&line).unwrap()["cluster"], 2);
    // SAFETY: sending a signal to the child we spawned, by its pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "Ctrl-C ends follow normally");
    reader.join().unwrap();
}

/// Report #3: a torn XML event hid every event after it, and the message
/// named the text form's terminator.
#[test]
fn a_torn_xml_event_is_skipped_at_the_next_top_level_c() {
    let xml = crafted("xml.log");
    let second = xml.windows(4).skip(1).position(|w| w == b"\n<c>").unwrap() + 2;
    let mut torn = xml[..second + 200].to_vec();
    torn.push(b'\n');
    torn.extend_from_slice(&xml[second..]);
    let (events, diags) = parse_bytes(&torn);
    assert_eq!(events.iter().map(|e| e.code).collect::<Vec<_>>(), [0, 1, 5, 12, 27, 9]);
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert_eq!(diags[0].offset, second as u64);
    assert_eq!(diags[0].line, Some(line_of(&torn, second as u64)), "{diags:?}");
    assert!(diags[0].message.contains("`</c>`"), "{diags:?}");
    // Held back while it may still be written; the next event releases it.
    let mut parser = Parser::new();
    assert_eq!(parser.feed(&torn[..second + 201]).len(), 1);
    assert_eq!(parser.feed(&torn[second + 201..]).len(), 5);

    let (events, diags) = parse_bytes(&xml[..second + 200]);
    assert_eq!(events.len(), 1);
    assert!(diags[0].message.contains("without a closing `</c>`"), "{diags:?}");
}

/// Report #6: complete events before an unfinished last one were dropped at
/// the end of the input (kept mid-file).
#[test]
fn events_before_an_unfinished_last_one_are_read() {
    let log = "000 (019.000.000) 2026-11-21 04:59:06 Job submitted from host: <h>\n...\n\
               001 (019.000.000) 2026-11-21 04:59:10 Job executing on host: x\n\
               005 (019.000.000) 2026-11-21 04:59:20 Job terminated.\n\t(1) Normal termination (return value 0)\n";
    let (events, diags) = parse_bytes(log.as_bytes());
    assert_eq!(events.iter().map(|e| e.code).collect::<Vec<_>>(), [0, 1]);
    let offsets: Vec<u64> = diags.iter().map(|d| d.offset).collect();
    let at = |s: &str| log.find(s).unwrap() as u64;
    assert_eq!(offsets, [at("001 ("), at("005 (")], "{diags:?}");
    let lines: Vec<Option<u64>> = diags.iter().map(|d| d.line).collect();
    assert_eq!(lines, [Some(3), Some(4)], "{diags:?}");
    assert!(diags[1].message.starts_with("unfinished event"), "{diags:?}");
}

/// Report #2: legacy stamps carry no year; a log that crosses New Year
/// goes on in the next one.
#[test]
fn legacy_stamps_cross_new_year() {
    let log = "000 (047.000.000) 12/31 23:58:00 Job submitted from host: <h>\n...\n\
               001 (047.000.000) 12/31 23:59:00 Job executing on host: x\n...\n\
               005 (047.000.000) 01/01 00:01:00 Job terminated.\n\t(1) Normal termination (return value 0)\n...\n\
               006 (047.000.000) 12/31 23:59:30 Image size of job updated: 1\n...\n\
               009 (047.000.000) 01/02 00:00:00 Job was aborted.\n...\n";
    let (events, diags) = cosched::userlog::parse_bytes_with_year(log.as_bytes(), 2026);
    assert!(diags.is_empty(), "{diags:?}");
    let times: Vec<String> = events.iter().map(|e| e.time.iso()).collect();
    assert_eq!(
        times,
        [
            "2026-12-31T23:58:00",
            "2026-12-31T23:59:00",
            "2027-01-01T00:01:00",
            "2026-12-31T23:59:30",
            "2027-01-02T00:00:00"
        ]
    );
    // Fed a byte at a time, the year moves on the same way.
    let mut parser = Parser::with_legacy_year(2026);
    let mut fed = Vec::new();
    for b in log.as_bytes() {
        fed.extend(parser.feed(std::slice::from_ref(b)));
    }
    assert_eq!(fed.iter().map(|e| e.time.iso()).collect::<Vec<_>>(), times);
    // A follower of a run's log is dated from the run's start: a resumed
    // one, reading only the stamps after New Year, too.
    let start = cosched::userlog::Timestamp::from_parts(2026, 12, 31, 23, 50, 0).unwrap().naive_unix;
    let mut parser = Parser::with_legacy_dates(cosched::userlog::LegacyDates::after(start));
    let tail = &log[log.find("005 (").unwrap()..];
    let events = parser.feed(tail.as_bytes());
    assert_eq!(events[0].time.iso(), "2027-01-01T00:01:00");
}

/// Report #8: numbers out of range in a body are reported and read as 0;
/// with overflow checks (debug builds) the CPU time used to panic.
#[test]
fn numbers_out_of_range_in_bodies_are_reported_not_wrapped() {
    let log = "005 (019.000.000) 2026-11-21 04:59:20 Job terminated.\n\
               \t(1) Normal termination (return value 0)\n\
               \t\tUsr 9223372036854775807 23:59:59, Sys 0 00:00:00  -  Run Remote Usage\n\
               \t\tUsr 0 00:00:00, Sys 0 00:00:02  -  Run Local Usage\n...\n\
               012 (019.000.000) 2026-11-21 04:59:21 Job was held.\n\tboom\n\tCode 99999999999999999999 Subcode -1\n...\n";
    let (events, diags) = parse_bytes(log.as_bytes());
    let EventBody::Terminated { usage, .. } = &events[0].body else { panic!("{:?}", events[0]) };
    assert_eq!((usage.run_remote.user_secs, usage.run_local.sys_secs), (0, 2));
    assert!(matches!(events[1].body, EventBody::Held { code: 0, .. }), "{:?}", events[1]);
    assert_eq!(diags.len(), 2, "{diags:?}");
    assert!(diags[0].message.contains("out of range") && diags[1].message.contains("Code 9999"), "{diags:?}");

    let xml = "<c>\n<a n=\"MyType\"><s>JobTerminatedEvent</s></a>\n<a n=\"EventTypeNumber\"><i>5</i></a>\n\
               <a n=\"EventTime\"><s>2026-11-21T06:30:09</s></a>\n<a n=\"TerminatedNormally\"><b v=\"t\"/></a>\n\
               <a n=\"RunRemoteUsage\"><s>Usr 9223372036854775807 00:00:03, Sys 0 00:00:01</s></a>\n</c>\n";
    let (events, diags) = parse_bytes(xml.as_bytes());
    assert_eq!(events.len(), 1);
    assert!(diags.len() == 1 && diags[0].message.contains("RunRemoteUsage"), "{diags:?}");
}

/// Report #2: an event stamped before the one it follows gave negative
/// times that `log stats` averaged in, silently.
#[test]
fn log_stats_leaves_out_and_names_a_job_whose_times_go_backwards() {
    let tmp = util::tempdir();
    let path = tmp.path().join("dst.log");
    std::fs::write(
        &path,
        "000 (050.000.000) 2026-11-01 01:50:00 Job submitted from host: <h>\n...\n\
         001 (050.000.000) 2026-11-01 01:55:00 Job executing on host: x\n...\n\
         005 (050.000.000) 2026-11-01 01:10:00 Job terminated.\n\t(1) Normal termination (return value 0)\n...\n\
         000 (050.001.000) 2026-11-01 01:50:00 Job submitted from host: <h>\n...\n\
         001 (050.001.000) 2026-11-01 01:51:00 Job executing on host: x\n...\n\
         005 (050.001.000) 2026-11-01 01:53:00 Job terminated.\n\t(1) Normal termination (return value 0)\n...\n",
    )
    .unwrap();
    let out = util::cosched(tmp.path(), &["log", "stats", path.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["run_time_s"]["n"], 1);
    assert_eq!(stats["run_time_s"]["max"], 120.0);
    assert_eq!(stats["turnaround_s"]["max"], 180.0);
    assert_eq!(stats["left_out"][0]["job"], "50.0");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("dst.log: job 50.0: its terminate (005) is stamped 2700 s before its execute (001)"),
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------
// Diagnostics name the line.

/// Good events around one malformed block, which starts on the returned line
/// (counted from the text before it).
fn log_with_a_bad_block() -> (String, u64) {
    let mut log = String::new();
    for n in 1..=4 {
        log.push_str(&event_text(n));
    }
    let bad_line = 1 + log.matches('\n').count() as u64;
    log.push_str("this is not an event\nnor is this\n...\n");
    for n in 5..=7 {
        log.push_str(&event_text(n));
    }
    (log, bad_line)
}

#[test]
fn log_dump_names_the_line_of_a_malformed_block() {
    let tmp = util::tempdir();
    let (log, bad_line) = log_with_a_bad_block();
    assert!(bad_line > 4, "the block is not on an early line by accident");
    let path = tmp.path().join("bad.log");
    std::fs::write(&path, &log).unwrap();
    let out = util::cosched(tmp.path(), &["log", "dump", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "a malformed block: exit 1");
    assert_eq!(json_lines(&out.stdout).len(), 7, "the good events around it are dumped");
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!("{}:{bad_line}: not an event", path.display());
    assert!(err.starts_with(&want), "want {want:?}, got {err:?}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn a_follower_fed_in_pieces_names_the_line_and_starts_again_at_1_after_truncation() {
    let tmp = util::tempdir();
    let path = tmp.path().join("grow.log");
    let (log, bad_line) = log_with_a_bad_block();
    let mut follower = Follower::new(path.clone(), 0).polling_only();
    // Pieces cut anywhere (mid-line, mid-block), each followed by a poll.
    let mut got = 0;
    for piece in log.as_bytes().chunks(37) {
        append(&path, piece);
        got += follower.poll().unwrap().len();
    }
    assert_eq!(got, 7);
    let diags = follower.take_diagnostics();
    assert_eq!(diags.iter().map(|d| d.line).collect::<Vec<_>>(), [Some(bad_line)], "{diags:?}");

    // A follower resumed at a checkpoint counts the lines it skipped.
    let checkpoint = log.find("this is not").unwrap();
    let mut resumed = Follower::new(path.clone(), checkpoint as u64).polling_only();
    assert_eq!(resumed.poll().unwrap().len(), 3);
    let diags = resumed.take_diagnostics();
    assert_eq!(diags.iter().map(|d| d.line).collect::<Vec<_>>(), [Some(bad_line)], "{diags:?}");

    // Truncated and written again: lines count from the new start, and the
    // truncation itself is reported where reading had got to.
    let lines = log.matches('\n').count() as u64;
    std::fs::write(&path, "").unwrap();
    assert!(follower.poll().unwrap().is_empty());
    append(&path, b"garbage first\n...\n");
    append(&path, event_text(9).as_bytes());
    assert_eq!(follower.poll().unwrap().len(), 1);
    let diags = follower.take_diagnostics();
    assert_eq!(diags.iter().map(|d| d.line).collect::<Vec<_>>(), [Some(lines + 1), Some(1)], "{diags:?}");
    assert!(diags[0].message.contains("truncated"), "{diags:?}");
}

// ---------------------------------------------------------------------------
// Rotated more than once between two reads.

/// How a log's rotated files are named.
#[derive(Clone, Copy, Debug)]
enum Scheme {
    /// HTCondor with `EVENT_LOG_MAX_ROTATIONS = 1`: `LOG.old`, overwritten
    /// by the next rotation.
    Old,
    /// HTCondor with more rotations (3 here), and logrotate: `LOG.1` is the
    /// newest, the older ones move up a number and the last falls off.
    Shifting,
    /// Numbered in the order of rotation (`LOG.1` the oldest), as the model
    /// test above rotates.
    Counting,
}

/// Rotates `path` as `scheme` does; `count` numbers [`Scheme::Counting`]'s files.
fn rotate(path: &Path, scheme: Scheme, count: &mut u32) {
    let named = |suffix: &str| std::path::PathBuf::from(format!("{}.{suffix}", path.display()));
    *count += 1;
    match scheme {
        Scheme::Old => std::fs::rename(path, named("old")).unwrap(),
        Scheme::Shifting => {
            for i in (2..=3).rev() {
                let from = named(&(i - 1).to_string());
                if from.exists() {
                    std::fs::rename(from, named(&i.to_string())).unwrap();
                }
            }
            std::fs::rename(path, named("1")).unwrap();
        }
        Scheme::Counting => std::fs::rename(path, named(&count.to_string())).unwrap(),
    }
}

/// The events of clusters `ids`, as one piece of log.
fn events_of(ids: std::ops::Range<i64>) -> Vec<u8> {
    ids.flat_map(|n| event_text(n).into_bytes()).collect()
}

fn clusters(events: Vec<Event>) -> Vec<i64> {
    events.iter().map(|e| e.cluster).collect()
}

/// Regression: rotated twice between two polls, the follower read the rest
/// of the file it had open, then the new one at the path, and silently
/// never read the file in between (jobs whose ends were there never ended).
#[test]
fn a_log_rotated_twice_between_two_reads_loses_no_events() {
    for scheme in [Scheme::Old, Scheme::Shifting, Scheme::Counting] {
        let tmp = util::tempdir();
        let path = tmp.path().join("job.log");
        let mut count = 0;
        append(&path, &events_of(1..3));
        let mut follower = Follower::new(path.clone(), 0).polling_only();
        assert_eq!(clusters(follower.poll().unwrap()), [1, 2], "{scheme:?}");
        // One rotation: the file read to its end is not read again later.
        rotate(&path, scheme, &mut count);
        append(&path, &events_of(3..4));
        assert_eq!(clusters(follower.poll().unwrap()), [3], "{scheme:?}");
        // The open file gets one more event and rotates; so does the next
        // file, before any poll.
        append(&path, &events_of(4..5));
        rotate(&path, scheme, &mut count);
        append(&path, &events_of(5..7));
        rotate(&path, scheme, &mut count);
        append(&path, &events_of(7..8));
        assert_eq!(clusters(follower.poll().unwrap()), [4, 5, 6, 7], "{scheme:?}");
        assert_eq!(follower.offset(), std::fs::metadata(&path).unwrap().len(), "{scheme:?}");
        let diags = follower.take_diagnostics();
        match scheme {
            // `.old` was overwritten: one more rotation would have lost a
            // file without a trace, and the follower says so.
            Scheme::Old => {
                assert_eq!(diags.len(), 1, "{diags:?}");
                assert!(diags[0].message.contains("job.log.old"), "{diags:?}");
            }
            _ => assert!(diags.is_empty(), "{scheme:?}: {diags:?}"),
        }
        // What was read is not read again at the next rotation.
        rotate(&path, scheme, &mut count);
        append(&path, &events_of(8..9));
        assert_eq!(clusters(follower.poll().unwrap()), [8], "{scheme:?}");
        assert!(follower.take_diagnostics().is_empty(), "{scheme:?}");
    }
}

/// Where a file rotated away between two reads cannot be read, the follower
/// says which and what to do, and wakes its reader to say it even if no
/// event comes with it.
#[tokio::test]
async fn a_rotated_file_that_cannot_be_read_is_reported() {
    // logrotate's `compress`: the file in between is only there gzipped.
    let tmp = util::tempdir();
    let path = tmp.path().join("job.log");
    let mut count = 0;
    append(&path, &events_of(1..3));
    let mut follower = Follower::new(path.clone(), 0).polling_only();
    assert_eq!(clusters(follower.poll().unwrap()), [1, 2]);
    rotate(&path, Scheme::Shifting, &mut count);
    append(&path, &events_of(3..5));
    rotate(&path, Scheme::Shifting, &mut count);
    let rotated = tmp.path().join("job.log.1");
    let gz = tmp.path().join("job.log.1.gz");
    std::fs::write(&gz, b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03").unwrap();
    std::fs::remove_file(&rotated).unwrap();
    std::fs::write(&path, b"").unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), follower.next())
        .await
        .expect("a loss wakes the reader")
        .unwrap();
    assert!(got.is_empty(), "{got:?}");
    let diags = follower.take_diagnostics();
    assert_eq!(diags.len(), 1, "{diags:?}");
    let message = &diags[0].message;
    assert!(message.contains("job.log.1.gz") && message.contains("lost"), "{message}");
    assert!(message.contains("condor_history"), "says what to do: {message}");

    // HTCondor's `.old`, rotated three times: the file in between is gone.
    let tmp = util::tempdir();
    let path = tmp.path().join("job.log");
    append(&path, &events_of(1..3));
    let mut follower = Follower::new(path.clone(), 0).polling_only();
    assert_eq!(clusters(follower.poll().unwrap()), [1, 2]);
    append(&path, &events_of(3..4));
    rotate(&path, Scheme::Old, &mut count);
    append(&path, &events_of(4..5));
    rotate(&path, Scheme::Old, &mut count);
    append(&path, &events_of(5..6));
    rotate(&path, Scheme::Old, &mut count);
    append(&path, &events_of(6..7));
    assert_eq!(clusters(follower.poll().unwrap()), [3, 5, 6]);
    let diags = follower.take_diagnostics();
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert!(diags[0].message.contains("job.log.old") && diags[0].message.contains("lost"), "{diags:?}");
}
