//! Scale/shift and softmax (placeholder: the portable kernels until this ISA's are written).
pub(crate) use crate::arch::portable::{scale_shift, scale_shift_inplace, softmax, softmax_inplace};
