// sdfgsparse: what the cpu kernels' tasklets share (targets/cpu/dense_loops.py), made
// known to DaCe by the SdfgsparseCPU environment (targets/cpu/environment.py), which
// every cpu implementation lists.
//
// SS_VECTOR_BYTES: the width of the target's vector registers; the tasklets read whole
// input arrays through ss_in(_tx) (and SpMM writes its row through ss_out(_ty)). DaCe
// passes an array of one element by value (its memlet has volume 1), so A @ x with an
// unannotated x of length 1 did not compile; these give a pointer either way (to the
// tasklet's copy of the one value).
#ifndef SDFGSPARSE_CPU_H
#define SDFGSPARSE_CPU_H

// bytes of the widest vector register of the compile target (-march): the register-blocked
// kernels size their GCC/Clang vectors by it (a 64-byte vector where registers hold 32 keeps
// its halves on the stack: 5-8x slower SpMM on an AVX2 build, docs/performance.md)
#if defined(__AVX512F__)
#define SS_VECTOR_BYTES 64
#elif defined(__AVX__)
#define SS_VECTOR_BYTES 32
#else
#define SS_VECTOR_BYTES 16
#endif
template <typename T> static inline T* ss_in(T* p) { return p; }
template <typename T> static inline const T* ss_in(const T& v) { return &v; }
template <typename T> static inline T* ss_out(T* p) { return p; }
template <typename T> static inline T* ss_out(T& v) { return &v; }  // (written whole, then stored by DaCe)

#include "sdfgsparse_team.h"
#endif  // SDFGSPARSE_CPU_H
