//! Inference allocates nothing: a counting global allocator watches `run` and `run_in`.
//!
//! The count is process-wide (any thread inference uses is counted), so this binary has no
//! test harness (`harness = false` in `Cargo.toml`): libtest's main thread allocates for its
//! own bookkeeping while a test runs, which made the count flaky. `main` runs the check.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use kiln_tests::{golden, Block, Blocked, DeepWide, LeNet, Wino};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts them.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above, for `dealloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: as above, for `realloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    f();
    ALLOCATIONS.load(Ordering::SeqCst) - before
}

fn main() {
    inference_does_not_allocate();
    println!("inference_does_not_allocate ... ok");
}

fn inference_does_not_allocate() {
    let block_io = golden("block");
    let lenet_io = golden("lenet");

    // The counter must see allocations at all, or a zero below would prove nothing.
    assert!(allocations_during(|| drop(std::hint::black_box(vec![1u8; 10]))) > 0);

    // Embedded weights were prepared at compile time and are read in place: `new` allocates
    // the arena and nothing else (no parameter buffer). The ISA is chosen once per process
    // first (reading `KILN_ISA` allocates).
    let _ = kiln::isa();
    let mut block = None;
    let n = allocations_during(|| block = Some(Block::new()));
    assert_eq!(n, 1, "Block::new allocated {n} times");
    let mut block = block.unwrap();
    let lenet = LeNet::new();
    let mut arena = kiln::Arena::new(LeNet::ARENA_BYTES);

    let n = allocations_during(|| {
        for _ in 0..3 {
            let y = block.run(&block_io.x).unwrap();
            std::hint::black_box(y.as_slice());
        }
    });
    assert_eq!(n, 0, "Block::run allocated {n} times");
    let n = allocations_during(|| {
        let y = lenet.run_in(arena.as_bytes_mut(), &lenet_io.x).unwrap();
        std::hint::black_box(y.as_slice());
    });
    assert_eq!(n, 0, "LeNet::run_in allocated {n} times");

    // Winograd layers: their scratch is the arena's, their filters were transformed in `new`.
    let wino_io = golden("wino");
    let mut wino = Wino::new();
    let n = allocations_during(|| {
        let y = wino.run(&wino_io.x).unwrap();
        std::hint::black_box(y.as_slice());
    });
    assert_eq!(n, 0, "Wino::run allocated {n} times");

    // The blocked layout's plan (where the table takes it: AVX-512, or `KILN_LAYOUT=blocked`,
    // as CI runs this file on every ISA): conversions go through the arena's scratch.
    let blocked_io = golden("blocked");
    let mut blocked = Blocked::new();
    let n = allocations_during(|| {
        let y = blocked.run(&blocked_io.x).unwrap();
        std::hint::black_box(y.as_slice());
    });
    assert_eq!(n, 0, "Blocked::run allocated {n} times");
    blocked.set_threads(2).unwrap();
    let n = allocations_during(|| {
        for _ in 0..3 {
            let y = blocked.run(&blocked_io.x).unwrap();
            std::hint::black_box(y.as_slice());
        }
    });
    assert_eq!(n, 0, "Blocked::run on two threads allocated {n} times");

    // Two threads: the workers are spawned by `set_threads` (which allocates); runs, on this
    // thread and on the workers (the allocator counts every thread), allocate nothing, from
    // the first one on. `DeepWide` splits pointwise, im2col and grouped convolutions, `Wino`
    // its Winograd layers.
    wino.set_threads(2).unwrap();
    let n = allocations_during(|| {
        for _ in 0..3 {
            let y = wino.run(&wino_io.x).unwrap();
            std::hint::black_box(y.as_slice());
        }
    });
    assert_eq!(n, 0, "Wino::run on two threads allocated {n} times");
    let mut wide = DeepWide::new();
    wide.set_threads(2).unwrap();
    let x = vec![0.5f32; 8 * 112 * 112];
    let n = allocations_during(|| {
        for _ in 0..3 {
            let y = wide.run(&x).unwrap();
            std::hint::black_box(y.as_slice());
        }
    });
    assert_eq!(n, 0, "DeepWide::run on two threads allocated {n} times");
}
