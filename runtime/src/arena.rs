//! Arena memory: owned 64-byte-aligned buffers, turning a caller's bytes into the `f32` arena, and
//! splitting the arena into the slices one operation reads and writes.
//!
//! The compiler places every intermediate tensor at a 64-byte-aligned offset in one arena and
//! proves (with its verifier) that no operation writes a region it also reads. At run time the
//! generated code asks [`io`] for exactly those regions; `io` hands them out with safe
//! `split_at_mut`, re-checking the rule cheaply so that even a compiler bug cannot produce aliased
//! `&mut` — it panics with an internal error instead.
//!
//! Alignment comes from a `#[repr(align(64))]` block type: owned storage is a slice of blocks
//! viewed as bytes or `f32`s through bytemuck. Small buffers are boxed; large ones on Linux are
//! fresh anonymous mappings with transparent huge pages ([`Storage`]), the only `unsafe` here.

use core::fmt;
use core::ops::Range;

use bytemuck::{Pod, Zeroable};

use crate::Error;

/// The alignment, in bytes, of every arena start and every planned offset.
const ALIGN: usize = 64;

/// One 64-byte, 64-byte-aligned unit of owned storage. A slice of these is a 64-byte-aligned
/// buffer that bytemuck can view as `[u8]` or `[f32]`.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C, align(64))]
struct Block([u8; ALIGN]);

/// Allocates `bytes` bytes (rounded up to whole blocks), zeroed, in one allocation; aborts
/// like `vec!` if the memory cannot be had.
fn zeroed_blocks(bytes: usize) -> Storage {
    let n = bytes.div_ceil(ALIGN);
    Storage::try_zeroed(n).unwrap_or_else(|()| {
        let layout =
            std::alloc::Layout::array::<Block>(n).unwrap_or(std::alloc::Layout::new::<Block>());
        std::alloc::handle_alloc_error(layout)
    })
}

/// Owned, zeroed blocks: boxed, or on Linux, from [`MAPPED_MIN`] bytes on, an anonymous
/// mapping of their own whose 2 MiB pages are offered transparent huge pages.
///
/// **Why a mapping.** Two things a boxed slice cannot give. Huge pages: the kernels read the
/// arena's tensors along strides of whole image planes (a 1x1 convolution's operand is `c_in`
/// rows a plane apart, 12.5 KiB for a 56x56 map; a packer reads a few floats from each of
/// hundreds of rows), so with 4 KiB pages nearly every row is another page and another TLB
/// miss, where a 3 MiB activation is two 2 MiB pages. The hosts kiln is measured on run Linux's
/// transparent huge pages in `madvise` mode, where only memory that asks gets them, and the
/// asking must come before the first touch. And untouched zeroes: the allocator's
/// `alloc_zeroed` for a 64-byte alignment is `posix_memalign` plus a `memset` of every byte,
/// which faulted in the whole arena in `new()`; a fresh mapping is zero until written, page by
/// page (or 2 MiB at once). Figures in docs/performance.md, "Huge pages for the arena".
enum Storage {
    Boxed(Box<[Block]>),
    #[cfg(all(target_os = "linux", not(miri)))]
    Mapped(Mapping),
}

/// Bytes from which [`Storage`] maps instead of boxing: two huge pages, so that at least one
/// whole one lies inside.
#[cfg(all(target_os = "linux", not(miri)))]
const MAPPED_MIN: usize = 2 * HUGE_PAGE;

/// The size of a transparent huge page on x86_64 and on aarch64 with 4 KiB base pages.
#[cfg(all(target_os = "linux", not(miri)))]
const HUGE_PAGE: usize = 2 << 20;

/// `blocks` blocks at `start`, inside an anonymous mapping of [`Mapping::len`] bytes at `base`
/// (`start` is `base` rounded up to a huge page), owned and unmapped on drop.
#[cfg(all(target_os = "linux", not(miri)))]
struct Mapping {
    base: core::ptr::NonNull<libc::c_void>,
    start: core::ptr::NonNull<Block>,
    blocks: usize,
}

// SAFETY: a `Mapping` owns its pages exclusively, as a `Box<[Block]>` owns its allocation, and
// hands them out only through `&self` / `&mut self`.
#[cfg(all(target_os = "linux", not(miri)))]
unsafe impl Send for Mapping {}
// SAFETY: as above: shared access is read-only.
#[cfg(all(target_os = "linux", not(miri)))]
unsafe impl Sync for Mapping {}

#[cfg(all(target_os = "linux", not(miri)))]
impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base..base + len` is the mapping `Mapping::new` made, unmapped only here;
        // no reference into it outlives `self`.
        unsafe { libc::munmap(self.base.as_ptr(), Mapping::len(self.blocks)) };
    }
}

#[cfg(all(target_os = "linux", not(miri)))]
impl Mapping {
    /// A zeroed mapping for `blocks` blocks starting on a huge-page boundary, huge pages
    /// asked for (best effort: a kernel without them, or with them off, refuses and leaves
    /// 4 KiB pages); `None` if the kernel refuses the mapping.
    fn new(blocks: usize) -> Option<Mapping> {
        // Refused, like any allocation, beyond `isize::MAX` bytes (a slice cannot span more).
        let len = blocks
            .checked_mul(ALIGN)?
            .checked_add(HUGE_PAGE)
            .filter(|&len| len <= isize::MAX as usize)?;
        debug_assert_eq!(len, Mapping::len(blocks));
        // SAFETY: a fresh private anonymous mapping, at an address the kernel chooses: it
        // aliases nothing.
        let base = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        let base = core::ptr::NonNull::new(base)?;
        // The mapping is page-aligned; its first huge-page boundary is less than a huge page
        // in, so `blocks` blocks from there end inside it.
        let offset = base.as_ptr().addr().next_multiple_of(HUGE_PAGE) - base.as_ptr().addr();
        // SAFETY: `offset < HUGE_PAGE <= len`: inside the mapping.
        let start = unsafe { base.byte_add(offset) }.cast::<Block>();
        // SAFETY: `start..base + len` lies inside the mapping, which this process owns;
        // `MADV_HUGEPAGE` changes how the kernel backs the pages, never their contents. The
        // result is ignored (a refusal keeps 4 KiB pages).
        unsafe { libc::madvise(start.as_ptr().cast(), len - offset, libc::MADV_HUGEPAGE) };
        Some(Mapping {
            base,
            start,
            blocks,
        })
    }

    /// The bytes mapped for `blocks` blocks: theirs and a huge page of slack for the
    /// alignment (`new` checked that this does not overflow).
    fn len(blocks: usize) -> usize {
        blocks * ALIGN + HUGE_PAGE
    }
}

impl Storage {
    /// `n` zeroed blocks, or `Err` if the memory cannot be had.
    fn try_zeroed(n: usize) -> Result<Storage, ()> {
        #[cfg(all(target_os = "linux", not(miri)))]
        if n.saturating_mul(ALIGN) >= MAPPED_MIN {
            return Mapping::new(n).map(Storage::Mapped).ok_or(());
        }
        bytemuck::allocation::try_zeroed_slice_box(n).map(Storage::Boxed)
    }
}

impl core::ops::Deref for Storage {
    type Target = [Block];
    fn deref(&self) -> &[Block] {
        match self {
            Storage::Boxed(b) => b,
            #[cfg(all(target_os = "linux", not(miri)))]
            // SAFETY: `blocks` blocks from `start` lie inside the mapping (`Mapping::new`),
            // zeroed by the kernel or written through `&mut self` since: valid `Block`s (any
            // bytes are), borrowed as long as `self`.
            Storage::Mapped(m) => unsafe {
                core::slice::from_raw_parts(m.start.as_ptr(), m.blocks)
            },
        }
    }
}

impl core::ops::DerefMut for Storage {
    fn deref_mut(&mut self) -> &mut [Block] {
        match self {
            Storage::Boxed(b) => b,
            #[cfg(all(target_os = "linux", not(miri)))]
            // SAFETY: as in `deref`, and `&mut self` makes the borrow exclusive.
            Storage::Mapped(m) => unsafe {
                core::slice::from_raw_parts_mut(m.start.as_ptr(), m.blocks)
            },
        }
    }
}

/// A 64-byte-aligned byte buffer a caller can own and lend to a model on every call, so that
/// repeated calls allocate nothing.
///
/// ```
/// let mut arena = kiln_runtime::Arena::new(1000);
/// assert_eq!(arena.len(), 1000);
/// assert_eq!(arena.as_bytes_mut().as_ptr() as usize % 64, 0);
/// ```
pub struct Arena {
    blocks: Storage,
    len: usize,
}

impl Arena {
    /// Allocates a zeroed arena of `bytes` bytes, once; the capacity is rounded up to 64.
    pub fn new(bytes: usize) -> Self {
        Arena {
            blocks: zeroed_blocks(bytes),
            len: bytes,
        }
    }

    /// The arena's bytes: exactly as many as asked for, starting on a 64-byte boundary.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        let all: &mut [u8] = bytemuck::cast_slice_mut(&mut self.blocks[..]);
        // `len` never exceeds the rounded-up capacity; `min` keeps that an invariant rather
        // than a panic path.
        let len = self.len.min(all.len());
        &mut all[..len]
    }

    /// The arena's size in bytes, as given to [`Arena::new`].
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the arena has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Debug for Arena {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The contents are scratch data; printing them would only flood the output.
        f.debug_struct("Arena").field("len", &self.len).finish()
    }
}

/// Owned, zeroed, 64-byte-aligned `f32` storage for a model's parameters or its owned arena,
/// allocated once.
pub struct AlignedBuf {
    blocks: Storage,
    len: usize,
}

impl AlignedBuf {
    /// Allocates `len_f32` zeroed `f32`s starting on a 64-byte boundary.
    ///
    /// # Panics
    ///
    /// If `len_f32 * 4` overflows `usize` (no allocation that large could succeed anyway).
    pub fn zeroed(len_f32: usize) -> Self {
        let bytes = len_f32
            .checked_mul(core::mem::size_of::<f32>())
            .expect("AlignedBuf::zeroed: size overflows usize");
        AlignedBuf {
            blocks: zeroed_blocks(bytes),
            len: len_f32,
        }
    }

    /// Allocates `len_f32` zeroed `f32`s starting on a 64-byte boundary, or returns
    /// [`Error::OutOfMemory`] if the allocator cannot provide them (or the size does not even
    /// fit the address space), where [`AlignedBuf::zeroed`] would abort the process.
    ///
    /// ```
    /// use kiln_runtime::{Error, __private::AlignedBuf};
    /// assert_eq!(AlignedBuf::try_zeroed(37).unwrap().as_slice().len(), 37);
    /// assert!(matches!(AlignedBuf::try_zeroed(usize::MAX / 8), Err(Error::OutOfMemory { .. })));
    /// ```
    pub fn try_zeroed(len_f32: usize) -> Result<Self, Error> {
        let too_large = Error::OutOfMemory {
            bytes: len_f32.saturating_mul(core::mem::size_of::<f32>()),
        };
        // Whole blocks of 16 `f32`s; `div_ceil` cannot overflow, and an element count whose
        // bytes overflow `isize` is refused by the allocation below.
        let blocks = len_f32.div_ceil(ALIGN / core::mem::size_of::<f32>());
        // A refused allocation or mapping becomes `Err`; the pages of a large buffer are zeroed
        // lazily by the OS.
        let blocks = Storage::try_zeroed(blocks).map_err(|()| too_large)?;
        Ok(AlignedBuf {
            blocks,
            len: len_f32,
        })
    }

    /// The values.
    pub fn as_slice(&self) -> &[f32] {
        let all: &[f32] = bytemuck::cast_slice(&self.blocks[..]);
        &all[..self.len.min(all.len())]
    }

    /// The values, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [f32] {
        let all: &mut [f32] = bytemuck::cast_slice_mut(&mut self.blocks[..]);
        let len = self.len.min(all.len());
        &mut all[..len]
    }

    /// The values as bytes (native endian), `4 * len` of them.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(self.as_mut_slice())
    }
}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .finish()
    }
}

/// Gives its contents 64-byte alignment. Generated code wraps embedded weights in it:
/// `static W: &Aligned<[u8]> = &Aligned(*include_bytes!("weights.safetensors"));`
#[repr(C, align(64))]
pub struct Aligned<B: ?Sized>(pub B);

impl<B: ?Sized> fmt::Debug for Aligned<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Usually megabytes of weights: show the type, not the bytes.
        f.write_str("Aligned(..)")
    }
}

/// Turns a caller's byte buffer into the model's `f32` arena of `needed` bytes.
///
/// The start is moved up to the next 64-byte boundary inside `bytes` (the planner's offsets are
/// relative to an aligned start); the error says how many bytes were needed if what remains is
/// too small. `needed` is a multiple of 64 chosen by the compiler; 0 gives an empty slice.
pub fn arena_f32(bytes: &mut [u8], needed: usize) -> Result<&mut [f32], Error> {
    if needed == 0 {
        return Ok(&mut []);
    }
    let got = bytes.len();
    // Bytes from the start of `bytes` to the next 64-byte boundary (0 if already aligned).
    let padding = bytes.as_ptr().addr().wrapping_neg() % ALIGN;
    let end = padding
        .checked_add(needed)
        .filter(|&end| end <= got)
        .ok_or(Error::ArenaTooSmall {
            needed,
            got,
            padding: padding.min(got),
        })?;
    let region = &mut bytes[padding..end];
    match bytemuck::try_cast_slice_mut(region) {
        Ok(arena) => Ok(arena),
        // The start is 64-byte aligned; only a `needed` that is not a multiple of 4 gets here,
        // which the compiler never emits.
        Err(_) => internal_error(format_args!(
            "arena size {needed} is not a multiple of 4 bytes"
        )),
    }
}

/// Splits `arena` into the regions one operation reads and writes.
///
/// `reads` and `writes` are `f32` index ranges. Writes must be pairwise disjoint and every read
/// must lie entirely outside every write; reads may overlap each other. Empty ranges are always
/// allowed and give empty slices.
///
/// # Panics
///
/// With an "internal error: memory plan violated" message if the ranges break that rule or run
/// past the arena. The compiler's verifier proves generated code never does; the check here costs
/// a few comparisons and keeps the split in safe code.
#[inline]
pub fn io<const R: usize, const W: usize>(
    arena: &mut [f32],
    reads: [Range<usize>; R],
    writes: [Range<usize>; W],
) -> ([&[f32]; R], [&mut [f32]; W]) {
    let len = arena.len();
    for (kind, r) in reads
        .iter()
        .map(|r| ("read", r))
        .chain(writes.iter().map(|w| ("write", w)))
    {
        if r.start > r.end || r.end > len {
            plan_violated(format_args!(
                "{kind} {r:?} is not a range inside the arena of {len} f32s"
            ));
        }
    }

    // Visit the writes from left to right, cutting the arena into alternating read-only gaps and
    // written regions. Sorting indices (not ranges) lets each result go back to its caller's slot.
    let mut order: [usize; W] = core::array::from_fn(|i| i);
    order.sort_unstable_by_key(|&i| writes[i].start);

    let mut read_out: [Option<&[f32]>; R] = [None; R];
    let mut write_out: [Option<&mut [f32]>; W] = core::array::from_fn(|_| None);
    let mut rest: &mut [f32] = arena;
    // Index in `arena` where `rest` starts.
    let mut base = 0;
    for &wi in &order {
        let w = &writes[wi];
        if w.is_empty() {
            write_out[wi] = Some(&mut []);
            continue;
        }
        if w.start < base {
            let prev = order
                .iter()
                .map(|&j| &writes[j])
                .find(|p| !p.is_empty() && p.start < w.end && w.start < p.end && *p != w)
                .unwrap_or(w);
            plan_violated(format_args!("write {w:?} overlaps write {prev:?}"));
        }
        let (gap, tail) = core::mem::take(&mut rest).split_at_mut(w.start - base);
        let (region, after) = tail.split_at_mut(w.len());
        let gap: &[f32] = gap;
        hand_out_reads(&reads, &mut read_out, gap, base);
        write_out[wi] = Some(region);
        rest = after;
        base = w.end;
    }
    let gap: &[f32] = rest;
    hand_out_reads(&reads, &mut read_out, gap, base);

    let read_out = core::array::from_fn(|i| match read_out[i] {
        Some(slice) => slice,
        None => {
            let r = &reads[i];
            let w = writes
                .iter()
                .find(|w| w.start < r.end && r.start < w.end)
                .unwrap_or(r);
            plan_violated(format_args!("read {r:?} overlaps write {w:?}"))
        }
    });
    let write_out = write_out.map(|w| match w {
        Some(slice) => slice,
        // Every write index is visited exactly once above.
        None => plan_violated(format_args!("a write range was not handed out")),
    });
    (read_out, write_out)
}

/// Gives every read that lies inside `gap` (which starts at arena index `base`) its slice.
/// Empty reads fit anywhere.
#[inline]
fn hand_out_reads<'a, const R: usize>(
    reads: &[Range<usize>; R],
    out: &mut [Option<&'a [f32]>; R],
    gap: &'a [f32],
    base: usize,
) {
    for (r, slot) in reads.iter().zip(out.iter_mut()) {
        if slot.is_some() {
            continue;
        }
        if r.is_empty() {
            *slot = Some(&[]);
        } else if r.start >= base {
            *slot = gap.get(r.start - base..r.end - base);
        }
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn plan_violated(what: fmt::Arguments<'_>) -> ! {
    panic!("internal error: memory plan violated: {what}; this is a kiln bug, please report it")
}

#[cold]
#[inline(never)]
fn internal_error(what: fmt::Arguments<'_>) -> ! {
    panic!("internal error: {what}; this is a kiln bug, please report it")
}

#[cfg(test)]
mod tests {
    // `io` takes arrays of ranges, and one-range arrays are exactly what it is given; the lint
    // guesses they were meant as `vec![0; n]`-style initialisers.
    #![allow(clippy::single_range_in_vec_init)]

    use super::*;

    /// An arena whose value at index i is i, so each slice shows where it came from.
    fn numbered(n: usize) -> Vec<f32> {
        (0..n).map(|i| i as f32).collect()
    }

    fn expect(range: Range<usize>) -> Vec<f32> {
        range.map(|i| i as f32).collect()
    }

    #[test]
    fn io_overlapping_reads() {
        let mut a = numbered(32);
        let ([r0, r1, r2], [w0]) = io(&mut a, [0..8, 4..12, 20..32], [12..20]);
        assert_eq!(r0, &expect(0..8)[..]);
        assert_eq!(r1, &expect(4..12)[..]);
        assert_eq!(r2, &expect(20..32)[..]);
        assert_eq!(w0, &expect(12..20)[..]);
        w0.fill(-1.0);
        assert_eq!(
            &a[11..21],
            &[11.0, -1., -1., -1., -1., -1., -1., -1., -1., 20.0]
        );
    }

    #[test]
    fn io_read_adjacent_to_write() {
        let mut a = numbered(16);
        let ([before, after], [w]) = io(&mut a, [0..4, 8..16], [4..8]);
        assert_eq!(before, &expect(0..4)[..]);
        assert_eq!(after, &expect(8..16)[..]);
        assert_eq!(w, &expect(4..8)[..]);
    }

    #[test]
    fn io_unsorted_writes_keep_caller_order() {
        let mut a = numbered(40);
        let ([r], [w_hi, w_lo, w_mid]) = io(&mut a, [10..12], [30..40, 0..4, 16..24]);
        assert_eq!(r, &expect(10..12)[..]);
        assert_eq!(w_hi, &expect(30..40)[..]);
        assert_eq!(w_lo, &expect(0..4)[..]);
        assert_eq!(w_mid, &expect(16..24)[..]);
        w_hi[0] = 100.0;
        w_lo[0] = 200.0;
        w_mid[0] = 300.0;
        assert_eq!((a[30], a[0], a[16]), (100.0, 200.0, 300.0));
    }

    #[test]
    fn io_empty_ranges_and_no_writes() {
        let mut a = numbered(8);
        // An empty read inside a write region is fine: it reads nothing.
        let ([r_empty, r], [w, w_empty]) = io(&mut a, [5..5, 6..8], [0..6, 3..3]);
        assert!(r_empty.is_empty() && w_empty.is_empty());
        assert_eq!(r, &expect(6..8)[..]);
        assert_eq!(w, &expect(0..6)[..]);
        let ([all], []) = io(&mut a, [0..8], []);
        assert_eq!(all.len(), 8);
        let mut empty: [f32; 0] = [];
        let ([], [w]) = io(&mut empty, [], [0..0]);
        assert!(w.is_empty());
    }

    #[test]
    #[should_panic(
        expected = "internal error: memory plan violated: read 6..10 overlaps write 8..12"
    )]
    fn io_read_overlapping_write_panics() {
        let mut a = numbered(16);
        let _ = io(&mut a, [0..2, 6..10], [8..12]);
    }

    #[test]
    #[should_panic(expected = "internal error: memory plan violated: write")]
    fn io_overlapping_writes_panic() {
        let mut a = numbered(16);
        let _ = io(&mut a, [], [8..12, 0..9]);
    }

    #[test]
    #[should_panic(expected = "is not a range inside the arena of 16 f32s")]
    fn io_out_of_bounds_panics() {
        let mut a = numbered(16);
        let _ = io(&mut a, [12..17], []);
    }

    #[test]
    #[should_panic(expected = "internal error: memory plan violated: read 0..8 overlaps write")]
    fn io_read_spanning_a_write_panics() {
        let mut a = numbered(16);
        let _ = io(&mut a, [0..8], [2..4]);
    }

    #[test]
    fn arena_is_aligned_and_zeroed() {
        for n in [0, 1, 63, 64, 65, 1000] {
            let mut arena = Arena::new(n);
            assert_eq!(arena.len(), n);
            assert_eq!(arena.is_empty(), n == 0);
            let bytes = arena.as_bytes_mut();
            assert_eq!(bytes.len(), n);
            if n > 0 {
                assert_eq!(bytes.as_ptr().addr() % 64, 0);
            }
            assert!(bytes.iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn aligned_buf_is_aligned_and_zeroed() {
        let mut buf = AlignedBuf::zeroed(37);
        assert_eq!(buf.as_slice().len(), 37);
        assert_eq!(buf.as_slice().as_ptr().addr() % 64, 0);
        assert!(buf.as_slice().iter().all(|&v| v == 0.0));
        buf.as_mut_slice()[36] = 1.0;
        let bytes = buf.as_bytes_mut();
        assert_eq!(bytes.len(), 37 * 4);
        assert_eq!(&bytes[36 * 4..], &1.0f32.to_ne_bytes());
        assert!(AlignedBuf::zeroed(0).as_slice().is_empty());
    }

    #[test]
    fn try_zeroed_is_aligned_and_zeroed() {
        for n in [0, 1, 15, 16, 17, 1000] {
            let mut buf = AlignedBuf::try_zeroed(n).unwrap();
            assert_eq!(buf.as_slice().len(), n);
            assert_eq!(buf.as_slice().as_ptr().addr() % 64, 0);
            assert!(buf.as_slice().iter().all(|&v| v == 0.0));
            buf.as_mut_slice().fill(1.0);
            assert_eq!(buf.as_bytes_mut().len(), 4 * n);
        }
    }

    /// Buffers from two huge pages on are mappings of their own, on Linux starting on a huge
    /// page boundary: zeroed, writable to their last byte, each independent of the others,
    /// whichever constructor made them; and unmapped again on drop (a thousand 4 MiB buffers
    /// would not fit a 32-bit address space otherwise).
    #[test]
    fn large_buffers_are_huge_page_aligned_mappings() {
        for n in [(4 << 20) / 4, (4 << 20) / 4 + 5, (9 << 20) / 4 + 3] {
            let mut a = AlignedBuf::try_zeroed(n).unwrap();
            let mut b = AlignedBuf::zeroed(n);
            let mut arena = Arena::new(4 * n + 1);
            for s in [a.as_mut_slice(), b.as_mut_slice()] {
                assert_eq!(s.len(), n);
                #[cfg(all(target_os = "linux", not(miri)))]
                assert_eq!(s.as_ptr().addr() % (2 << 20), 0);
                assert!(s.iter().all(|&v| v == 0.0));
                s[n - 1] = 1.0;
            }
            assert_eq!((a.as_slice()[n - 1], b.as_slice()[0]), (1.0, 0.0));
            let bytes = arena.as_bytes_mut();
            assert_eq!(bytes.len(), 4 * n + 1);
            assert!(bytes.iter().all(|&v| v == 0));
            bytes[4 * n] = 7;
        }
        for _ in 0..1000 {
            drop(AlignedBuf::zeroed((4 << 20) / 4));
        }
    }

    /// Sizes no allocator can provide are an `Err` naming the bytes, not an abort.
    #[test]
    fn try_zeroed_too_large_is_an_error() {
        // Larger than `isize::MAX` bytes once rounded up to blocks: refused before allocating.
        let n = usize::MAX / 8;
        assert_eq!(
            AlignedBuf::try_zeroed(n).unwrap_err(),
            Error::OutOfMemory { bytes: n * 4 }
        );
        // Bytes that overflow `usize` saturate.
        assert_eq!(
            AlignedBuf::try_zeroed(usize::MAX).unwrap_err(),
            Error::OutOfMemory { bytes: usize::MAX }
        );
    }

    /// A size the address space could hold but no machine has (1 EiB): the allocator itself
    /// refuses. Only on 64-bit hosts: on 32-bit ones every size that passes the layout check is
    /// small enough that an emulator might really provide it.
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn try_zeroed_allocator_failure_is_an_error() {
        let n = 1usize << 58;
        assert_eq!(
            AlignedBuf::try_zeroed(n).unwrap_err(),
            Error::OutOfMemory { bytes: 1 << 60 }
        );
    }

    #[test]
    fn aligned_wrapper_aligns_unsized_bytes() {
        static W: &Aligned<[u8]> = &Aligned([1, 2, 3]);
        assert_eq!(W.0.as_ptr().addr() % 64, 0);
        assert_eq!(&W.0, &[1, 2, 3]);
        assert_eq!(format!("{W:?}"), "Aligned(..)");
    }

    #[test]
    fn arena_f32_aligns_a_misaligned_start() {
        let mut arena = Arena::new(256);
        let bytes = arena.as_bytes_mut();
        // Start 8 bytes past a 64-byte boundary: 56 bytes of padding, 192 left.
        let sub = &mut bytes[8..];
        let f = arena_f32(sub, 192).unwrap();
        assert_eq!(f.len(), 48);
        assert_eq!(f.as_ptr().addr() % 64, 0);
        f[0] = 1.0;
        // The value landed at byte 64 of the original buffer.
        assert_eq!(&arena.as_bytes_mut()[64..68], &1.0f32.to_ne_bytes());
    }

    #[test]
    fn arena_f32_too_small() {
        let mut arena = Arena::new(1000);
        let err = arena_f32(arena.as_bytes_mut(), 4096).unwrap_err();
        assert_eq!(
            err.to_string(),
            "arena: needs 4096 bytes (64-byte aligned), got 1000"
        );
        // 200 bytes starting 8 bytes in: 56 bytes of padding leave 144 < 192.
        let mut arena = Arena::new(208);
        let err = arena_f32(&mut arena.as_bytes_mut()[8..], 192).unwrap_err();
        assert_eq!(
            err,
            Error::ArenaTooSmall {
                needed: 192,
                got: 200,
                padding: 56
            }
        );
        // Fewer bytes than the padding itself.
        let err = arena_f32(&mut arena.as_bytes_mut()[8..40], 64).unwrap_err();
        assert_eq!(
            err,
            Error::ArenaTooSmall {
                needed: 64,
                got: 32,
                padding: 32
            }
        );
    }

    #[test]
    fn arena_f32_zero_size() {
        let mut none: [u8; 0] = [];
        assert_eq!(arena_f32(&mut none, 0).unwrap().len(), 0);
        let mut arena = Arena::new(10);
        assert_eq!(
            arena_f32(&mut arena.as_bytes_mut()[3..], 0).unwrap().len(),
            0
        );
        // A non-empty plan needs bytes.
        assert!(arena_f32(&mut none, 64).is_err());
    }

    #[test]
    fn arena_f32_exact_fit() {
        let mut arena = Arena::new(128);
        let f = arena_f32(arena.as_bytes_mut(), 128).unwrap();
        assert_eq!(f.len(), 32);
    }
}
