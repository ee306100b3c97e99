//! Elementwise kernels (placeholder: the portable ones until this ISA's are written).
pub(crate) use crate::arch::portable::{binary, binary_inplace, unary, unary_inplace};
