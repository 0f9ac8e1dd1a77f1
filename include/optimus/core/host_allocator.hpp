// How the host's allocator treats the tensors a training step frees. glibc's malloc hands blocks of 128 KiB and more
// back to the kernel when they are freed (each is mapped and unmapped on its own, and a thread's heap is trimmed), so a
// step that frees its activations and allocates them again pays a page fault per 4 KiB page and the kernel zeroes
// every page: 5-10% of a CPU block step at b 4, s 256, h 512 (optimus-bench layer). retain_freed_host_memory() asks
// glibc to keep them: blocks up to 32 MiB (its largest setting) come from the heaps, and freed memory stays there for
// the next step (peak resident memory stays what the step needs; it is not returned between steps).
//
// Process-wide, so a program decides: call it first thing in main (optimus-bench and train_gpt do).
// Returns false where it does nothing (a C library other than glibc).
#pragma once

namespace optimus {

bool retain_freed_host_memory();

}  // namespace optimus
