//! Pooling (placeholder: the portable kernels until this ISA's are written).
pub(crate) use crate::arch::portable::{avg_pool2d, global_avg_pool, max_pool2d};
