// sdfgsparse: the CUDA leaves of SpMV over a CSR walk, y = A @ x (issue 61's first kernels).
//
// Two kernels, chosen per call by spmv_plan() from the row statistics:
//  - "vector": a group of TPR threads per row (TPR a power of two up to a warp, the mean row
//    length rounded up), the row's entries strided over the group, the partial sums reduced
//    with warp shuffles; one pass, no scratch. For regular matrices (meshes, bands).
//  - "merge": merge-path (Merrill and Garland, SC'16): the rows + nnz items of the merge of
//    the row ends with the entries are cut into equal pieces, ITEMS per thread, each found by
//    a binary search along its diagonal, so that one long row or many empty rows cannot leave
//    a thread with more work than another. A thread writes the rows it finishes and leaves
//    the partial sum of the row it stops inside as a carry (row, value); a second kernel adds
//    the carries. For skewed matrices (power-law graphs).
//
// The arithmetic of both (the plan, the merge-path search, one thread's walk, one row group's
// shuffle reduction in the order the device does it) is host/device code: the CPU tests
// compile this header with g++ and run every thread of a launch in a loop
// (tests/targets/test_gpu_spmv_plan.py), so that what awaits a device is speed, not
// correctness of the partitioning. The kernels themselves compile with nvcc only.
//
// T: float or double (x, y and the values); I: int32_t or int64_t (positions and indices).
#ifndef SDFGSPARSE_CUDA_SPMV_CUH
#define SDFGSPARSE_CUDA_SPMV_CUH
#include <cstdint>

#include "sdfgsparse_cuda.cuh"

namespace sdfgsparse {
namespace cuda {

// threads per block of both kernels (a multiple of the warp: the shuffles use full masks)
constexpr int SPMV_BLOCK = 256;
// merge-path items (row ends + entries) per thread: Merrill and Garland's tuned values are
// 7-9 for double on Kepler-Volta; retune on the device
constexpr int SPMV_ITEMS = 8;
// rows whose longest sampled row is at least SPMV_SKEW times the mean (and above a warp)
// take the merge path: a group of TPR threads would wait on that row
constexpr int SPMV_SKEW = 8;
// rows sampled for the longest row (spread evenly, as the CPU side's regular_rows samples)
constexpr int SPMV_SAMPLE = 64;

enum SpmvKind { SPMV_VECTOR = 0, SPMV_MERGE = 1 };

// One launch: which kernel, its group width (vector) or items per thread (merge), the threads
// and blocks, and the carries the merge path leaves (one per thread). blocks == 0: nothing to
// launch (no rows). error != 0: the launch cannot be expressed (a grid beyond CUDA's limit).
struct SpmvPlan {
    int kind;
    int tpr;              // threads per row (vector)
    int items;            // items per thread (merge)
    long long threads;    // threads that do work
    long long blocks;     // blocks of SPMV_BLOCK threads
    long long carries;    // scratch slots (merge): one row index and one value each
    int error;
};

// the smallest power of two >= v, at most cap (v <= 1: 1)
SS_HD int pow2_at_least(long long v, int cap) {
    int p = 1;
    while (p < cap && p < v) p *= 2;
    return p;
}

// The longest of SPMV_SAMPLE rows spread evenly over the rows (O(1): reads 2 * SPMV_SAMPLE
// positions; host code where pos is in host memory).
template <typename I>
SS_HD long long sampled_longest_row(const I* pos, long long rows) {
    long long longest = 0;
    if (rows <= 0) return 0;
    const long long n = rows < SPMV_SAMPLE ? rows : SPMV_SAMPLE;
    for (long long s = 0; s < n; ++s) {
        const long long r = n > 1 ? (rows - 1) * s / (n - 1) : 0;
        const long long len = (long long)pos[r + 1] - (long long)pos[r];
        longest = len > longest ? len : longest;
    }
    return longest;
}

// The plan of one call: `rows`, `nnz` stored entries, `longest` the longest row known (a
// sample's; -1: unknown, then only the mean decides).
SS_HD SpmvPlan spmv_plan(long long rows, long long nnz, long long longest) {
    SpmvPlan p = {SPMV_VECTOR, 1, SPMV_ITEMS, 0, 0, 0, 0};
    if (rows <= 0) return p;
    const long long mean = (nnz + rows - 1) / rows;  // rounded up
    const bool skewed = longest > 32 && longest >= (long long)SPMV_SKEW * (mean > 1 ? mean : 1);
    // (a mean above a warp: a group of 32 walks each row several times; the merge path's
    // pieces are as long whatever the rows)
    if (skewed || mean > 4 * 32) {
        p.kind = SPMV_MERGE;
        const long long items = rows + nnz;
        p.threads = (items + SPMV_ITEMS - 1) / SPMV_ITEMS;
        p.carries = p.threads;
    } else {
        p.tpr = pow2_at_least(mean, 32);
        p.threads = rows * p.tpr;
    }
    p.blocks = (p.threads + SPMV_BLOCK - 1) / SPMV_BLOCK;
    if (p.blocks > 2147483647LL) p.error = 1;  // gridDim.x's limit
    return p;
}

// The merge-path coordinate of diagonal d: (row, entry) with row + entry == d, where the walk
// has consumed `row` row ends and `entry` entries. row_ends[r] = pos[r + 1] (the end of row r).
struct MergeCoord {
    long long row, entry;
};
template <typename I>
SS_HD MergeCoord merge_path_search(long long d, const I* row_ends, long long rows, long long nnz) {
    long long lo = d > nnz ? d - nnz : 0;
    long long hi = d < rows ? d : rows;
    while (lo < hi) {
        const long long mid = lo + (hi - lo) / 2;
        // row end `mid` comes before entry d - mid - 1 on the path iff it is <= that entry
        if ((long long)row_ends[mid] <= d - mid - 1) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    MergeCoord c = {lo, d - lo};
    return c;
}

// One thread's piece of the merge path: items [t * items, (t + 1) * items) of rows + nnz.
// Writes y[r] (the thread's own part of r) for each row r it finishes, and returns its carry:
// the partial sum of the row it stops inside (carry_row == rows: none). Every row is finished
// by exactly one thread; carries are added after all threads ran (spmv_merge_fixup).
template <typename T, typename I>
SS_HD void spmv_merge_thread(long long t, int items, long long rows, long long nnz, const I* pos, const I* crd,
                             const T* vals, const T* x, T* y, int64_t* carry_row, T* carry_value) {
    const long long total = rows + nnz;
    long long d0 = t * (long long)items;
    long long d1 = d0 + items;
    d0 = d0 < total ? d0 : total;
    d1 = d1 < total ? d1 : total;
    const MergeCoord a = merge_path_search(d0, pos + 1, rows, nnz);
    const MergeCoord b = merge_path_search(d1, pos + 1, rows, nnz);
    long long e = a.entry;
    T sum = 0;
    for (long long r = a.row; r < b.row; ++r) {  // rows this thread finishes
        const long long end = (long long)pos[r + 1];
        for (; e < end; ++e) sum += vals[e] * x[crd[e]];
        y[r] = sum;
        sum = 0;
    }
    for (; e < b.entry; ++e) sum += vals[e] * x[crd[e]];  // the row it stops inside
    carry_row[t] = b.row;
    carry_value[t] = sum;
}

// One thread of the carries' pass: adds thread t's carry to its row (atomically: a row that
// spans several threads gets a carry from each). On the host (a GPU SDFG run with CPU
// schedules, lower.with_cpu_schedules) an OpenMP atomic.
template <typename T>
SS_HD void spmv_merge_fixup_thread(long long t, long long rows, const int64_t* carry_row, const T* carry_value,
                                   T* y) {
    const long long r = carry_row[t];
    if (r >= rows) return;
#if defined(__CUDA_ARCH__)
    atomicAdd(y + r, carry_value[t]);
#elif defined(_OPENMP)
    _Pragma("omp atomic") y[r] += carry_value[t];
#else
    y[r] += carry_value[t];
#endif
}

// The sum one group of TPR threads computes for a row: lane l adds entries lo + l, lo + l +
// TPR, ...; then shuffle-down halving (lane l += lane l + off, off = TPR / 2 ... 1): lane 0's
// value, in the device's order of additions (the host emulation of spmv_vector_kernel's row).
template <int TPR, typename T, typename I>
SS_HD T spmv_vector_row_host(const I* crd, const T* vals, const T* x, long long lo, long long hi) {
    T lane[TPR];
    for (int l = 0; l < TPR; ++l) {
        T s = 0;
        for (long long p = lo + l; p < hi; p += TPR) s += vals[p] * x[crd[p]];
        lane[l] = s;
    }
    for (int off = TPR / 2; off > 0; off /= 2)
        for (int l = 0; l < off; ++l) lane[l] += lane[l + off];
    return lane[0];
}

#if defined(__CUDACC__)
template <int TPR, typename T, typename I>
__global__ void __launch_bounds__(SPMV_BLOCK) spmv_vector_kernel(long long rows, const I* __restrict__ pos,
                                                                 const I* __restrict__ crd,
                                                                 const T* __restrict__ vals,
                                                                 const T* __restrict__ x, T* __restrict__ y) {
    const long long g = (long long)blockIdx.x * SPMV_BLOCK + threadIdx.x;
    const long long row = g / TPR;
    const int lane = (int)(g % TPR);
    T sum = 0;
    if (row < rows) {
        const long long hi = (long long)pos[row + 1];
        for (long long p = (long long)pos[row] + lane; p < hi; p += TPR) sum += vals[p] * __ldg(x + crd[p]);
    }
    // every thread of the warp reaches the shuffles (the block is a multiple of the warp)
    for (int off = TPR / 2; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffffu, sum, off, TPR);
    if (row < rows && lane == 0) y[row] = sum;
}

template <typename T, typename I>
__global__ void __launch_bounds__(SPMV_BLOCK) spmv_merge_kernel(long long threads, int items, long long rows,
                                                                long long nnz, const I* __restrict__ pos,
                                                                const I* __restrict__ crd,
                                                                const T* __restrict__ vals,
                                                                const T* __restrict__ x, T* __restrict__ y,
                                                                int64_t* __restrict__ carry_row,
                                                                T* __restrict__ carry_value) {
    const long long t = (long long)blockIdx.x * SPMV_BLOCK + threadIdx.x;
    if (t < threads) spmv_merge_thread(t, items, rows, nnz, pos, crd, vals, x, y, carry_row, carry_value);
}

template <typename T>
__global__ void __launch_bounds__(SPMV_BLOCK) spmv_merge_fixup(long long threads, long long rows,
                                                               const int64_t* __restrict__ carry_row,
                                                               const T* __restrict__ carry_value, T* y) {
    const long long t = (long long)blockIdx.x * SPMV_BLOCK + threadIdx.x;
    if (t < threads) spmv_merge_fixup_thread(t, rows, carry_row, carry_value, y);
}

// Launch `plan` on `stream`: y = A @ x, every pointer in device memory; the merge path needs
// plan.carries slots of carry_row and carry_value. Returns cudaSuccess or the launch's error.
template <typename T, typename I>
cudaError_t spmv_launch(const SpmvPlan& plan, long long rows, long long nnz, const I* pos, const I* crd,
                        const T* vals, const T* x, T* y, int64_t* carry_row, T* carry_value,
                        cudaStream_t stream) {
    if (plan.error) return cudaErrorInvalidConfiguration;
    if (plan.blocks == 0) return cudaSuccess;
    const dim3 grid((unsigned)plan.blocks), block(SPMV_BLOCK);
    if (plan.kind == SPMV_MERGE) {
        spmv_merge_kernel<T, I><<<grid, block, 0, stream>>>(plan.threads, plan.items, rows, nnz, pos, crd, vals, x,
                                                             y, carry_row, carry_value);
        spmv_merge_fixup<T><<<grid, block, 0, stream>>>(plan.threads, rows, carry_row, carry_value, y);
    } else {
        switch (plan.tpr) {
#define SS_SPMV_TPR(W) \
    case W: spmv_vector_kernel<W, T, I><<<grid, block, 0, stream>>>(rows, pos, crd, vals, x, y); break;
            SS_SPMV_TPR(1) SS_SPMV_TPR(2) SS_SPMV_TPR(4) SS_SPMV_TPR(8) SS_SPMV_TPR(16) SS_SPMV_TPR(32)
#undef SS_SPMV_TPR
            default: return cudaErrorInvalidConfiguration;
        }
    }
    return cudaGetLastError();
}
#endif  // __CUDACC__

}  // namespace cuda
}  // namespace sdfgsparse

#endif  // SDFGSPARSE_CUDA_SPMV_CUH
