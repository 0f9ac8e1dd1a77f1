// How the host's allocator treats the tensors a training step frees. glibc's malloc hands large blocks back to the
// kernel when they are freed (blocks of 128 KiB to 32 MiB and more are mapped and unmapped on their own, and a
// thread's arena unmaps its 64 MiB heaps once they are empty), so a step that frees its activations and allocates
// them again pays a page fault per 4 KiB page and the kernel zeroes every page: 66 000 faults per step of
// optimus-bench gpt at b 4, s 256, h 512, vocabulary 8192, about 13% of its time. retain_freed_host_memory() asks glibc
// to keep them: no block is mapped on its own, every thread allocates from the one main heap, and up to 1 GiB of freed
// memory stays there for the next step (peak resident memory stays what the step needs; it is not returned between
// steps). The threads' allocations then share one lock, which a step's few thousand tensors do not notice.
//
// Process-wide, so a program decides: call it first thing in main (optimus-bench and train_gpt do).
// Returns false where it does nothing (a C library other than glibc, or a sanitizer's allocator in its place).
#pragma once

namespace optimus {

bool retain_freed_host_memory();

}  // namespace optimus
