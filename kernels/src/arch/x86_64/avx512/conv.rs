//! conv2d (placeholder: the portable kernel until this ISA's is written).
pub(crate) use crate::arch::portable::conv2d;
