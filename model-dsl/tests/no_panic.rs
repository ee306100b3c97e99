//! The compiler must not panic on any input: a wrong model is a compile error with a span.
//!
//! Two tests check that. `mutated_networks_never_panic` is a deterministic mutation fuzzer: it
//! takes the token text of every `network!` in `tests/lib.rs` and `tests/tests/sequences.rs`, applies one to three random edits
//! (delete, duplicate, swap or insert tokens; replace numbers by 0, 1 or sizes that overflow;
//! replace identifiers, dtype-suffixed literals, floats and the weights path), and runs the
//! whole macro pipeline ([`kiln_dsl::expand`]) on every mutant that still parses, inside
//! `catch_unwind`. `edge_cases` feeds hand-written networks at the edges (sizes that overflow,
//! zero sizes, degenerate windows, odd signatures) and checks the error each one gets, so the
//! checks that catch them cannot silently disappear.
//!
//! The random generator is a hand-written xorshift with fixed seeds, so a failure reproduces
//! exactly; the failing mutant's source is printed. For a longer run with other mutants, set
//! `KILN_FUZZ_CASES` (mutants per network, default 2000) and `KILN_FUZZ_SEED`.

use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use kiln_dsl::syntax::NetworkDef;
use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

/// Mutants tried per network.
const CASES_PER_NETWORK: usize = 2000;

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests")
}

/// Each `network!` invocation in `tests/lib.rs` and `tests/tests/sequences.rs` (sequences,
/// views and in-place ops): its name and its tokens.
fn networks() -> Vec<(String, TokenStream)> {
    ["lib.rs", "tests/sequences.rs"]
        .iter()
        .flat_map(|f| networks_in(&tests_dir().join(f)))
        .collect()
}

fn networks_in(path: &Path) -> Vec<(String, TokenStream)> {
    let source = std::fs::read_to_string(path).unwrap();
    let file = syn::parse_file(&source).unwrap();
    file.items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Macro(m)
                if m.mac
                    .path
                    .segments
                    .last()
                    .is_some_and(|s| s.ident == "network") =>
            {
                let def = syn::parse2::<NetworkDef>(m.mac.tokens.clone()).unwrap();
                Some((def.name.to_string(), m.mac.tokens.clone()))
            }
            _ => None,
        })
        .collect()
}

/// Flattens a token stream into words that print back to the same tokens when joined by
/// spaces: delimiters become their own words, and a run of joint punctuation (`->`, `::`)
/// stays one word, because `- >` would no longer be an arrow.
fn words(ts: TokenStream, out: &mut Vec<String>) {
    let mut joint = String::new();
    for tt in ts {
        match tt {
            TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Brace => ("{", "}"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::None => ("", ""),
                };
                if !open.is_empty() {
                    out.push(open.to_string());
                }
                words(g.stream(), out);
                if !close.is_empty() {
                    out.push(close.to_string());
                }
            }
            TokenTree::Punct(p) => {
                joint.push(p.as_char());
                if p.spacing() == Spacing::Alone {
                    out.push(std::mem::take(&mut joint));
                }
            }
            TokenTree::Ident(i) => out.push(i.to_string()),
            TokenTree::Literal(l) => out.push(l.to_string()),
        }
    }
}

/// xorshift64: small, fast and the same on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Numbers at the edges: zero, one, and sizes whose products or sums overflow `usize` (or do
/// not even fit in it: the first one).
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "7",
    "99999999999999999999",
    "4294967296",
    "18446744073709551615",
    "9223372036854775807",
    "4611686018427387904",
    "65536",
    "3037000500",
];

/// Replacements for size literals like `3x3xf32` and `16xf32`.
const SIZE_LITERALS: &[&str] = &[
    "0x0xf32",
    "3x3",
    "3xf64",
    "3x3x3x3xf32",
    "0xf32",
    "1xf32",
    "3xf32",
    "1x1xf32",
    "5x1xf32",
    "1x0xf32",
    "3x3xbf16",
    "3x3xq8",
    "65536x65536xf32",
    "4294967296x4294967296xf32",
    "18446744073709551615xf32",
    "4294967296xf32",
    "3x",
    "3xx3",
];

const FLOATS: &[&str] = &["0.0", "1.0", "1e999", "1e-45", "0.5", "6.0"];

const STRINGS: &[&str] = &[
    "\"\"",
    "\".\"",
    "\"data\"",
    "\"data/lenet.safetensors\"",
    "\"data/mlp_io.safetensors\"",
    "\"data/mlp.onnx\"",
    "\"lib.rs\"",
    "\"/dev/null\"",
    "\"no/such/file.safetensors\"",
    "\"x.weight\"",
];

/// Identifiers that mean something to the DSL, besides the op names and those in the source.
const KEYWORDS: &[&str] = &[
    "same",
    "valid",
    "true",
    "false",
    "batch",
    "weights",
    "norm",
    "fm",
    "vec",
    "net",
    "let",
    "x",
    "h",
    "pub",
    "stride",
    "pad",
    "dilation",
    "groups",
    "bias",
    "eps",
    "alpha",
    "min",
    "max",
    "value",
    "count_include_pad",
];

/// Named arguments worth injecting right after an opening parenthesis.
const SNIPPETS: &[&str] = &[
    "pad = 18446744073709551615 ,",
    "pad = ( 0 , 4294967296 ) ,",
    "pad = ( 1 , 2 , 3 , 99999 ) ,",
    "pad = 100 ,",
    "pad = same ,",
    "stride = 0 ,",
    "stride = 18446744073709551615 ,",
    "dilation = 4294967296 ,",
    "dilation = 9223372036854775807 ,",
    "dilation = 0 ,",
    "groups = 0 ,",
    "groups = 3 ,",
    "eps = - 1.0 ,",
    "eps = 1e999 ,",
    "alpha = - 1e999 ,",
    "value = 1e999 ,",
    "min = 1.0 , max = 0.0 ,",
    "count_include_pad = true ,",
    "bias = false ,",
];

fn is_ident(w: &str) -> bool {
    w.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}
fn is_number(w: &str) -> bool {
    w.chars().next().is_some_and(|c| c.is_ascii_digit())
}
fn is_float(w: &str) -> bool {
    is_number(w) && !w.contains('x') && (w.contains('.') || w.contains('e'))
}

/// Applies one random edit to `w`; returns what it did.
fn mutate(rng: &mut Rng, w: &mut Vec<String>, idents: &[String], pool: &[String]) -> String {
    if w.is_empty() {
        return "nothing to mutate".into();
    }
    let i = rng.below(w.len());
    let of_kind = |rng: &mut Rng, w: &[String], f: fn(&str) -> bool| -> Option<usize> {
        let hits: Vec<usize> = (0..w.len()).filter(|&j| f(&w[j])).collect();
        (!hits.is_empty()).then(|| *rng.pick(&hits))
    };
    // Edits that keep the token structure (numbers, names, arguments) are weighted up: most
    // structural edits just stop the text from parsing.
    match rng.below(16) {
        0 => format!("delete `{}`", w.remove(i)),
        1 => {
            let t = w[i].clone();
            w.insert(i, t.clone());
            format!("duplicate `{t}`")
        }
        2 => {
            let j = rng.below(w.len());
            w.swap(i, j);
            format!("swap `{}` and `{}`", w[j], w[i])
        }
        3..=6 => {
            let Some(j) = of_kind(rng, w, |s| is_number(s) && !is_float(s)) else {
                return "no number".into();
            };
            let old = w[j].clone();
            w[j] = if old.contains('x') && rng.below(3) > 0 {
                // Keep the shape of the literal but put an extreme number in one place.
                let mut parts: Vec<String> = old.split('x').map(String::from).collect();
                let nums: Vec<usize> = (0..parts.len()).filter(|&k| is_number(&parts[k])).collect();
                let k = *rng.pick(&nums);
                parts[k] = rng.pick(NUMBERS).to_string();
                parts.join("x")
            } else if old.contains('x') {
                rng.pick(SIZE_LITERALS).to_string()
            } else {
                rng.pick(NUMBERS).to_string()
            };
            format!("number `{old}` -> `{}`", w[j])
        }
        7 => {
            let Some(j) = of_kind(rng, w, is_float) else {
                return "no float".into();
            };
            let old = std::mem::replace(&mut w[j], rng.pick(FLOATS).to_string());
            format!("float `{old}` -> `{}`", w[j])
        }
        8..=10 => {
            let Some(j) = of_kind(rng, w, is_ident) else {
                return "no identifier".into();
            };
            let new = match rng.below(3) {
                0 => rng.pick(idents).clone(),
                1 => rng.pick(kiln_dsl::front::dsl::OPS).to_string(),
                _ => rng.pick(KEYWORDS).to_string(),
            };
            let old = std::mem::replace(&mut w[j], new);
            format!("identifier `{old}` -> `{}`", w[j])
        }
        11 => {
            w.insert(i, "-".into());
            format!(
                "insert `-` before `{}`",
                w.get(i + 1).map_or("<end>", |s| s.as_str())
            )
        }
        12 => {
            let t = rng.pick(pool).clone();
            w.insert(i, t.clone());
            format!("insert `{t}`")
        }
        13 | 14 => {
            let Some(j) = of_kind(rng, w, |s| s == "(") else {
                return "no parenthesis".into();
            };
            let s = rng.pick(SNIPPETS);
            for (k, t) in s.split(' ').enumerate() {
                w.insert(j + 1 + k, t.to_string());
            }
            format!("insert `{s}`")
        }
        _ => {
            let Some(j) = of_kind(rng, w, |s| s.starts_with('"')) else {
                return "no string".into();
            };
            let old = std::mem::replace(&mut w[j], rng.pick(STRINGS).to_string());
            format!("string {old} -> {}", w[j])
        }
    }
}

/// Removes the `weights "...";` statement, so a mutant with changed shapes still gets past the
/// weights check to planning and code generation.
fn drop_weights(w: &mut Vec<String>) -> bool {
    let at = (0..w.len().saturating_sub(2))
        .find(|&i| w[i] == "weights" && w[i + 1].starts_with('"') && w[i + 2] == ";");
    match at {
        Some(i) => {
            w.drain(i..i + 3);
            true
        }
        None => false,
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// The text no longer tokenizes or no longer parses as a network (the message).
    Unparsed(String),
    /// A compile error (its message).
    Error(String),
    /// Compiled and generated code.
    Ok,
}

/// Parses `text` and runs the macro's pipeline, as `network!` would; `Err` is a panic's message.
fn run(text: &str) -> Result<Outcome, String> {
    catch_unwind(AssertUnwindSafe(|| {
        let tokens = match text.parse::<TokenStream>() {
            Ok(t) => t,
            Err(e) => return Outcome::Unparsed(e.to_string()),
        };
        let def = match syn::parse2::<NetworkDef>(tokens) {
            Ok(d) => d,
            Err(e) => return Outcome::Unparsed(e.to_string()),
        };
        // `compile` once to learn the outcome, then the macro driver, which also generates the
        // code (or the fallback type next to the errors).
        let outcome = match kiln_dsl::compile(&def, Some(tests_dir())) {
            Ok(_) => Outcome::Ok,
            Err(e) => Outcome::Error(
                e.into_iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
        };
        let expanded = kiln_dsl::expand(def, Some(tests_dir()));
        assert!(!expanded.is_empty(), "expand produced nothing");
        outcome
    }))
    .map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "<non-string panic>".into())
    })
}

#[test]
fn mutated_networks_never_panic() {
    let start = std::time::Instant::now();
    let nets = networks();
    assert!(
        nets.len() >= 4,
        "expected the test networks in tests/lib.rs"
    );
    let sources: Vec<Vec<String>> = nets
        .iter()
        .map(|(_, ts)| {
            let mut w = Vec::new();
            words(ts.clone(), &mut w);
            w
        })
        .collect();
    // The flattening must round-trip, or every mutant would be tested against a broken base.
    for ((name, _), w) in nets.iter().zip(&sources) {
        assert_eq!(
            run(&w.join(" ")),
            Ok(Outcome::Ok),
            "{name}: the unmutated network does not compile"
        );
    }
    let pool: Vec<String> = sources.iter().flatten().cloned().collect();
    let mut idents: Vec<String> = pool.iter().filter(|w| is_ident(w)).cloned().collect();
    idents.sort();
    idents.dedup();

    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let per_network = env("KILN_FUZZ_CASES").map_or(CASES_PER_NETWORK, |n| n as usize);
    let seed = env("KILN_FUZZ_SEED").unwrap_or(0x9E37_79B9_7F4A_7C15);
    let mut seen = HashSet::new();
    let (mut cases, mut unparsed, mut errors, mut ok) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    for (n, ((name, _), base)) in nets.iter().zip(&sources).enumerate() {
        // Never 0: xorshift would stay at 0 forever.
        let mut rng = Rng((seed ^ (n as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D)).max(1));
        for case in 0..per_network {
            let mut w = base.clone();
            let mut log = Vec::new();
            if rng.below(2) == 0 && drop_weights(&mut w) {
                log.push("drop the weights statement".to_string());
            }
            for _ in 0..1 + rng.below(3) {
                log.push(mutate(&mut rng, &mut w, &idents, &pool));
            }
            let text = w.join(" ");
            if !seen.insert(text.clone()) {
                continue;
            }
            cases += 1;
            match run(&text) {
                Ok(Outcome::Unparsed(_)) => unparsed += 1,
                Ok(Outcome::Error(_)) => errors += 1,
                Ok(Outcome::Ok) => ok += 1,
                Err(msg) => failures.push(format!(
                    "{name} case {case} ({}): panicked: {msg}\n    {text}",
                    log.join("; ")
                )),
            }
        }
    }
    eprintln!(
        "{cases} distinct mutants: {unparsed} did not parse, {errors} compile errors, {ok} compiled; {:.1?}",
        start.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} mutants panicked:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The mutator must keep reaching the compiler, and past it, or this test proves nothing.
    assert!(
        cases > per_network * nets.len() * 3 / 4,
        "only {cases} distinct mutants"
    );
    assert!(
        errors + ok > cases / 5,
        "only {} of {cases} mutants parsed",
        errors + ok
    );
    assert!(ok > 100, "only {ok} of {cases} mutants compiled");
}

/// Compiles a hand-written network, failing the test on a panic.
fn outcome(src: &str) -> Outcome {
    run(src).unwrap_or_else(|msg| panic!("panicked: {msg}\n    {src}"))
}

/// Expects a compile error (or, for syntax, a parse error) whose message contains `needle`.
#[track_caller]
fn expect_error(src: &str, needle: &str) {
    match outcome(src) {
        Outcome::Error(msg) | Outcome::Unparsed(msg) => assert!(
            msg.contains(needle),
            "expected an error containing {needle:?}, got {msg:?}\n    {src}"
        ),
        o => panic!("expected an error containing {needle:?}, got {o:?}\n    {src}"),
    }
}

#[track_caller]
fn expect_ok(src: &str) {
    assert_eq!(outcome(src), Outcome::Ok, "{src}");
}

#[test]
fn edge_cases() {
    // Sizes at the limits of the host's `usize` (the compiler may run on a 32-bit host, e.g. in a
    // build script on a board). `p2(e)` is 2^e; exponents written `w * n / 64` scale the 64-bit
    // numbers (in the comments) to the host's width `w`.
    let w = usize::BITS;
    let p2 = |e: u32| 1usize << e;
    let max = usize::MAX;
    let imax = isize::MAX;
    // Sizes whose element count overflows `usize`, or whose bytes do.
    let h = p2(w / 2); // 2^32
    expect_error(
        &format!("net N(x: fm<1xf32[{h},{h}]>) -> fm<1xf32[{h},{h}]> {{ relu(x) }}"),
        "too large",
    );
    let q = p2(w - 2); // 2^62
    expect_error(
        &format!("net N(x: vec<{q}xf32>) -> vec<{q}xf32> {{ relu(x) }}"),
        "too large",
    );
    expect_error(
        &format!("net N(x: vec<{max}xf32, batch = 2>) -> vec<1xf32> {{ x }}"),
        "too large",
    );
    // Each tensor fits, but together they would not: a quarter of the limit each.
    let (a, b) = (p2(w / 4), p2(w / 2 - 7)); // 2^16, 2^25: 2^57 f32s
    let big = format!("fm<1xf32[{a},{a}], batch = {b}>");
    expect_error(
        &format!("net N(x: {big}) -> {big} {{ let a = relu(x); let b = relu(a); let c = relu(b); let d = relu(c); relu(d) }}"),
        "too large",
    );
    // Just under the limit: a quarter of it per tensor (2^59 bytes on 64 bits), three tensors
    // plus a little scratch and weights. It compiles, so the planner and code generator see
    // sizes near the limit; one more tensor would not fit.
    let (c, b) = (p2(w / 4 - 1), p2(w / 2 - 6)); // 2^15, 2^26: 2^57 f32s
    let huge = format!("fm<2xf32[{c},{c}], batch = {b}>");
    let conv = "conv2d(x, w: weights<2 -> 3x3xf32 -> 2>, pad = 1)";
    expect_ok(&format!(
        "net N(x: {huge}) -> {huge} {{ let a = {conv}; relu(a) }}"
    ));
    expect_error(
        &format!("net N(x: {huge}) -> {huge} {{ let a = {conv}; let b = relu(a); relu(b) }}"),
        "too large",
    );
    // Outputs of ops that overflow: padding, windows, concatenation, parameters, scratch.
    let fm4 = "net N(x: fm<1xf32[4,4]>) -> fm<1xf32[4,4]>";
    expect_error(&format!("{fm4} {{ pad(x, {max}) }}"), "too large");
    expect_error(&format!("{fm4} {{ pad(x, (0, {imax})) }}"), "too large");
    let conv =
        |args: String| format!("{fm4} {{ conv2d(x, w: weights<1 -> 3x3xf32 -> 1>, {args}) }}");
    expect_error(&conv(format!("pad = {max}")), "too large");
    expect_error(&conv(format!("dilation = {max}")), "too large");
    expect_error(&conv(format!("dilation = {imax}, pad = same")), "too large");
    expect_error(
        &format!("{fm4} {{ max_pool(x, {max}x2, pad = 1) }}"),
        "shrinks to zero",
    );
    expect_error(
        &format!("{fm4} {{ max_pool(x, 2x2, pad = ({max}, 0)) }}"),
        "must be smaller than the window",
    );
    expect_error(
        &format!("{fm4} {{ max_pool(x, {max}x2, pad = ({}, 0)) }}", max - 5),
        "too large",
    );
    let n = p2(w - 7); // 2^57
    expect_error(
        &format!("net N(x: fm<{n}xf32[1,1]>) -> fm<1xf32[1,1]> {{ concat(x, x, x, x) }}"),
        "too large",
    );
    expect_error(
        &format!("net N(x: vec<{h}xf32>) -> vec<{h}xf32> {{ dense(x, fc: weights<{h} -> {h}>) }}"),
        "too large",
    );
    let (c, pad) = (p2(w / 4), p2(w / 4 - 1)); // 2^16, 2^15
    expect_error(
        &format!("net N(x: fm<{c}xf32[1,1]>) -> fm<{c}xf32[1,1]> {{ conv2d(x, w: weights<{c} -> {c}x{c}xf32 -> {c}>, pad = {pad}) }}"),
        "too large",
    );
    // The input and output fit, the im2col scratch of the kernel does not.
    let (s, k) = (p2(w * 22 / 64), p2(w * 10 / 64)); // 2^22, 2^10
    let o = s - k + 1;
    expect_error(
        &format!("net N(x: fm<1xf32[{s},{s}]>) -> fm<2xf32[{o},{o}]> {{ conv2d(x, w: weights<1 -> {k}x{k}xf32 -> 2>, bias = false) }}"),
        "too large",
    );
    // Zero sizes.
    expect_error(
        "net N(x: vec<3xf32, batch = 0>) -> vec<3xf32, batch = 0> { relu(x) }",
        "at least 1",
    );
    // `0xf32` would be the hexadecimal number 3890: zero channels are spelt `00xf32`.
    expect_error(
        "net N(x: vec<00xf32>) -> vec<00xf32> { relu(x) }",
        "at least 1",
    );
    expect_error(
        "net N(x: vec<0xf32>) -> vec<3xf32> { relu(x) }",
        "expected channels and dtype",
    );
    expect_error(
        "net N(x: fm<1xf32[0,4]>) -> fm<1xf32[0,4]> { relu(x) }",
        "at least 1",
    );
    expect_error(
        "net N(x: fm<4xf32[4,4]>) -> fm<1xf32[2,2]> { conv2d(x, w: weights<4 -> 3x3xf32 -> 0>) }",
        "at least 1",
    );
    // Degenerate windows.
    let conv = |args: &str| {
        format!("net N(x: fm<4xf32[8,8]>) -> fm<4xf32[8,8]> {{ conv2d(x, w: weights<4 -> 3x3xf32 -> 4>{args}) }}")
    };
    expect_error(&conv(", stride = 0"), "at least 1");
    expect_error(&conv(", dilation = 0"), "at least 1");
    expect_error(&conv(", groups = 0"), "groups = 0");
    expect_error(&conv(", groups = 3"), "groups = 3");
    expect_error(&conv(", pad = (0, 0, 0)"), "expected padding");
    expect_ok(&conv(", pad = same, groups = 4"));
    expect_ok(&conv(", pad = 1, groups = 2"));
    // Padding larger than the input is allowed (the output grows); a kernel larger than the
    // padded input is not.
    expect_ok("net N(x: fm<1xf32[2,2]>) -> fm<1xf32[10,10]> { conv2d(x, w: weights<1 -> 3x3xf32 -> 1>, pad = 5) }");
    expect_error(
        "net N(x: fm<1xf32[2,2]>) -> fm<1xf32[1,1]> { conv2d(x, w: weights<1 -> 3x3xf32 -> 1>) }",
        "shrinks to zero",
    );
    expect_error(
        "net N(x: fm<1xf32[2,2]>) -> fm<1xf32[1,1]> { max_pool(x, 3x3) }",
        "shrinks to zero",
    );
    expect_error(
        "net N(x: fm<1xf32[2,2]>) -> fm<1xf32[1,1]> { avg_pool(x, 2x2, stride = 0) }",
        "at least 1",
    );
    expect_error(
        "net N(x: fm<2xf32[3,3]>) -> fm<2xf32[3,3]> { batch_norm(x, bn: norm<2xf32>, eps = -1.0) }",
        "must be positive",
    );
    // Odd values that are not errors.
    expect_ok("net N(x: vec<3xf32>) -> vec<3xf32> { leaky_relu(x, alpha = 1e999) }");
    expect_ok("net N(x: vec<3xf32>) -> vec<3xf32> { clip(x, min = -1e999, max = 1e999) }");
    // A network whose output is its input, two outputs, the same value twice.
    expect_ok("net N(x: vec<3xf32>) -> vec<3xf32> { x }");
    expect_ok("net N(x: fm<2xf32[3,3]>) -> vec<18xf32> { flatten(x) }");
    expect_ok("net N(x: vec<3xf32>) -> (vec<3xf32>, vec<3xf32>) { (relu(x), x) }");
    expect_ok("net N(x: vec<3xf32>) -> (vec<3xf32>, vec<3xf32>) { let h = relu(x); (h, h) }");
    expect_ok("net N(x: vec<3xf32>) -> (vec<3xf32>, vec<3xf32>) { (x, x) }");
    expect_ok("net N(x: vec<3xf32>) -> () { () }");
    expect_error(
        "net N(x: vec<3xf32>) -> (vec<3xf32>, vec<3xf32>) { relu(x) }",
        "declares 2 outputs",
    );
    // Duplicate names.
    expect_error(
        "net N(x: vec<3xf32>, x: vec<3xf32>) -> vec<3xf32> { add(x, x) }",
        "declared twice",
    );
    expect_error(
        "net N(x: vec<3xf32>) -> vec<3xf32> { let h = dense(x, fc: weights<3 -> 3>); dense(h, fc: weights<3 -> 3>) }",
        "declared twice",
    );
    // Weights paths that are not files of weights.
    let w = |path: &str| {
        format!("net N(x: vec<20xf32>) -> vec<32xf32> {{ weights {path}; dense(x, fc1: weights<20 -> 32>) }}")
    };
    expect_error(&w("\"data\""), "cannot read weights file");
    expect_error(&w("\".\""), "cannot read weights file");
    expect_error(&w("\"\""), "cannot read weights file");
    expect_error(&w("\"no/such.safetensors\""), "file not found");
    expect_error(&w("\"lib.rs\""), "not a valid safetensors file");
    // A device is refused before it is read (`/dev/zero` would be read until memory runs out).
    if cfg!(unix) {
        expect_error(&w("\"/dev/zero\""), "is not a regular file");
    }
    expect_error(
        &w("\"data/mlp_io.safetensors\""),
        "has no tensors for `fc1`",
    );
    expect_error(&w("\"data/lenet.safetensors\""), "has shape");
    expect_ok(&w("\"data/mlp.safetensors\""));
    // Deep nesting is an error, not a stack overflow (which would abort, not panic). Run where
    // the stack is small, so that a missing limit fails here rather than only in rustc.
    let deep = |body: String| {
        let src = format!("net N(x: vec<3xf32>) -> vec<3xf32> {{ {body} }}");
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || outcome(&src))
            .unwrap()
            .join()
            .unwrap()
    };
    let n = kiln_dsl::syntax::MAX_DEPTH;
    assert_eq!(deep(format!("x{}", ".relu()".repeat(n - 1))), Outcome::Ok);
    assert_eq!(
        deep(format!(
            "{}x{}",
            "relu(".repeat(n / 2 - 1),
            ")".repeat(n / 2 - 1)
        )),
        Outcome::Ok
    );
    // Nested brackets stay at a few thousand: syn's own token buffer recurses on them before
    // kiln's parser runs (it overflows a 1 MiB stack at about 20 000).
    for body in [
        format!("x{}", ".relu()".repeat(20_000)),
        format!("leaky_relu(x, alpha = {}1.0)", "- ".repeat(20_000)),
        format!("{}x{}", "relu(".repeat(3_000), ")".repeat(3_000)),
        format!("{}x{}", "relu(x, ".repeat(3_000), ")".repeat(3_000)),
        format!(
            "max_pool(x, 2, pad = {}1{})",
            "(1, ".repeat(3_000),
            ")".repeat(3_000)
        ),
    ] {
        match deep(body) {
            Outcome::Unparsed(msg) => assert!(msg.contains("nests too deeply"), "{msg}"),
            o => panic!("expected a nesting error, got {o:?}"),
        }
    }
}

/// 1-D and 3-D windows: `same` padding, the padding forms of each rank, and a pooling window
/// given as one number (its rank found by inference), checked through the declared output type.
#[test]
fn nd_windows() {
    let net = |x: &str, y: &str, body: &str| {
        format!("net N(x: tensor<f32[{x}]>) -> tensor<f32[{y}]> {{ {body} }}")
    };
    let c1 = |args: &str| format!("conv(x, w: weights<2 -> 3xf32 -> 3>{args})");
    let c3 = |args: &str| format!("conv(x, w: weights<1 -> 3x3x3xf32 -> 1>{args})");
    // ONNX SAME_UPPER in every rank: the output is ceil(in / stride).
    expect_ok(&net("1,2,7", "1,3,4", &c1(", stride = 2, pad = same")));
    expect_ok(&net("1,2,7", "1,3,7", &c1(", dilation = 2, pad = same")));
    expect_ok(&net(
        "1,1,5,6,7",
        "1,1,5,3,4",
        &c3(", stride = (1, 2, 2), pad = same"),
    ));
    // 1-D `(begin, end)`; 3-D `(d, h, w)` and ONNX's six values.
    expect_ok(&net("1,2,7", "1,3,6", &c1(", pad = (1, 0)")));
    expect_ok(&net("1,1,4,4,4", "1,1,4,2,6", &c3(", pad = (1, 0, 2)")));
    expect_ok(&net(
        "1,1,4,4,4",
        "1,1,4,2,2",
        &c3(", pad = (1, 0, 0, 1, 0, 0)"),
    ));
    expect_error(
        &net("1,2,7", "1,3,7", &c1(", pad = (1, 1, 1)")),
        "(begin, end)",
    );
    expect_error(
        &net("1,1,4,4,4", "1,1,4,4,4", &c3(", pad = (1, 1)")),
        "(d, h, w)",
    );
    expect_error(
        &net("1,1,4,4,4", "1,1,2,2,2", &c3(", stride = (1, 2)")),
        "or three",
    );
    // The kernel's rank against the input's.
    expect_error(&net("1,2,7,7", "1,3,5,5", &c1("")), "1-D kernel");
    expect_error(
        &net("1,1,4,4,4,4", "1,1,2,2,2,2", &c3("")),
        "spatial dimensions",
    );
    // Pools: one number for every dimension, written padding resolved by inference.
    expect_ok(&net(
        "1,3,5",
        "1,3,5",
        "max_pool(x, 2, stride = 1, pad = (1, 0))",
    ));
    expect_ok(&net(
        "1,1,4,4,4",
        "1,1,4,4,4",
        "max_pool(x, 3, stride = 1, pad = 1)",
    ));
    expect_ok(&net(
        "1,1,4,4,4",
        "1,1,4,2,4",
        "avg_pool(x, 3, stride = 1, pad = (1, 0, 1))",
    ));
    expect_ok(&net("1,1,4,4,4", "1,1,2,2,2", "max_pool(x, 2x2x2)"));
    expect_error(
        &net("1,3,5", "1,3,5", "max_pool(x, 2, pad = (1, 1, 1))"),
        "does not fit",
    );
    expect_error(
        &net("1,3,6", "1,3,3", "max_pool(x, 2, stride = (1, 2))"),
        "has 2 sizes",
    );
    expect_error(
        &net(
            "1,1,4,4,4",
            "1,1,4,4,4",
            "max_pool(x, 2, stride = 1, pad = 2)",
        ),
        "smaller than the window",
    );
    // Channel-wise ops on any spatial rank.
    expect_ok(&net("1,3,5", "1,3,1", "global_avg_pool(x)"));
    expect_ok(&net("1,3,2,2,2", "1,3,1,1,1", "global_avg_pool(x)"));
    expect_ok(&net("1,3,5", "1,3,5", "batch_norm(x, bn: norm<3xf32>)"));
}
