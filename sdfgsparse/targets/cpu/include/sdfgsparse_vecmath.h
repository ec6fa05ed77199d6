// sdfgsparse: vectorised exp and log in the generated loops (glibc's libmvec).
//
// Tasklets call exp / log (DaCe writes np.exp and math.exp as exp; a float argument goes to
// the double function). Without -ffast-math, which this project does not use (it drops
// NaN and infinity semantics), glibc's <math.h> does not tell GCC that vector versions of
// these functions exist, so every call is a scalar libm call and a loop over entries or
// rows cannot be vectorised. Declaring the functions with GCC's simd attribute, as glibc
// itself does under __FAST_MATH__, lets the vectoriser call libmvec's versions
// (_ZGVdN4v_exp for AVX2, _ZGVeN8v_exp for AVX-512, ...), which keep NaN, infinities and
// denormals and are within 4 ulp (glibc's manual; the test compares with libm).
//
// SS_LIBMVEC is defined by the SdfgsparseCPU environment only where it also links libmvec
// (targets/cpu/environment.py: GCC on x86-64 Linux with glibc's libmvec); elsewhere this
// header declares nothing and the calls stay scalar.
#ifndef SDFGSPARSE_VECMATH_H
#define SDFGSPARSE_VECMATH_H

#include <cmath>

#if defined(SS_LIBMVEC) && defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    defined(__GLIBC__) && !defined(__FAST_MATH__)
// (under __FAST_MATH__ glibc declares them itself)
#if __GLIBC_PREREQ(2, 22)
extern "C" double exp(double) noexcept __attribute__((__simd__("notinbranch")));
extern "C" double log(double) noexcept __attribute__((__simd__("notinbranch")));
extern "C" float expf(float) noexcept __attribute__((__simd__("notinbranch")));
extern "C" float logf(float) noexcept __attribute__((__simd__("notinbranch")));
#endif
#if __GLIBC_PREREQ(2, 35)
extern "C" double tanh(double) noexcept __attribute__((__simd__("notinbranch")));
extern "C" float tanhf(float) noexcept __attribute__((__simd__("notinbranch")));
#endif
#endif

#endif  // SDFGSPARSE_VECMATH_H
