//! Heap memory for kernels' intermediate buffers (`tessera_alloc` /
//! `tessera_free`), cached per thread as TVM's `WorkspacePool` does.
//!
//! A kernel allocates its root-level intermediates (a padded input, a
//! packed panel, an accumulator too large for the stack) on every call and
//! frees them before it returns. Handing those blocks back to the system
//! allocator makes the next call fault every page in again — for a
//! depthwise convolution inside a model that was half its time. So freed
//! blocks stay with the thread that freed them and the next request takes
//! the smallest one that fits; when none fits, the largest cached block is
//! given back and a new one made. A thread keeps at most
//! [`MAX_CACHED_BLOCKS`] free blocks of at most [`MAX_CACHED_BYTES`] in all.

use std::alloc::Layout;
use std::cell::RefCell;

/// Blocks are 64-byte aligned, as [`NdBuffer`](super::NdBuffer)s are.
const ALIGN: usize = 64;
/// Room in front of a block for its capacity.
const HEADER: usize = ALIGN;
/// Capacities are whole pages, so near sizes share blocks.
const PAGE: usize = 4096;
/// Most free blocks one thread keeps.
pub const MAX_CACHED_BLOCKS: usize = 8;
/// Most bytes of free blocks one thread keeps; a larger free goes back at once.
pub const MAX_CACHED_BYTES: usize = 1 << 30;

/// One block from the system allocator: `raw` is the start of its
/// allocation, `capacity` its size with the header.
struct Block {
    raw: *mut u8,
    capacity: usize,
}

impl Block {
    fn layout(capacity: usize) -> Option<Layout> {
        Layout::from_size_align(capacity, ALIGN).ok()
    }

    fn new(capacity: usize) -> Option<Block> {
        let layout = Block::layout(capacity)?;
        // SAFETY: the layout's size is at least HEADER, never zero.
        let raw = unsafe { std::alloc::alloc(layout) };
        (!raw.is_null()).then_some(Block { raw, capacity })
    }

    /// The kernel's pointer, with the capacity written in front of it.
    fn hand_out(self) -> *mut u8 {
        // SAFETY: the block has HEADER bytes in front of the kernel's part.
        unsafe {
            self.raw.cast::<usize>().write(self.capacity);
            self.raw.add(HEADER)
        }
    }

    /// The block behind a pointer [`hand_out`](Self::hand_out) returned.
    ///
    /// # Safety
    /// `ptr` came from `hand_out` and has not been taken back since.
    unsafe fn take_back(ptr: *mut u8) -> Block {
        // SAFETY: as promised by the caller.
        unsafe {
            let raw = ptr.sub(HEADER);
            Block {
                raw,
                capacity: raw.cast::<usize>().read(),
            }
        }
    }

    fn release(self) {
        if let Some(layout) = Block::layout(self.capacity) {
            // SAFETY: allocated by `Block::new` with this layout.
            unsafe { std::alloc::dealloc(self.raw, layout) };
        }
    }
}

/// One thread's free blocks, smallest first.
#[derive(Default)]
struct Pool {
    free: Vec<Block>,
}

impl Pool {
    fn cached_bytes(&self) -> usize {
        self.free.iter().map(|b| b.capacity).sum()
    }

    fn take(&mut self, capacity: usize) -> Option<Block> {
        if let Some(i) = self.free.iter().position(|b| b.capacity >= capacity) {
            return Some(self.free.remove(i));
        }
        if let Some(largest) = self.free.pop() {
            largest.release();
        }
        Block::new(capacity)
    }

    fn give(&mut self, block: Block) {
        if block.capacity + self.cached_bytes() > MAX_CACHED_BYTES {
            return block.release();
        }
        let at = self.free.partition_point(|b| b.capacity < block.capacity);
        self.free.insert(at, block);
        if self.free.len() > MAX_CACHED_BLOCKS {
            self.free.remove(0).release();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for block in self.free.drain(..) {
            block.release();
        }
    }
}

thread_local! {
    static POOL: RefCell<Pool> = RefCell::new(Pool::default());
}

fn capacity_for(bytes: i64) -> Option<usize> {
    let bytes = usize::try_from(bytes.max(0)).ok()?;
    bytes.checked_add(HEADER)?.checked_next_multiple_of(PAGE)
}

/// Heap memory for buffers too large for the stack: 64-byte aligned, null
/// when out of memory. Reuses a block this thread freed when one fits.
pub extern "C" fn tessera_alloc(bytes: i64) -> *mut u8 {
    let Some(capacity) = capacity_for(bytes) else {
        return std::ptr::null_mut();
    };
    let block = POOL
        .try_with(|pool| pool.borrow_mut().take(capacity))
        .unwrap_or_else(|_| Block::new(capacity));
    block.map_or(std::ptr::null_mut(), Block::hand_out)
}

/// Frees memory from [`tessera_alloc`] (into this thread's cache).
///
/// # Safety
/// `ptr` must be null or come from [`tessera_alloc`], and not be freed twice.
pub unsafe extern "C" fn tessera_free(ptr: *mut u8) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: as promised by the caller.
    let mut block = Some(unsafe { Block::take_back(ptr) });
    // A thread whose pool is already gone (it is exiting) releases the block.
    let _ = POOL.try_with(|pool| block.take().map(|b| pool.borrow_mut().give(b)));
    if let Some(b) = block {
        b.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn free(ptr: *mut u8) {
        // SAFETY: every pointer freed here came from tessera_alloc, once.
        unsafe { tessera_free(ptr) }
    }

    #[test]
    fn blocks_are_aligned_writable_and_reused_by_the_same_size() {
        let a = tessera_alloc(3 << 20);
        assert!(!a.is_null());
        assert_eq!(a as usize % ALIGN, 0);
        // SAFETY: 3 MiB were asked for.
        unsafe { std::ptr::write_bytes(a, 0x5a, 3 << 20) };
        free(a);
        let b = tessera_alloc(3 << 20);
        assert_eq!(a, b, "a freed block of the same size is taken again");
        free(b);
    }

    #[test]
    fn the_smallest_block_that_fits_is_taken_and_a_larger_request_gets_a_new_one() {
        std::thread::spawn(|| {
            let (small, large) = (tessera_alloc(10_000), tessera_alloc(1_000_000));
            free(small);
            free(large);
            assert_eq!(tessera_alloc(9_000), small);
            assert_eq!(tessera_alloc(500_000), large);
            // Nothing cached fits: a new block, never one still in use.
            let bigger = tessera_alloc(2_000_000);
            assert!(bigger != small && bigger != large && !bigger.is_null());
            for p in [small, large, bigger] {
                free(p);
            }
            POOL.with(|p| assert_eq!(p.borrow().free.len(), 3));
        })
        .join()
        .expect("the pool thread");
    }

    #[test]
    fn a_thread_keeps_a_bounded_number_of_blocks() {
        std::thread::spawn(|| {
            let blocks: Vec<_> = (1..=20).map(|i| tessera_alloc(i * 8192)).collect();
            assert!(blocks.iter().all(|p| !p.is_null()));
            blocks.into_iter().for_each(free);
            POOL.with(|p| {
                let pool = p.borrow();
                assert_eq!(pool.free.len(), MAX_CACHED_BLOCKS);
                // The largest are kept: the next large request needs no new pages.
                assert!(pool.free.windows(2).all(|w| w[0].capacity <= w[1].capacity));
                assert!(pool.free[0].capacity >= 13 * 8192);
            });
        })
        .join()
        .expect("the pool thread");
    }

    #[test]
    fn zero_and_negative_sizes_get_a_block_and_null_frees_nothing() {
        let zero = tessera_alloc(0);
        let negative = tessera_alloc(-5);
        assert!(!zero.is_null() && !negative.is_null());
        free(zero);
        free(negative);
        free(std::ptr::null_mut());
        assert!(
            tessera_alloc(i64::MAX).is_null(),
            "an impossible size is null"
        );
    }
}
