//! The ONNX conformance runner: the backend test cases of the `onnx` package
//! (`scripts/copy_onnx_tests.py` copies them into `data/onnx/`), compiled by `build.rs` through
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

fn check<T: Elem>(got: &kiln::Tensor<'_, T>, st: &SafeTensors, key: &str) -> Result<(), String>
where
    T: kiln::Scalar,
{
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
    for (i, (&g, &w)) in got.as_slice().iter().zip(&want).enumerate() {
        let g = g.f();
        let same = (g - w).abs() <= 1e-4 + 1e-3 * w.abs() || (g.is_nan() && w.is_nan()) || g == w;
        if !same {
            return Err(format!("{key}[{i}]: {g}, expected {w}"));
        }
    }
    Ok(())
}

#[test]
fn conformance() {
    let mut failed_any = false;
    for suite in ["sequence", "pytorch-converted", "pytorch-operator"] {
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
        println!(
            "CONFORMANCE suite={suite} passed={passed} failed={failed} unsupported={unsupported}"
        );
        failed_any |= failed > 0;
    }
    assert!(!failed_any, "some conformance cases failed");
}
