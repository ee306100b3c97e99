//! Depthwise conv2d (placeholder: the portable kernel until this ISA's is written). `conv.rs`
//! calls `depthwise_conv2d` for convolutions with one input and one output channel per group.
pub(crate) use crate::arch::portable::conv2d as depthwise_conv2d;
