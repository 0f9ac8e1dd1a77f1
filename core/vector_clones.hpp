// Internal to core: OPTIMUS_VECTOR_CLONES marks a CPU loop that GCC compiles twice on x86-64, for the build's
// baseline (SSE2, 4 floats a vector) and for AVX2 (8), the program choosing by the CPU it runs on when it loads
// (function multiversioning: target_clones and an ifunc resolver). A build for one machine (OPTIMUS_ARCH=native) needs
// no clones; a generic build, as Debian's or CI's, still runs the hot element-wise loops 8 wide. Clang (14) refuses
// target_clones on function templates, so a clang build runs the baseline loops.
//
// Both clones give the same bits: the same operations in the same order (the AVX2 target has no FMA, and ISO C++ mode,
// -std=c++20 without GNU extensions, does not contract a*b + c anyway); only the vector width differs. Use it on loops
// over contiguous elements whose arithmetic vectorises (element_math.hpp's f32 GELU and dropout's Philox do).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__AVX2__)
#define OPTIMUS_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define OPTIMUS_VECTOR_CLONES
#endif
