// RINGTRAIN_VECTOR_CLONES: compile a hot loop once per vector ISA (AVX-512F, AVX2, the
// x86-64 baseline) and let the loader pick the one the CPU runs (GCC function multiversioning,
// an ifunc resolved once at start-up). The portable build runs at native speed in these loops
// while the same binary still starts on a CPU without AVX. Only for loops whose every
// element is one correctly rounded operation (an add, a multiply, a sqrt): the clones then
// give bit-identical results, so ranks on different CPUs stay in step. A -march=native build
// (RINGTRAIN_NATIVE) needs no clones; a ThreadSanitizer build cannot have them
// (RINGTRAIN_NO_VECTOR_CLONES, see CMakeLists.txt).
//
// RINGTRAIN_STREAM_CLONES: AVX2 and the baseline only, for loops that stream several
// buffers of a few MB through memory (the optimizer's updates). On the Zen 5 build machine
// their AVX-512 clones were the slowest once the buffers came from memory: per-step LARS
// updates of mlp took 1.08 ms (p10) against 0.90 with AVX2 and 0.92 with SSE, and a
// 46 MB SGD loop 0.53 ns a float against 0.47 (AVX2) and 0.48 (SSE).
#pragma once

#if defined(RINGTRAIN_NATIVE) || defined(RINGTRAIN_NO_VECTOR_CLONES) || !defined(__x86_64__)
#define RINGTRAIN_VECTOR_CLONES
#define RINGTRAIN_STREAM_CLONES
#else
#define RINGTRAIN_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#if defined(__clang__)
// Clang cannot multiversion function templates (SGD's loops are templates); ringtrain's only
// clang build is the fuzzers', which needs the same bits, not the speed.
#define RINGTRAIN_STREAM_CLONES
#else
#define RINGTRAIN_STREAM_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
