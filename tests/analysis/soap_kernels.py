"""Dense kernels written with explicit maps and loops (Polybench-style), shared by the tests.

Sizes are DaCe symbols so ``to_sdfg()`` needs no arguments. The kernels keep the loop
structure of Polybench without the scalar ``alpha``/``beta`` factors, which do not change
the iteration domain or the access functions.
"""
import dace

N, M, K, T = (dace.symbol(s) for s in 'NMKT')
NI, NJ, NK, NL, NM = (dace.symbol(s) for s in ('NI', 'NJ', 'NK', 'NL', 'NM'))
NP, NQ, NR = (dace.symbol(s) for s in ('NP', 'NQ', 'NR'))


@dace.program
def gemm(A: dace.float64[N, K], B: dace.float64[K, M], C: dace.float64[N, M]):
    for i, j, k in dace.map[0:N, 0:M, 0:K]:
        C[i, j] += A[i, k] * B[k, j]


@dace.program
def gemm_loops(A: dace.float64[N, K], B: dace.float64[K, M], C: dace.float64[N, M]):
    for i in range(N):
        for j in range(M):
            for k in range(K):
                C[i, j] += A[i, k] * B[k, j]


@dace.program
def gemm_nested(A: dace.float64[N, K], B: dace.float64[K, M], C: dace.float64[N, M]):
    for i, j in dace.map[0:N, 0:M]:
        for k in range(K):
            C[i, j] += A[i, k] * B[k, j]


@dace.program
def gemm_lib(A: dace.float64[N, K], B: dace.float64[K, M], C: dace.float64[N, M]):
    C[:] = A @ B


@dace.program
def k2mm(A: dace.float64[NI, NK], B: dace.float64[NK, NJ], C: dace.float64[NJ, NL], D: dace.float64[NI, NL],
         tmp: dace.float64[NI, NJ]):
    for i, j, k in dace.map[0:NI, 0:NJ, 0:NK]:
        tmp[i, j] += A[i, k] * B[k, j]
    for i, l, j in dace.map[0:NI, 0:NL, 0:NJ]:
        D[i, l] += tmp[i, j] * C[j, l]


@dace.program
def k3mm(A: dace.float64[NI, NK], B: dace.float64[NK, NJ], C: dace.float64[NJ, NM], D: dace.float64[NM, NL],
         E: dace.float64[NI, NJ], F: dace.float64[NJ, NL], G: dace.float64[NI, NL]):
    for i, j, k in dace.map[0:NI, 0:NJ, 0:NK]:
        E[i, j] += A[i, k] * B[k, j]
    for i, j, k in dace.map[0:NJ, 0:NL, 0:NM]:
        F[i, j] += C[i, k] * D[k, j]
    for i, j, k in dace.map[0:NI, 0:NL, 0:NJ]:
        G[i, j] += E[i, k] * F[k, j]


@dace.program
def doitgen(A: dace.float64[NR, NQ, NP], C4: dace.float64[NP, NP], out: dace.float64[NR, NQ, NP]):
    for r, q, p, s in dace.map[0:NR, 0:NQ, 0:NP, 0:NP]:
        out[r, q, p] += A[r, q, s] * C4[s, p]


@dace.program
def syrk(A: dace.float64[N, M], C: dace.float64[N, N]):
    for i in dace.map[0:N]:
        for j, k in dace.map[0:i + 1, 0:M]:
            C[i, j] += A[i, k] * A[j, k]


@dace.program
def syr2k(A: dace.float64[N, M], B: dace.float64[N, M], C: dace.float64[N, N]):
    for i in dace.map[0:N]:
        for j, k in dace.map[0:i + 1, 0:M]:
            C[i, j] += A[j, k] * B[i, k] + B[j, k] * A[i, k]


@dace.program
def cholesky(A: dace.float64[N, N]):
    for k in range(N):
        A[k, k] = dace.sqrt(A[k, k])
        for i in dace.map[k + 1:N]:
            A[i, k] /= A[k, k]
        for i in dace.map[k + 1:N]:
            for j in dace.map[k + 1:i + 1]:
                A[i, j] -= A[i, k] * A[j, k]


@dace.program
def lu(A: dace.float64[N, N]):
    for k in range(N):
        for i in dace.map[k + 1:N]:
            A[i, k] /= A[k, k]
        for i, j in dace.map[k + 1:N, k + 1:N]:
            A[i, j] -= A[i, k] * A[k, j]


@dace.program
def atax(A: dace.float64[M, N], x: dace.float64[N], y: dace.float64[N], tmp: dace.float64[M]):
    for i, j in dace.map[0:M, 0:N]:
        tmp[i] += A[i, j] * x[j]
    for i, j in dace.map[0:M, 0:N]:
        y[j] += A[i, j] * tmp[i]


@dace.program
def bicg(A: dace.float64[N, M], p: dace.float64[M], r: dace.float64[N], q: dace.float64[N], s: dace.float64[M]):
    for i, j in dace.map[0:N, 0:M]:
        s[j] += r[i] * A[i, j]
        q[i] += A[i, j] * p[j]


@dace.program
def mvt(A: dace.float64[N, N], x1: dace.float64[N], x2: dace.float64[N], y1: dace.float64[N], y2: dace.float64[N]):
    for i, j in dace.map[0:N, 0:N]:
        x1[i] += A[i, j] * y1[j]
    for i, j in dace.map[0:N, 0:N]:
        x2[i] += A[j, i] * y2[j]


@dace.program
def gesummv(A: dace.float64[N, N], B: dace.float64[N, N], x: dace.float64[N], tmp: dace.float64[N],
            y: dace.float64[N]):
    for i, j in dace.map[0:N, 0:N]:
        tmp[i] += A[i, j] * x[j]
        y[i] += B[i, j] * x[j]


@dace.program
def jacobi1d(A: dace.float64[N], B: dace.float64[N]):
    for t in range(T):
        for i in dace.map[1:N - 1]:
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])
        for i in dace.map[1:N - 1]:
            A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])


@dace.program
def jacobi2d(A: dace.float64[N, N], B: dace.float64[N, N]):
    for t in range(T):
        for i, j in dace.map[1:N - 1, 1:N - 1]:
            B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i + 1, j] + A[i - 1, j])
        for i, j in dace.map[1:N - 1, 1:N - 1]:
            A[i, j] = 0.2 * (B[i, j] + B[i, j - 1] + B[i, j + 1] + B[i + 1, j] + B[i - 1, j])


@dace.program
def seidel1d(A: dace.float64[N]):
    for t in range(T):
        for i in range(1, N - 1):
            A[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])
