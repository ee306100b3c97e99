//! Runs the whole compiler (not the macro) on the networks the integration tests use, read
//! from `tests/lib.rs`, and compares each printed memory plan with a checked-in snapshot in
//! `tests/snapshots/<net>.plan`. Set `KILN_BLESS=1` to rewrite the snapshots after a deliberate
//! change, then review the diff.

use std::path::{Path, PathBuf};

use kiln_dsl::syntax::NetworkDef;

fn networks() -> Vec<NetworkDef> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/lib.rs");
    let source = std::fs::read_to_string(&path).unwrap();
    let file = syn::parse_file(&source).unwrap();
    file.items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Macro(m) if m.mac.path.segments.last().is_some_and(|s| s.ident == "network") => {
                Some(syn::parse2::<NetworkDef>(m.mac.tokens.clone()).unwrap())
            }
            _ => None,
        })
        .collect()
}

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests")
}

#[test]
fn plans_match_snapshots() {
    let nets = networks();
    assert!(nets.len() >= 4, "expected the test networks in tests/lib.rs");
    let mut mismatches = Vec::new();
    for def in &nets {
        let compiled = kiln_dsl::compile(def, Some(tests_dir())).unwrap_or_else(|e| panic!("{}: {e}", def.name));
        let text = compiled.plan_text();
        let snap = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/snapshots/{}.plan", def.name));
        if std::env::var_os("KILN_BLESS").is_some() {
            std::fs::write(&snap, &text).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&snap).unwrap_or_default();
        if want != text {
            mismatches.push(format!("{}:\n--- want\n{want}\n+++ got\n{text}", snap.display()));
        }
    }
    assert!(mismatches.is_empty(), "plans changed (KILN_BLESS=1 to accept):\n{}", mismatches.join("\n"));
}

/// The plan the compiler accepted also passes the verifier when run here, and a plan with one
/// buffer moved onto another is rejected: the verifier is live on real networks.
#[test]
fn verifier_rejects_a_corrupted_real_plan() {
    for def in networks() {
        let c = kiln_dsl::compile(&def, Some(tests_dir())).unwrap();
        kiln_dsl::verify::verify(&c.problem, &c.plan).unwrap();
        let mut bad = c.plan.clone();
        let placed: Vec<usize> = bad
            .values
            .iter()
            .enumerate()
            .filter_map(|(i, p)| matches!(p, kiln_dsl::plan::ValuePlacement::Arena(_)).then_some(i))
            .collect();
        // Move every arena value to offset 0: at least two of them are live at once somewhere.
        for &i in &placed {
            if let kiln_dsl::plan::ValuePlacement::Arena(p) = &mut bad.values[i] {
                p.offset = 0;
            }
        }
        for s in &mut bad.scratch {
            s.offset = 0;
        }
        assert!(kiln_dsl::verify::verify(&c.problem, &bad).is_err(), "{}: corrupted plan accepted", def.name);
    }
}
