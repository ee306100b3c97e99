//! The reduction loop of the full-width GEMM tiles (`R x 32` for AVX-512, `R x 16` for AVX2)
//! in inline assembly; `kern` keeps the epilogue (C, bias, activation) and every other tile.
//!
//! Why assembly. Written with intrinsics (`kern::tile_w`), LLVM kept the accumulators in
//! registers inside a 16-step group but spilled 11-15 of the 24 AVX-512 ones to the stack and
//! reloaded them around every group (where the next sliver's prefetches are), did not unroll
//! the steps, and recomputed the row addresses of `A` every step: GEMM 1024^3 ran at 0.80 of
//! the FMA peak, under the `gemm` crate. Here the register allocation is fixed, as BLIS (its
//! `zen4` kernels) and MLAS (`SgemmKernelAvx512F.S`) write theirs:
//!
//! ```text
//! zero acc[R][2]                            // zmm0..zmm(2R-1) (ymm for AVX2)
//! for each group of 16 steps:               // k unrolled 16 times: constant displacements
//!     prefetch one line of each row of the next sliver (if asked)
//!     for s in 0..16:
//!         b0, b1 = B[p + s, 0..2N]          // two aligned loads, displacement only
//!         for i in 0..R:
//!             a = broadcast A[i, p + s]     // one of four row bases + lda * {0, 1, 2};
//!                                           //   inside the FMA ({1to16}) if one zmm
//!             acc[i][0] += a * b0; acc[i][1] += a * b1
//!     advance the four row bases of A and B (five adds per 16 steps)
//! then the last kc % 16 steps one by one
//! ```
//!
//! `A`'s rows are `lda` apart (the sliver is read in place when its rows do not collide in
//! L1), so the twelve rows are addressed from four bases three rows apart, each giving
//! `base`, `base + lda` and `base + 2 lda` through the scaled index of the address. The
//! rows are listed once per vector width (`(row, acc0, acc1, address)`); a tile of fewer rows
//! takes a prefix of the list (`first_rows!`).

use super::blis::Tile;
use core::arch::asm;
use core::arch::x86_64::{__m256, __m512, _mm256_setzero_ps, _mm512_setzero_ps};

/// The text `$s` for tiles of two vectors per row (`2`), nothing for one (`1`).
macro_rules! second {
    (2, $($s:tt)*) => {
        concat!($($s)*)
    };
    (1, $($s:tt)*) => {
        ""
    };
}

/// One row's FMAs at step `$s`: `acc0 += A[row, p + s] * b0` (and `acc1 += .. * b1`).
///
/// Two vectors per row, and every AVX2 row (AVX2 has no embedded broadcast): `vbroadcastss`
/// of A's element into `$bc`, then the FMAs from the register. One zmm per row (the
/// AVX-512 half-width tile): the FMA broadcasts the element from memory itself
/// (`{1to16}`), one instruction fewer per row.
///
/// Why the two differ. An embedded broadcast is a load of its own in every FMA that has
/// one, so a two-vector row that used it loaded each element twice: 26 loads per step of
/// the full tile for 24 FMAs. Intel's cores with two 512-bit FMA ports do the 24 FMAs in 12
/// cycles but only two 512-bit loads per cycle, so the loads were the limit (Intel Xeon,
/// AVX-512: GEMM 1024^3 0.76-0.78 of peak with embedded broadcasts, 0.84-0.86 with the
/// register, 0.90-0.93x -> 1.00-1.03x the `gemm` crate; ResNet-50's convolutions, median
/// 0.64 -> 0.71). With one vector per row the broadcast serves one FMA, so embedding it
/// only saves an instruction (AMD EPYC Zen 4: ResNet-50's 7x7 1x1 layers went from
/// 0.80-0.82 to 0.87-0.91 of peak).
macro_rules! row_fmas {
    ("zmmword", $bc:tt, $b0:tt, $b1:tt, 1, $s:tt, $c0:tt, $c1:tt, $a:tt) => {
        concat!(
            "vfmadd231ps ",
            $c0,
            ", ",
            $b0,
            ", dword ptr [",
            $a,
            " + ",
            $s,
            " * 4]{{1to16}}\n"
        )
    };
    ($ptr:tt, $bc:tt, $b0:tt, $b1:tt, $w:tt, $s:tt, $c0:tt, $c1:tt, $a:tt) => {
        concat!(
            "vbroadcastss ",
            $bc,
            ", dword ptr [",
            $a,
            " + ",
            $s,
            " * 4]\n",
            "vfmadd231ps ",
            $c0,
            ", ",
            $b0,
            ", ",
            $bc,
            "\n",
            second!($w, "vfmadd231ps ", $c1, ", ", $b1, ", ", $bc, "\n"),
        )
    };
}

/// `$pf byte ptr $addr`, one line of assembly.
macro_rules! pf {
    ($pf:tt, $addr:tt) => {
        concat!($pf, " byte ptr ", $addr, "\n")
    };
}

/// Unless `{pn}` is null: prefetches (instruction `$pf`) one line of each of the next
/// sliver's 12 rows (`{ln}` bytes apart, through the scratch register `{t}`), then `{pn}`
/// moves one line on. Run once per group of 16 steps, which consume one line of each row of
/// the current sliver, so the next sliver is fetched at the pace this one is read.
macro_rules! next_sliver {
    ($pf:tt) => {
        concat!(
            "test {pn}, {pn}\n",
            "jz 3f\n",
            pf!($pf, "[{pn}]"),
            pf!($pf, "[{pn} + {ln}]"),
            pf!($pf, "[{pn} + {ln} * 2]"),
            "lea {t}, [{pn} + {ln} * 2]\n",
            pf!($pf, "[{t} + {ln}]"),
            pf!($pf, "[{t} + {ln} * 2]"),
            "lea {t}, [{t} + {ln} * 2]\n",
            pf!($pf, "[{t} + {ln}]"),
            pf!($pf, "[{t} + {ln} * 2]"),
            "lea {t}, [{t} + {ln} * 2]\n",
            pf!($pf, "[{t} + {ln}]"),
            pf!($pf, "[{t} + {ln} * 2]"),
            "lea {t}, [{t} + {ln} * 2]\n",
            pf!($pf, "[{t} + {ln}]"),
            pf!($pf, "[{t} + {ln} * 2]"),
            "lea {t}, [{t} + {ln} * 2]\n",
            pf!($pf, "[{t} + {ln}]"),
            "add {pn}, 64\n",
            "3:\n",
        )
    };
}

/// One step of the reduction at step `$s` of a group: `$w` loads of B, then per row a
/// broadcast of A and `$w` FMAs (`row_fmas!`). The displacements are assembler expressions.
macro_rules! step {
    ($ptr:tt, $b0:tt, $b1:tt, $bc:tt, $row:tt, $half:tt, $w:tt, $s:tt;
     $( ($c0:tt, $c1:tt, $a:tt) )+) => {
        concat!(
            "vmovaps ", $b0, ", ", $ptr, " ptr [{b} + ", $s, " * ", $row, "]\n",
            second!($w, "vmovaps ", $b1, ", ", $ptr, " ptr [{b} + ", $s, " * ", $row, " + ", $half, "]\n"),
            $( row_fmas!($ptr, $bc, $b0, $b1, $w, $s, $c0, $c1, $a), )+
        )
    };
}

/// The whole loop for the rows listed (`(index, acc0, acc1, address of A[index, p])`), with
/// the zeroing instruction (`vpxord` for zmm: AVX-512F has no 512-bit `vxorps` without DQ,
/// and kiln selects AVX-512 on `avx512f` alone), the vector kind (`$ptr`, the two B registers, the broadcast register, bytes per packed row
/// of B and per vector) and `$w` vectors per row (with one, the second accumulator of each
/// row stays zero).
macro_rules! k_loop {
    ($zero:tt, $ptr:tt, $b0:tt, $b1:tt, $bc:tt, $row:tt, $half:tt, $w:tt; $t:expr, $acc:ident;
     $( ($i:tt, $c0:tt, $c1:tt, $a:tt) )+) => {{
        let t: &Tile = $t;
        let lda = t.lda;
        // Row bases three rows apart; past the sliver's rows they are computed, never read.
        let a0 = t.a;
        let a1 = a0.wrapping_add(3 * lda);
        let a2 = a0.wrapping_add(6 * lda);
        let a3 = a0.wrapping_add(9 * lda);
        // SAFETY: the caller guarantees the tile contract: `A[i, p]` for `i < R`, `p < kc`
        // is readable at `a + i * lda + p`, and `kc` aligned rows of the micro-panel at `b`.
        // The prefetches never fault. Only the registers named as outputs are written.
        unsafe {
            asm!(
                $(
                    concat!($zero, " ", $c0, ", ", $c0, ", ", $c0),
                    concat!($zero, " ", $c1, ", ", $c1, ", ", $c1),
                )+
                "test {groups}, {groups}",
                "jz 4f",
                "2:",
                next_sliver!("prefetcht0"),
                step!($ptr, $b0, $b1, $bc, $row, $half, $w, "0"; $( ($c0, $c1, $a) )+),
                step!($ptr, $b0, $b1, $bc, $row, $half, $w, "1"; $( ($c0, $c1, $a) )+),
                step!($ptr, $b0, $b1, $bc, $row, $half, $w, "2"; $( ($c0, $c1, $a) )+),
                step!($ptr, $b0, $b1, $bc, $row, $half, $w, "3"; $( ($c0, $c1, $a) )+),
                step!($ptr, $b0, $b1, $bc, $row, $half, $w, "4"; $( ($c0, $c1, $a) )+),
                step!($ptr, $b0, $b1, $bc, $row, $half, $w, "5"; $( ($c0, $c1, $a) )+),
                step!($ptr, $b0, $b1, $bc, $row, $half, $w, "6"; $( ($c0, $c1, $a) )+),
                step!($ptr, $b0, $b1, $bc, $row, $half, $w, "7"; $( ($c0, $c1, $a) )+),
                step!($ptr, $b0, $b1, $bc, $row, $half, $w, "8"; $( ($c0, $c1, $a) )+),
                step!($ptr, $b0, $b1, $bc, $row, $half, $w, "9"; $( ($c0, $c1, $a) )+),
                step!($ptr, $b0, $b1, $bc, $row, $half, $w, "10"; $( ($c0, $c1, $a) )+),
                step!($ptr, $b0, $b1, $bc, $row, $half, $w, "11"; $( ($c0, $c1, $a) )+),
                step!($ptr, $b0, $b1, $bc, $row, $half, $w, "12"; $( ($c0, $c1, $a) )+),
                step!($ptr, $b0, $b1, $bc, $row, $half, $w, "13"; $( ($c0, $c1, $a) )+),
                step!($ptr, $b0, $b1, $bc, $row, $half, $w, "14"; $( ($c0, $c1, $a) )+),
                step!($ptr, $b0, $b1, $bc, $row, $half, $w, "15"; $( ($c0, $c1, $a) )+),
                "add {a0}, 64",
                "add {a1}, 64",
                "add {a2}, 64",
                "add {a3}, 64",
                concat!("add {b}, 16 * ", $row),
                "dec {groups}",
                "jnz 2b",
                "4:",
                "test {rest}, {rest}",
                "jz 5f",
                "6:",
                step!($ptr, $b0, $b1, $bc, $row, $half, $w, "0"; $( ($c0, $c1, $a) )+),
                "add {a0}, 4",
                "add {a1}, 4",
                "add {a2}, 4",
                "add {a3}, 4",
                concat!("add {b}, ", $row),
                "dec {rest}",
                "jnz 6b",
                "5:",
                // Names the row stride for the one-row tile, which has no other use for it.
                "# {l}",
                a0 = inout(reg) a0 => _,
                a1 = inout(reg) a1 => _,
                a2 = inout(reg) a2 => _,
                a3 = inout(reg) a3 => _,
                l = in(reg) lda * 4,
                b = inout(reg) t.b => _,
                groups = inout(reg) t.kc / 16 => _,
                rest = inout(reg) t.kc % 16 => _,
                pn = inout(reg) t.a_next => _,
                ln = in(reg) t.lda_next * 4,
                t = out(reg) _,
                $( out($c0) $acc[$i][0], out($c1) $acc[$i][1], )+
                out($b0) _,
                out($b1) _,
                out($bc) _,
                options(nostack, readonly),
            )
        }
    }};
}

/// [`k_loop!`] with 512-bit vectors.
macro_rules! k_loop_512 {
    ($($args:tt)*) => {
        k_loop!("vpxord", "zmmword", "zmm30", "zmm31", "zmm29", "128", "64", 2; $($args)*)
    };
}

/// [`k_loop!`] with one 512-bit vector per row (the half-width micro-panel).
macro_rules! k_loop_512_half {
    ($($args:tt)*) => {
        k_loop!("vpxord", "zmmword", "zmm30", "zmm31", "zmm29", "64", "64", 1; $($args)*)
    };
}

/// [`k_loop!`] with 256-bit vectors.
macro_rules! k_loop_256 {
    ($($args:tt)*) => {
        k_loop!("vxorps", "ymmword", "ymm14", "ymm15", "ymm13", "64", "32", 2; $($args)*)
    };
}

/// `$loop!` on the first `$r` rows of the list (`(index, acc0, acc1, address)`, in order): one
/// branch per row count, each a prefix of the one list, so a tile of fewer rows keeps the
/// registers and addresses of the full one.
macro_rules! first_rows {
    ($r:expr, $loop:ident!($t:expr, $acc:ident); [$($done:tt)*];
     ($i:tt, $c0:tt, $c1:tt, $a:tt) $($rest:tt)*) => {
        if $r == $i + 1 {
            $loop!($t, $acc; $($done)* ($i, $c0, $c1, $a))
        } else {
            first_rows!($r, $loop!($t, $acc); [$($done)* ($i, $c0, $c1, $a)]; $($rest)*)
        }
    };
    ($r:expr, $loop:ident!($t:expr, $acc:ident); [$($done:tt)*];) => {
        unreachable!()
    };
}

/// `$loop` over the first `$r` rows of an AVX-512 tile: rows 0-11 in accumulators
/// zmm0-zmm23, their addresses from four bases three rows apart (`first_rows!`).
macro_rules! zmm_rows {
    ($r:ident, $loop:ident, $t:expr, $acc:ident) => {
        first_rows!($r, $loop!($t, $acc); [];
            (0, "zmm0", "zmm1", "{a0}") (1, "zmm2", "zmm3", "{a0}+{l}") (2, "zmm4", "zmm5", "{a0}+{l}*2") (3, "zmm6", "zmm7", "{a1}") (4, "zmm8", "zmm9", "{a1}+{l}") (5, "zmm10", "zmm11", "{a1}+{l}*2") (6, "zmm12", "zmm13", "{a2}") (7, "zmm14", "zmm15", "{a2}+{l}") (8, "zmm16", "zmm17", "{a2}+{l}*2") (9, "zmm18", "zmm19", "{a3}") (10, "zmm20", "zmm21", "{a3}+{l}") (11, "zmm22", "zmm23", "{a3}+{l}*2"))
    };
}

/// `$loop` over the first `$r` rows of an AVX2 tile: rows 0-5 in accumulators ymm0-ymm11,
/// their addresses from two bases three rows apart (`first_rows!`).
macro_rules! ymm_rows {
    ($r:ident, $loop:ident, $t:expr, $acc:ident) => {
        first_rows!($r, $loop!($t, $acc); [];
            (0, "ymm0", "ymm1", "{a0}") (1, "ymm2", "ymm3", "{a0}+{l}") (2, "ymm4", "ymm5", "{a0}+{l}*2") (3, "ymm6", "ymm7", "{a1}") (4, "ymm8", "ymm9", "{a1}+{l}") (5, "ymm10", "ymm11", "{a1}+{l}*2"))
    };
}

/// The accumulators of an `R x 16 W` AVX-512 tile after its `kc` steps (rows `R..` zero, and
/// the second vector of each row if `W == 1`).
///
/// # Safety
///
/// AVX-512F is available, `1 <= R <= 12`, `W` is 1 or 2, and `t` is valid for
/// [`MicroKernel::tile`](super::blis::MicroKernel::tile) with `R` rows and `cols == 16 W` (the
/// micro-panel 64-byte aligned).
#[inline]
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn tile_512<const R: usize, const W: usize>(t: &Tile) -> [[__m512; 2]; 12] {
    let mut acc = [[_mm512_setzero_ps(); 2]; 12];
    if W == 2 {
        zmm_rows!(R, k_loop_512, t, acc)
    } else {
        zmm_rows!(R, k_loop_512_half, t, acc)
    }
    acc
}

/// The accumulators of a full `R x 16` AVX2 tile after its `kc` steps (rows `R..` zero).
///
/// # Safety
///
/// AVX2 and FMA are available, `1 <= R <= 6`, and `t` is valid for
/// [`MicroKernel::tile`](super::blis::MicroKernel::tile) with `R` rows and `cols == 16` (the
/// micro-panel 32-byte aligned).
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn full_256<const R: usize>(t: &Tile) -> [[__m256; 2]; 6] {
    let mut acc = [[_mm256_setzero_ps(); 2]; 6];
    ymm_rows!(R, k_loop_256, t, acc);
    acc
}

/// How far along its row each step of an in-place tile prefetches `B` (into L2), in bytes:
/// four full AVX-512 tiles (eight AVX2 ones) on: the same tile of the next panel when panels
/// are 128 columns wide, as
/// they are for most products that read `B` in place ([`super::blis::panel_cols`]), and four
/// tiles on in the same panel when `A` is too large for them and they are 512 wide.
///
/// Why. An in-place tile reads `kc` rows of `B` a plane apart, 128 bytes of each, and the
/// next tile the next 128 bytes: `kc` interleaved streams with a page or more between them,
/// which the hardware prefetchers do not follow, so whenever `B` was not in L2 the first
/// sliver's tiles waited on L3 or memory for every row. Fetched one panel ahead, the next
/// panel's rows are in L2 when its first sliver starts: MobileNet-v2's 32 -> 16 at 112x112
/// with its input in memory went from 25.5 to 72.5 GFLOP/s (AMD EPYC Zen 4; the other layers
/// and the choice of distance are in docs/performance.md, "Prefetching `B` in place").
/// `prefetcht1` rather than `t0`, because rows a plane apart share few L1 sets
/// ([`super::blis::rows_collide`]'s concern for `A`). End to end in steady state, with each
/// layer's input still in cache, it measured neutral.
const AHEAD_BYTES: usize = 512;

/// The prefetch of [`AHEAD_BYTES`] on for a step of an in-place tile, at `[$at]`: one line per
/// 64 bytes the step loads (`$lines`: 2 for the 512-bit tile's row of two zmm, 1 for AVX2's
/// two ymm).
macro_rules! ahead {
    (2, $at:literal) => {
        concat!(
            "prefetcht1 byte ptr [",
            $at,
            "]\n",
            "prefetcht1 byte ptr [",
            $at,
            " + 64]\n"
        )
    };
    (1, $at:literal) => {
        concat!("prefetcht1 byte ptr [", $at, "]\n")
    };
}

/// One step of [`k_loop_strided!`]: the B row at `{b}` (unaligned loads: a row of the input
/// starts anywhere), a prefetch of the same row [`AHEAD_BYTES`] further on, the rows' FMAs,
/// then `{b}` moves to the next row (`{x}`, the stride in bytes, on). The first group is the
/// register set ([`k_loop_in_place!`]), `$w` the vectors per row.
macro_rules! strided_step {
    ([$ptr:tt, $b0:tt, $b1:tt, $bc:tt, $zero:tt, $bytes:tt, $lines:tt],
     2, $s:tt; $( ($c0:tt, $c1:tt, $a:tt) )+) => {
        concat!(
            "vmovups ", $b0, ", ", $ptr, " ptr [{b}]\n",
            "vmovups ", $b1, ", ", $ptr, " ptr [{b} + ", $bytes, "]\n",
            ahead!($lines, "{b} + {ahead}"),
            $( row_fmas!($ptr, $bc, $b0, $b1, 2, $s, $c0, $c1, $a), )+
            "add {b}, {x}\n",
        )
    };
    ([$ptr:tt, $b0:tt, $b1:tt, $bc:tt, $zero:tt, $bytes:tt, $lines:tt],
     1, $s:tt; $( ($c0:tt, $c1:tt, $a:tt) )+) => {
        concat!(
            "vmovups ", $b0, ", ", $ptr, " ptr [{b}]\n",
            ahead!(1, "{b} + {ahead}"),
            $( row_fmas!($ptr, $bc, $b0, $b1, 1, $s, $c0, $c1, $a), )+
            "add {b}, {x}\n",
        )
    };
}

/// [`k_loop!`] for `B` read where it lies rather than packed: row `p` of the tile's columns
/// is `t.ldb` floats after row `p - 1` (a 1x1 convolution's input, one image plane per
/// row), so each step loads its row through `{b}` and adds the stride (a register add where
/// the packed loop has a displacement). The next sliver is prefetched as in the packed loop,
/// but into L2 only (`prefetcht1`): in a model a layer's weights come from memory once per
/// run, and the hardware prefetchers did not hide that (DenseNet-121, whose 1x1 layers are
/// mostly read in place, 1-3 % faster end to end; docs/performance.md, "DenseNet-121 and
/// the GEMM driver"); `prefetcht0`, which also fills L1, where the rows of `B` one plane apart
/// already compete for sets, measured about 2 % slower than `prefetcht1` on eleven in-place
/// layers of the kernel bench, most of them 56x56.
macro_rules! k_loop_strided {
    ($v:tt, $w:tt; $t:expr, $acc:ident; $( $row:tt )+) => {
        k_loop_in_place!(strided_step, $v, "", "", [in(reg) ($t).ldb * 4]; $w; $t, $acc; $( $row )+)
    };
}

/// The loop of a tile whose `B` is read in place, shared by [`k_loop_strided!`] and
/// [`k_loop_table!`]: `$step!` loads row `p` of `B` (through `{b}` and `{x}`, whose asm
/// operand is `[$x]`: the stride as an input, the table's pointer as an in-out) and runs the rows' FMAs, `$group` / `$one` is the assembly that moves on after a
/// group of 16 steps / a single step besides `A`'s bases. The register set is `[vector kind,
/// the two B registers, the broadcast register, the zeroing instruction, bytes per vector,
/// lines per row of two vectors]`: `k_loop_512!`'s for AVX-512, `k_loop_256!`'s for AVX2, written
/// out by each wrapper (macro arguments must be literals where `asm!` names registers).
macro_rules! k_loop_in_place {
    ($step:ident,
     [$ptr:tt, $b0:tt, $b1:tt, $bc:tt, $zero:tt, $bytes:tt, $lines:tt],
     $group:literal, $one:literal, [$($x:tt)+]; $w:tt; $t:expr, $acc:ident;
     $( ($i:tt, $c0:tt, $c1:tt, $a:tt) )+) => {{
        let t: &Tile = $t;
        let lda = t.lda;
        let a0 = t.a;
        let a1 = a0.wrapping_add(3 * lda);
        let a2 = a0.wrapping_add(6 * lda);
        let a3 = a0.wrapping_add(9 * lda);
        // SAFETY: the caller guarantees the tile contract: `A[i, p]` for `i < R`, `p < kc`
        // at `a + i * lda + p`, and `B[p, j]` for `p < kc`, `j < 16 W` where `$step` reads it
        // (`b + p * ldb + j`, or `b + b_rows[p] + j` with `kc` offsets at `b_rows`). The
        // prefetches never fault. Only the registers named as outputs are written.
        unsafe {
            asm!(
                $(
                    concat!($zero, " ", $c0, ", ", $c0, ", ", $c0),
                    concat!($zero, " ", $c1, ", ", $c1, ", ", $c1),
                )+
                "test {groups}, {groups}",
                "jz 4f",
                "2:",
                next_sliver!("prefetcht1"),
                $step!([$ptr, $b0, $b1, $bc, $zero, $bytes, $lines], $w, "0"; $( ($c0, $c1, $a) )+),
                $step!([$ptr, $b0, $b1, $bc, $zero, $bytes, $lines], $w, "1"; $( ($c0, $c1, $a) )+),
                $step!([$ptr, $b0, $b1, $bc, $zero, $bytes, $lines], $w, "2"; $( ($c0, $c1, $a) )+),
                $step!([$ptr, $b0, $b1, $bc, $zero, $bytes, $lines], $w, "3"; $( ($c0, $c1, $a) )+),
                $step!([$ptr, $b0, $b1, $bc, $zero, $bytes, $lines], $w, "4"; $( ($c0, $c1, $a) )+),
                $step!([$ptr, $b0, $b1, $bc, $zero, $bytes, $lines], $w, "5"; $( ($c0, $c1, $a) )+),
                $step!([$ptr, $b0, $b1, $bc, $zero, $bytes, $lines], $w, "6"; $( ($c0, $c1, $a) )+),
                $step!([$ptr, $b0, $b1, $bc, $zero, $bytes, $lines], $w, "7"; $( ($c0, $c1, $a) )+),
                $step!([$ptr, $b0, $b1, $bc, $zero, $bytes, $lines], $w, "8"; $( ($c0, $c1, $a) )+),
                $step!([$ptr, $b0, $b1, $bc, $zero, $bytes, $lines], $w, "9"; $( ($c0, $c1, $a) )+),
                $step!([$ptr, $b0, $b1, $bc, $zero, $bytes, $lines], $w, "10"; $( ($c0, $c1, $a) )+),
                $step!([$ptr, $b0, $b1, $bc, $zero, $bytes, $lines], $w, "11"; $( ($c0, $c1, $a) )+),
                $step!([$ptr, $b0, $b1, $bc, $zero, $bytes, $lines], $w, "12"; $( ($c0, $c1, $a) )+),
                $step!([$ptr, $b0, $b1, $bc, $zero, $bytes, $lines], $w, "13"; $( ($c0, $c1, $a) )+),
                $step!([$ptr, $b0, $b1, $bc, $zero, $bytes, $lines], $w, "14"; $( ($c0, $c1, $a) )+),
                $step!([$ptr, $b0, $b1, $bc, $zero, $bytes, $lines], $w, "15"; $( ($c0, $c1, $a) )+),
                "add {a0}, 64",
                "add {a1}, 64",
                "add {a2}, 64",
                "add {a3}, 64",
                $group,
                "dec {groups}",
                "jnz 2b",
                "4:",
                "test {rest}, {rest}",
                "jz 5f",
                "6:",
                $step!([$ptr, $b0, $b1, $bc, $zero, $bytes, $lines], $w, "0"; $( ($c0, $c1, $a) )+),
                "add {a0}, 4",
                "add {a1}, 4",
                "add {a2}, 4",
                "add {a3}, 4",
                $one,
                "dec {rest}",
                "jnz 6b",
                "5:",
                "# {l}",
                a0 = inout(reg) a0 => _,
                a1 = inout(reg) a1 => _,
                a2 = inout(reg) a2 => _,
                a3 = inout(reg) a3 => _,
                l = in(reg) lda * 4,
                b = inout(reg) t.b => _,
                x = $($x)+,
                ahead = const AHEAD_BYTES,
                groups = inout(reg) t.kc / 16 => _,
                rest = inout(reg) t.kc % 16 => _,
                pn = inout(reg) t.a_next => _,
                ln = in(reg) t.lda_next * 4,
                t = out(reg) _,
                $( out($c0) $acc[$i][0], out($c1) $acc[$i][1], )+
                out($b0) _,
                out($b1) _,
                out($bc) _,
                options(nostack, readonly),
            )
        }
    }};
}

/// [`k_loop_strided!`] with two vectors per row.
macro_rules! k_loop_strided_2 {
    ($($args:tt)*) => {
        k_loop_strided!(["zmmword", "zmm30", "zmm31", "zmm29", "vpxord", "64", 2], 2; $($args)*)
    };
}

/// [`k_loop_strided!`] with one vector per row.
macro_rules! k_loop_strided_1 {
    ($($args:tt)*) => {
        k_loop_strided!(["zmmword", "zmm30", "zmm31", "zmm29", "vpxord", "64", 2], 1; $($args)*)
    };
}

/// [`k_loop_strided!`] for the AVX2 tile (two ymm per row).
macro_rules! k_loop_strided_256 {
    ($($args:tt)*) => {
        k_loop_strided!(["ymmword", "ymm14", "ymm15", "ymm13", "vxorps", "32", 1], 2; $($args)*)
    };
}

/// One step of [`k_loop_table!`]: the offset of B's row from the table (`{x}`, step `$s`
/// of the group), that row's vectors at `{b}` plus the offset (unaligned loads), the same row
/// [`AHEAD_BYTES`] on prefetched, then the rows' FMAs.
macro_rules! table_step {
    ([$ptr:tt, $b0:tt, $b1:tt, $bc:tt, $zero:tt, $bytes:tt, $lines:tt],
     2, $s:tt; $( ($c0:tt, $c1:tt, $a:tt) )+) => {
        concat!(
            "mov {t:e}, dword ptr [{x} + ", $s, " * 4]\n",
            "vmovups ", $b0, ", ", $ptr, " ptr [{b} + {t} * 4]\n",
            "vmovups ", $b1, ", ", $ptr, " ptr [{b} + {t} * 4 + ", $bytes, "]\n",
            ahead!($lines, "{b} + {t} * 4 + {ahead}"),
            $( row_fmas!($ptr, $bc, $b0, $b1, 2, $s, $c0, $c1, $a), )+
        )
    };
    ([$ptr:tt, $b0:tt, $b1:tt, $bc:tt, $zero:tt, $bytes:tt, $lines:tt],
     1, $s:tt; $( ($c0:tt, $c1:tt, $a:tt) )+) => {
        concat!(
            "mov {t:e}, dword ptr [{x} + ", $s, " * 4]\n",
            "vmovups ", $b0, ", ", $ptr, " ptr [{b} + {t} * 4]\n",
            ahead!(1, "{b} + {t} * 4 + {ahead}"),
            $( row_fmas!($ptr, $bc, $b0, $b1, 1, $s, $c0, $c1, $a), )+
        )
    };
}

/// [`k_loop_strided!`] with row `p` of `B` at `t.b + t.b_rows[p]` instead of a stride apart:
/// a convolution's zero-padded input, where the rows of its implicit im2col matrix are the
/// input plane shifted by each tap (`super::flat`). One more load per step (the offset,
/// into the scratch register the prefetch uses) than the strided loop; the next sliver is
/// prefetched into L2 as there.
macro_rules! k_loop_table {
    ($v:tt, $w:tt; $t:expr, $acc:ident; $( $row:tt )+) => {
        k_loop_in_place!(table_step, $v, "add {x}, 64", "add {x}, 4", [inout(reg) ($t).b_rows => _]; $w; $t, $acc; $( $row )+)
    };
}

/// [`k_loop_table!`] with two vectors per row.
macro_rules! k_loop_table_2 {
    ($($args:tt)*) => {
        k_loop_table!(["zmmword", "zmm30", "zmm31", "zmm29", "vpxord", "64", 2], 2; $($args)*)
    };
}

/// [`k_loop_table!`] with one vector per row.
macro_rules! k_loop_table_1 {
    ($($args:tt)*) => {
        k_loop_table!(["zmmword", "zmm30", "zmm31", "zmm29", "vpxord", "64", 2], 1; $($args)*)
    };
}

/// [`k_loop_table!`] for the AVX2 tile (two ymm per row).
macro_rules! k_loop_table_256 {
    ($($args:tt)*) => {
        k_loop_table!(["ymmword", "ymm14", "ymm15", "ymm13", "vxorps", "32", 1], 2; $($args)*)
    };
}

/// The accumulators of an `R x 16 W` AVX-512 tile whose `B` is read in place: rows `t.ldb`
/// floats apart ([`k_loop_strided!`]), or, if `t.b_rows` is not null, through that table of
/// row offsets ([`k_loop_table!`]) (rows `R..` zero, and the second vector of each row if
/// `W == 1`).
///
/// # Safety
///
/// AVX-512F is available, `1 <= R <= 12`, `W` is 1 or 2, `t.cols == 16 W`, and
/// `t` is valid for [`MicroKernel::tile_strided`](super::blis::MicroKernel::tile_strided)
/// with `R` rows.
#[inline]
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn in_place_512<const R: usize, const W: usize>(t: &Tile) -> [[__m512; 2]; 12] {
    let mut acc = [[_mm512_setzero_ps(); 2]; 12];
    match (W == 2, t.b_rows.is_null()) {
        (true, true) => zmm_rows!(R, k_loop_strided_2, t, acc),
        (false, true) => zmm_rows!(R, k_loop_strided_1, t, acc),
        (true, false) => zmm_rows!(R, k_loop_table_2, t, acc),
        (false, false) => zmm_rows!(R, k_loop_table_1, t, acc),
    }
    acc
}

/// The accumulators of a full `R x 16` AVX2 tile whose `B` is read in place, as
/// [`in_place_512`] reads it (rows `R..` zero).
///
/// # Safety
///
/// AVX2 and FMA are available, `1 <= R <= 6`, `t.cols == 16`, and `t` is valid for
/// [`MicroKernel::tile_strided`](super::blis::MicroKernel::tile_strided) with `R` rows.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn in_place_256<const R: usize>(t: &Tile) -> [[__m256; 2]; 6] {
    let mut acc = [[_mm256_setzero_ps(); 2]; 6];
    if t.b_rows.is_null() {
        ymm_rows!(R, k_loop_strided_256, t, acc)
    } else {
        ymm_rows!(R, k_loop_table_256, t, acc)
    }
    acc
}
