//! Replays the committed fuzz corpus (`host/fuzz/corpus/*/`) through the
//! bodies of both fuzz targets (`rpcrdma_proto::targets`), so every
//! `cargo test` re-checks what the fuzzer once found interesting, on the
//! stable toolchain and without libFuzzer. Any panic fails the test and
//! names the file.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use rpcrdma_proto::proto::golden::VECTORS;
use rpcrdma_proto::targets::decode_header::decode_header_target;
use rpcrdma_proto::targets::server_receive::{server_receive_target, Outcome};

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs `f` on every file of both corpora; returns the failures.
fn replay(mut f: impl FnMut(&[u8])) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    let mut n = 0;
    for target in ["decode_header", "server_receive"] {
        for path in corpus(target) {
            let data = std::fs::read(&path).expect("read corpus file");
            n += 1;
            if catch_unwind(AssertUnwindSafe(|| f(&data))).is_err() {
                failures.push(path.display().to_string());
            }
        }
    }
    (n, failures)
}

#[test]
fn corpora_are_present_and_small() {
    let mut total = 0u64;
    for target in ["decode_header", "server_receive"] {
        let files = corpus(target);
        assert!(files.len() >= 24, "{target}: only {} files", files.len());
        for f in &files {
            total += std::fs::metadata(f).expect("metadata").len();
        }
    }
    // Minimised to edge coverage (scripts/bench-core, FUZZ_UPDATE_CORPUS=1)
    // it is a few tens of KiB; this keeps it from growing unnoticed.
    assert!(total < 128 * 1024, "corpus is {total} bytes");
}

#[test]
fn corpus_through_decode_header() {
    let (n, failures) = replay(decode_header_target);
    assert!(n > 0);
    assert!(
        failures.is_empty(),
        "decode_header panicked on {failures:#?}"
    );
}

#[test]
fn corpus_through_server_receive() {
    let mut seen: BTreeMap<Outcome, usize> = BTreeMap::new();
    let (n, failures) = replay(|d| {
        for o in server_receive_target(d) {
            *seen.entry(o).or_default() += 1;
        }
    });
    assert!(n > 0);
    assert!(
        failures.is_empty(),
        "server_receive panicked on {failures:#?}"
    );
    // The committed server corpus must keep reaching every decision.
    eprintln!("server_receive outcomes over the corpus: {seen:?}");
    for o in [
        Outcome::Dropped,
        Outcome::ErrVers,
        Outcome::DecodeErrChunk,
        Outcome::Backchannel,
        Outcome::CallErrChunk,
        Outcome::CallDropped,
        Outcome::ReplyErrChunk,
        Outcome::ReplyFailed,
        Outcome::ReplyChunk,
        Outcome::ReplyInline,
    ] {
        assert!(seen.contains_key(&o), "no corpus input reaches {o:?}");
    }
}

#[test]
fn golden_vectors_through_both_targets() {
    for v in VECTORS {
        decode_header_target(v.bytes);
        server_receive_target(v.bytes);
    }
}
