//! The ONNX conformance runner: the backend test cases of the `onnx` package
//! (`scripts/copy_onnx_tests.py` copies them into `data/onnx/`), compiled by the build script `build/conformance.rs` through
//! `kiln_dsl::Builder` and run here against the outputs onnxruntime's reference stored with
//! them. Prints exactly one line per suite,
//! `CONFORMANCE suite=<name> passed=<n> failed=<n> unsupported=<n>`, and each unsupported case
//! with the compiler's reason. `failed` must be 0: a case passes or is unsupported.

#![allow(clippy::approx_constant, clippy::excessive_precision)]

use safetensors::SafeTensors;

#[derive(Clone, Copy)]
enum Outcome {
    Run(fn() -> Result<(), String>),
    Unsupported(&'static str),
}

struct Case {
    suite: &'static str,
    name: &'static str,
    outcome: Outcome,
}

include!(concat!(env!("OUT_DIR"), "/conformance_cases.rs"));

/// Elements the stored data and kiln's outputs share.
trait Elem: Copy {
    fn from_le(b: &[u8]) -> Self;
    fn f(self) -> f64;
}
macro_rules! elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            fn from_le(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().expect("chunks of the element size"))
            }
            fn f(self) -> f64 {
                self as f64
            }
        }
    )*};
}
elem!(f32, f64, i64, i32, u8);

fn read<T: Elem>(st: &SafeTensors, key: &str) -> Result<Vec<T>, String> {
    let t = st.tensor(key).map_err(|e| e.to_string())?;
    Ok(t.data()
        .chunks_exact(std::mem::size_of::<T>())
        .map(T::from_le)
        .collect())
}

fn check<T: Elem + kiln::Scalar>(
    got: &kiln::Tensor<'_, T>,
    st: &SafeTensors,
    key: &str,
) -> Result<(), String> {
    check_tol(got, st, key, 0.0)
}

/// As `check`, with an absolute tolerance of `rel_to_max` times the largest reference value
/// on top of the relative one (logits of deep networks, summed in another order).
fn check_tol<T: Elem + kiln::Scalar>(
    got: &kiln::Tensor<'_, T>,
    st: &SafeTensors,
    key: &str,
    rel_to_max: f64,
) -> Result<(), String> {
    let t = st.tensor(key).map_err(|e| e.to_string())?;
    if got.shape() != t.shape() {
        return Err(format!(
            "{key}: shape {:?}, expected {:?}",
            got.shape(),
            t.shape()
        ));
    }
    let want: Vec<f64> = match t.dtype() {
        safetensors::Dtype::F32 => read::<f32>(st, key)?.into_iter().map(Elem::f).collect(),
        safetensors::Dtype::F64 => read::<f64>(st, key)?.into_iter().map(Elem::f).collect(),
        safetensors::Dtype::I64 => read::<i64>(st, key)?.into_iter().map(Elem::f).collect(),
        safetensors::Dtype::I32 => read::<i32>(st, key)?.into_iter().map(Elem::f).collect(),
        safetensors::Dtype::U8 | safetensors::Dtype::BOOL => {
            read::<u8>(st, key)?.into_iter().map(Elem::f).collect()
        }
        d => return Err(format!("{key}: dtype {d:?}")),
    };
    let max = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    let atol = 1e-4 + rel_to_max * max;
    for (i, (&g, &w)) in got.as_slice().iter().zip(&want).enumerate() {
        let g = g.f();
        let same = (g - w).abs() <= atol + 1e-3 * w.abs() || (g.is_nan() && w.is_nan()) || g == w;
        if !same {
            return Err(format!("{key}[{i}]: {g}, expected {w}"));
        }
    }
    Ok(())
}

/// The seeded generator of `scripts/gen_light_zoo.py`, written identically: `n` values in
/// [-1, 1) from SplitMix64 on a counter, seeded with the FNV-1a hash of `key`.
fn uniform(key: &str, n: usize) -> Vec<f32> {
    let seed = key.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
    });
    (1..=n as u64)
        .map(|i| {
            let mut z = seed.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 40) as f32 * (1.0 / (1u32 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The script's `gen`: rank >= 2 (leading size-1 axes dropped) scaled by sqrt(3 / fan_in),
/// rank 1 as 1 + 0.1 u.
fn gen(key: &str, shape: &[usize]) -> Vec<f32> {
    let u = uniform(key, shape.iter().product());
    // Leading size-1 axes dropped: `[1, 1, 1000, 1024]` is a `[1000, 1024]` matrix reshaped.
    let core = &shape[shape.iter().take_while(|&&d| d == 1).count()..];
    if core.len() >= 2 {
        let fan_in: usize = core[1..].iter().product();
        let scale = (3.0f64 / fan_in as f64).sqrt() as f32;
        u.into_iter().map(|v| v * scale).collect()
    } else {
        u.into_iter().map(|v| 1.0 + 0.1f32 * v).collect()
    }
}

/// A weights file with the same tensors as `bytes`, each filled by `gen`.
fn random_weights(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let st = SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
    let data: Vec<(String, Vec<usize>, Vec<u8>)> = st
        .tensors()
        .into_iter()
        .map(|(name, t)| {
            let v = gen(&name, t.shape());
            let b = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            (name, t.shape().to_vec(), b)
        })
        .collect();
    let views = data
        .iter()
        .map(|(n, s, b)| {
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), b)
                .map(|v| (n.clone(), v))
                .map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    safetensors::serialize(views, None).map_err(|e| e.to_string())
}

#[test]
fn conformance() {
    let mut failed_any = false;
    for suite in [
        "sequence",
        "pytorch-converted",
        "pytorch-operator",
        "light-zoo",
    ] {
        let (mut passed, mut failed, mut unsupported) = (0, 0, 0);
        for case in CASES.iter().filter(|c| c.suite == suite) {
            match case.outcome {
                Outcome::Run(run) => match run() {
                    Ok(()) => passed += 1,
                    Err(e) => {
                        failed += 1;
                        println!("  FAILED {suite}/{}: {e}", case.name);
                    }
                },
                Outcome::Unsupported(why) => {
                    unsupported += 1;
                    println!("  unsupported {suite}/{}: {why}", case.name);
                }
            }
        }
        // Models left out of this run are said on the suite's line.
        let gated = if suite == "light-zoo" && !GATED.is_empty() {
            format!(
                " (not run: {}; set KILN_CONFORMANCE_FULL=1)",
                GATED.join(", ")
            )
        } else {
            String::new()
        };
        println!(
            "CONFORMANCE suite={suite} passed={passed} failed={failed} unsupported={unsupported}{gated}"
        );
        failed_any |= failed > 0;
    }
    assert!(!failed_any, "some conformance cases failed");
}
