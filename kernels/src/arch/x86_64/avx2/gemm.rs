//! GEMM and dense (placeholder: the portable kernels until this ISA's are written).
pub(crate) use crate::arch::portable::{dense, gemm};
