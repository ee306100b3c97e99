//! conv2d for AVX-512F: the same strategy as AVX2 (see `avx2::conv`), with the 12 x 32
//! micro-kernel. Depthwise convolutions go to this ISA's
//! [`super::depthwise::depthwise_conv2d`]; every other one is a GEMM per (image, group),
//! pointwise ones on the input as it lies and the rest through the implicit im2col packer
//! (`avx2::im2col`), with bias and activation in the GEMM's epilogue. `scratch` is only
//! passed on to the depthwise kernel.

use super::gemm::{Avx512, NR};
use crate::arch::x86_64::avx2::im2col::conv2d_gemm;
use crate::par::{Parallel, Serial};
use crate::{Activation, Conv2d};

conv_entries!(Avx512, "avx512f,avx2,fma");

winograd_entry!("avx512f,avx2,fma", super::gemm::gemm);
