// sdfgsparse: the failure counter of the storage checks done inside kernels
// (targets/cpu/kernel_checks.py). A kernel that finds broken storage as it reads it counts
// here; the call plan reads the count through the export before and after the call and
// sends a call whose count moved down the full path, which raises the precise error.
#ifndef SDFGSPARSE_KERNEL_CHECKS_H
#define SDFGSPARSE_KERNEL_CHECKS_H
static unsigned long long __ss_kernel_check_failures = 0;
static inline void __ss_kernel_check_failed() {
    __atomic_fetch_add(&__ss_kernel_check_failures, 1ULL, __ATOMIC_RELAXED);
}
DACE_EXPORTED unsigned long long __ss_kernel_check_failure_count() {
    return __atomic_load_n(&__ss_kernel_check_failures, __ATOMIC_SEQ_CST);
}
#endif  // SDFGSPARSE_KERNEL_CHECKS_H
