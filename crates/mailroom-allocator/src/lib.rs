//! mailroom's global allocator for its binaries (the server and the bench): mimalloc,
//! asked for alignment only when a layout needs more than any block already has.
//!
//! ```
//! #[global_allocator]
//! static ALLOCATOR: mailroom_allocator::Allocator = mailroom_allocator::Allocator;
//!
//! let boxed = Box::new([7u8; 3000]);
//! assert_eq!(boxed[2999], 7);
//! ```
//!
//! `mimalloc::MiMalloc` passes every layout to `mi_malloc_aligned`, even an
//! alignment of 1 or 8. In mimalloc 3 that call keeps to the plain fast path only for a
//! block of at most 1 KiB whose free list happens to be at a fitting address; anything
//! else (a boxed request future of a few KiB, a page with an empty free list) takes the
//! generic path and, unless the size class is a power of two, over-allocates to align.
//! Under callgrind that was about 11 such calls and 2,500 instructions per relaxed
//! publish. mimalloc's size classes are whole words, so every block is 8-aligned, and a
//! block for a multiple of 16 bytes is 16-aligned (see `natural`); those layouts go to
//! `mi_malloc` and `mi_realloc` directly, the rest to the aligned calls as before.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// mimalloc, with plain calls where the alignment comes for free. Install it with
/// `#[global_allocator]` (see the crate's example).
#[derive(Debug, Clone, Copy, Default)]
pub struct Allocator;

/// Whether any block mimalloc hands out for `size` bytes is already aligned to `align`:
/// every size class is a whole number of 8-byte words, and from 16 bytes on every class
/// for a multiple of 16 bytes is an even number of words.
fn natural(size: usize, align: usize) -> bool {
    align <= 8 || (align <= 16 && size.is_multiple_of(16))
}

// SAFETY: every call forwards to mimalloc, which returns memory of at least the asked
// size, aligned as asked by the aligned calls and, by `natural`, by the plain ones;
// `dealloc` and `realloc` get pointers this allocator returned, which mimalloc frees
// and resizes whichever call made them.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        // SAFETY: plain FFI calls; a null answer is the caller's out-of-memory signal.
        unsafe {
            if natural(size, align) {
                mi::mi_malloc(size).cast()
            } else {
                mi::mi_malloc_aligned(size, align).cast()
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        // SAFETY: as in `alloc`.
        unsafe {
            if natural(size, align) {
                mi::mi_zalloc(size).cast()
            } else {
                mi::mi_zalloc_aligned(size, align).cast()
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from mimalloc.
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let ptr = ptr.cast::<c_void>();
        // SAFETY: `ptr` came from this allocator; the new block keeps `layout`'s
        // alignment, by `natural` for the plain call.
        unsafe {
            if natural(new_size, layout.align()) {
                mi::mi_realloc(ptr, new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr, new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An allocation through [`Allocator`] that frees itself.
    struct Block {
        ptr: *mut u8,
        layout: Layout,
    }

    impl Block {
        fn new(layout: Layout, zeroed: bool) -> Block {
            // SAFETY: every layout these tests make has a non-zero size.
            let ptr = unsafe {
                if zeroed {
                    Allocator.alloc_zeroed(layout)
                } else {
                    Allocator.alloc(layout)
                }
            };
            assert!(!ptr.is_null(), "out of memory for {layout:?}");
            Block { ptr, layout }
        }

        fn bytes(&mut self) -> &mut [u8] {
            // SAFETY: the block holds `layout.size()` bytes, written before they are read
            // except by `alloc_zeroed`, which zeroes them.
            unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
        }

        fn resize(&mut self, new_size: usize) {
            // SAFETY: `ptr` is live and came from `Allocator` with `layout`.
            let ptr = unsafe { Allocator.realloc(self.ptr, self.layout, new_size) };
            assert!(!ptr.is_null(), "out of memory growing to {new_size}");
            self.ptr = ptr;
            self.layout = Layout::from_size_align(new_size, self.layout.align()).unwrap();
        }
    }

    impl Drop for Block {
        fn drop(&mut self) {
            // SAFETY: `ptr` is live and came from `Allocator` with `layout`.
            unsafe { Allocator.dealloc(self.ptr, self.layout) }
        }
    }

    /// Sizes in mimalloc's small (to 1 KiB), medium and large classes alike.
    fn sizes() -> impl Strategy<Value = usize> {
        prop_oneof![
            1usize..=128,
            129usize..=1024,
            1025usize..=65_536,
            65_537usize..=600_000
        ]
    }

    fn aligned(block: &Block) -> bool {
        (block.ptr as usize).is_multiple_of(block.layout.align())
    }

    proptest! {
        // Proves every block is aligned as its layout asks, holds what was written
        // (zeroed when asked), and keeps its bytes and alignment through a realloc:
        // for the plain path (`natural`) and the aligned one, across mimalloc's small,
        // medium and large size classes, with neighbours of other sizes alive at once.
        #[test]
        fn blocks_are_aligned_and_keep_their_bytes(
            shapes in prop::collection::vec(
                (sizes(), 0u32..13, sizes(), any::<bool>()),
                1..24,
            ),
        ) {
            let mut blocks = Vec::new();
            for (size, align_log2, new_size, zeroed) in shapes {
                let layout = Layout::from_size_align(size, 1 << align_log2).unwrap();
                let mut block = Block::new(layout, zeroed);
                prop_assert!(aligned(&block), "{layout:?} at {:p}", block.ptr);
                if zeroed {
                    prop_assert!(block.bytes().iter().all(|&byte| byte == 0));
                }
                for (index, byte) in block.bytes().iter_mut().enumerate() {
                    *byte = index as u8;
                }
                block.resize(new_size);
                prop_assert!(aligned(&block), "{:?} at {:p}", block.layout, block.ptr);
                let kept = size.min(new_size);
                prop_assert!(block.bytes()[..kept].iter().enumerate().all(|(i, &b)| b == i as u8));
                blocks.push(block);
            }
        }
    }

    // Proves the plain path is taken only where a word- or 16-byte class guarantees
    // the alignment.
    #[test]
    fn only_naturally_aligned_layouts_take_the_plain_calls() {
        assert!(natural(1, 1) && natural(24, 8) && natural(3000, 8));
        assert!(natural(16, 16) && natural(4096, 16));
        assert!(!natural(24, 16) && !natural(64, 32) && !natural(4096, 4096));
    }
}
