"""Streaming CSR SpMM / SpMV on DaCe 1.0.2's Xilinx backend, built with the SDFG API and
checked as a g++ C-simulation (sdfgsparse.targets.fpga.csim.compile_csim) against scipy.

    Y[M, K] = A[M, N] @ X[N, K]      A in CSR (pos int32[M+1], crd int32[NNZ], vals float32[NNZ])

One FPGA kernel state with four processing elements (PEs) connected by FIFOs:

    fpga_pos --[read_rows]--> len_s (int32)                       \
    fpga_vals, fpga_crd --[read_entries]--> val_s (f32), crd_s (i32) --[compute]--> out_s (vec<W>) --[write_y]--> fpga_Y
    fpga_X (vec<W>[N, K/W], random access by the compute PE)       /

compute: for i in rows:  L = len_s.pop(); acc[0:K/W] = 0            (acc: FPGA_Registers, unrolled)
                         for j in 0:L (dynamic-range map, pipelined): v, c = val_s.pop(), crd_s.pop()
                                                                      acc[kb] += v * X[c, kb]  (kb unrolled)
                         for kb in 0:K/W (pipelined): out_s.push(acc[kb])

Host arrays are copied to FPGA-global twins (fpga_*) in a pre state and Y back in a post
state, as sdfgsparse.targets.fpga.lower.kernel_states does. X and Y are float32 on the host
and dace.vector(float32, W) on the device (DaCe's host<->device copy casts and divides the
last extent by W). M, N, NNZ are symbols; W and K are build-time constants (the register
accumulator needs a constant size K/W).

Usage:  python spmm_stream.py            (all cases; prints PASS/FAIL per case)
        python spmm_stream.py --codegen  (only writes the generated code of W=4, K=16 to ./gen)
Every run of a simulation should be under `timeout`: a deadlocked design hangs forever.
"""
import os
import sys
import time

os.environ.setdefault('DACE_cache', 'hash')

import dace  # noqa: E402
import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from dace import dtypes  # noqa: E402
from dace.memlet import Memlet  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(HERE, 'cache')

FPGA_Global, FPGA_Local, FPGA_Registers = (dtypes.StorageType.FPGA_Global, dtypes.StorageType.FPGA_Local,
                                           dtypes.StorageType.FPGA_Registers)
FPGA_Device = dtypes.ScheduleType.FPGA_Device
M, N, NNZ = (dace.symbol(s, dace.int32) for s in ('M', 'N', 'NNZ'))


def vtype(W: int):
    # dace::vec<float, 1> is plain float in the runtime; use the scalar type for W == 1
    return dace.float32 if W == 1 else dace.vector(dace.float32, W)


def build_sdfg(W: int, K: int, depth: int = 8) -> dace.SDFG:
    assert K % W == 0
    KB = K // W
    vt = vtype(W)
    sdfg = dace.SDFG(f'spmm_stream_w{W}_k{K}')

    # ---- host arguments and their FPGA-global twins ------------------------------------
    host = {'pos': ([M + 1], dace.int32), 'crd': ([NNZ], dace.int32), 'vals': ([NNZ], dace.float32),
            'X': ([N, K], dace.float32), 'Y': ([M, K], dace.float32)}
    dev = {'pos': ([M + 1], dace.int32), 'crd': ([NNZ], dace.int32), 'vals': ([NNZ], dace.float32),
           'X': ([N, KB], vt), 'Y': ([M, KB], vt)}
    for name, (shape, dt) in host.items():
        sdfg.add_array(name, shape, dt)
        sdfg.add_array('fpga_' + name, dev[name][0], dev[name][1], transient=True, storage=FPGA_Global)

    # FIFOs between the PEs (FPGA_Local streams, transient)
    sdfg.add_stream('len_s', dace.int32, buffer_size=depth, transient=True, storage=FPGA_Local)
    sdfg.add_stream('val_s', dace.float32, buffer_size=depth, transient=True, storage=FPGA_Local)
    sdfg.add_stream('crd_s', dace.int32, buffer_size=depth, transient=True, storage=FPGA_Local)
    sdfg.add_stream('out_s', vt, buffer_size=depth, transient=True, storage=FPGA_Local)
    # registers of the compute PE (allocated inside its row scope)
    sdfg.add_scalar('rlen', dace.int32, transient=True, storage=FPGA_Registers)
    sdfg.add_scalar('v_reg', dace.float32, transient=True, storage=FPGA_Registers)
    sdfg.add_scalar('c_reg', dace.int32, transient=True, storage=FPGA_Registers)
    sdfg.add_array('acc', [KB], vt, transient=True, storage=FPGA_Registers)

    # ---- pre / kernel / post states ------------------------------------------------------
    pre = sdfg.add_state('pre_copy', is_start_block=True)
    st = sdfg.add_state('spmm_kernel')
    post = sdfg.add_state('post_copy')
    sdfg.add_edge(pre, st, dace.InterstateEdge())
    sdfg.add_edge(st, post, dace.InterstateEdge())
    for name in ('pos', 'crd', 'vals', 'X'):
        # the memlet names the host array: for X DaCe casts the pointer and copies N*K/W vectors
        pre.add_nedge(pre.add_read(name), pre.add_write('fpga_' + name),
                      Memlet.from_array(name, sdfg.arrays[name]))
    post.add_nedge(post.add_read('fpga_Y'), post.add_write('Y'), Memlet.from_array('Y', sdfg.arrays['Y']))

    # ---- PE 1: row lengths -------------------------------------------------------------
    me, mx = st.add_map('read_rows', {'i': '0:M'}, schedule=FPGA_Device)
    t = st.add_tasklet('row_len', {'b', 'e'}, {'l'}, 'l = e - b')
    pos_r = st.add_read('fpga_pos')
    st.add_memlet_path(pos_r, me, t, dst_conn='b', memlet=Memlet('fpga_pos[i]'))
    st.add_memlet_path(pos_r, me, t, dst_conn='e', memlet=Memlet('fpga_pos[i + 1]'))
    st.add_memlet_path(t, mx, st.add_write('len_s'), src_conn='l', memlet=Memlet('len_s[0]'))

    # ---- PE 2: (vals[p], crd[p]) for p in [0, NNZ) ---------------------------------------
    me, mx = st.add_map('read_entries', {'p': '0:NNZ'}, schedule=FPGA_Device)
    t = st.add_tasklet('entry', {'v', 'c'}, {'vo', 'co'}, 'vo = v\nco = c')
    st.add_memlet_path(st.add_read('fpga_vals'), me, t, dst_conn='v', memlet=Memlet('fpga_vals[p]'))
    st.add_memlet_path(st.add_read('fpga_crd'), me, t, dst_conn='c', memlet=Memlet('fpga_crd[p]'))
    st.add_memlet_path(t, mx, st.add_write('val_s'), src_conn='vo', memlet=Memlet('val_s[0]'))
    st.add_memlet_path(t, mx, st.add_write('crd_s'), src_conn='co', memlet=Memlet('crd_s[0]'))

    # ---- PE 3: compute -------------------------------------------------------------------
    rme, rmx = st.add_map('compute_rows', {'i': '0:M'}, schedule=FPGA_Device)
    # row length -> register -> dynamic range of the entry map
    t_len = st.add_tasklet('pop_len', {'l_in'}, {'l_out'}, 'l_out = l_in')
    st.add_memlet_path(st.add_read('len_s'), rme, t_len, dst_conn='l_in', memlet=Memlet('len_s[0]'))
    rlen = st.add_access('rlen')
    st.add_edge(t_len, 'l_out', rlen, None, Memlet('rlen[0]'))
    # acc = 0 (unrolled over K/W)
    zme, zmx = st.add_map('zero_acc', {'kb': f'0:{KB}'}, schedule=FPGA_Device, unroll=True)
    t_zero = st.add_tasklet('zero', {}, {'o'}, 'o = 0')
    st.add_nedge(rme, zme, Memlet())
    st.add_nedge(zme, t_zero, Memlet())
    acc0 = st.add_access('acc')
    st.add_memlet_path(t_zero, zmx, acc0, src_conn='o', memlet=Memlet('acc[kb]'))
    # entries of the row: a map whose range is the popped length (pipelined: innermost)
    eme, emx = st.add_map('compute_entries', {'j': '0:rl'}, schedule=FPGA_Device)
    eme.add_in_connector('rl')
    st.add_edge(rlen, None, eme, 'rl', Memlet('rlen[0]'))
    t_pop = st.add_tasklet('pop_entry', {'v_in', 'c_in'}, {'v', 'c'}, 'v = v_in\nc = c_in')
    st.add_memlet_path(st.add_read('val_s'), rme, eme, t_pop, dst_conn='v_in', memlet=Memlet('val_s[0]'))
    st.add_memlet_path(st.add_read('crd_s'), rme, eme, t_pop, dst_conn='c_in', memlet=Memlet('crd_s[0]'))
    v_reg, c_reg = st.add_access('v_reg'), st.add_access('c_reg')
    st.add_edge(t_pop, 'v', v_reg, None, Memlet('v_reg[0]'))
    st.add_edge(t_pop, 'c', c_reg, None, Memlet('c_reg[0]'))
    kme, kmx = st.add_map('mac', {'kb': f'0:{KB}'}, schedule=FPGA_Device, unroll=True)
    t_mac = st.add_tasklet('mac', {'a', 'v', 'c', 'x'}, {'o'}, 'o = a + v * x[c, kb]')
    st.add_memlet_path(v_reg, kme, t_mac, dst_conn='v', memlet=Memlet('v_reg[0]'))
    st.add_memlet_path(c_reg, kme, t_mac, dst_conn='c', memlet=Memlet('c_reg[0]'))
    st.add_memlet_path(acc0, eme, kme, t_mac, dst_conn='a', memlet=Memlet('acc[kb]'))
    # X[c, :] is an indirect read: the tasklet takes the whole (vectorised) X
    st.add_memlet_path(st.add_read('fpga_X'), rme, eme, kme, t_mac, dst_conn='x',
                       memlet=Memlet(f'fpga_X[0:N, 0:{KB}]'))
    acc1 = st.add_access('acc')
    st.add_memlet_path(t_mac, kmx, emx, acc1, src_conn='o', memlet=Memlet('acc[kb]'))
    # push the row (K/W vectors)
    fme, fmx = st.add_map('flush_row', {'kb': f'0:{KB}'}, schedule=FPGA_Device)
    t_push = st.add_tasklet('push', {'a'}, {'o'}, 'o = a')
    st.add_memlet_path(acc1, fme, t_push, dst_conn='a', memlet=Memlet('acc[kb]'))
    st.add_memlet_path(t_push, fmx, rmx, st.add_write('out_s'), src_conn='o', memlet=Memlet('out_s[0]'))

    # ---- PE 4: write Y -------------------------------------------------------------------
    me, mx = st.add_map('write_y', {'i': '0:M', 'kb': f'0:{KB}'}, schedule=FPGA_Device)
    t = st.add_tasklet('write', {'r'}, {'y'}, 'y = r')
    st.add_memlet_path(st.add_read('out_s'), me, t, dst_conn='r', memlet=Memlet('out_s[0]'))
    st.add_memlet_path(t, mx, st.add_write('fpga_Y'), src_conn='y', memlet=Memlet('fpga_Y[i, kb]'))

    sdfg.validate()
    return sdfg


def compile_sdfg(sdfg: dace.SDFG):
    from sdfgsparse.targets.fpga import csim
    with dace.config.set_temporary('default_build_folder', value=CACHE):
        return csim.compile_csim(sdfg)


def random_csr(m, n, density, rng, empty_rows=()):
    A = sp.random(m, n, density=density, format='csr', dtype=np.float32, random_state=rng)
    if len(empty_rows):
        A = A.tolil()
        for r in empty_rows:
            A[r, :] = 0
        A = A.tocsr()
    A.eliminate_zeros()
    A.sort_indices()
    return A


def run_case(compiled, W, K, A, rng):
    from sdfgsparse.targets.fpga import csim
    m, n = A.shape
    X = rng.standard_normal((n, K)).astype(np.float32)
    Y = np.full((m, K), np.nan, dtype=np.float32)
    pos = np.array(A.indptr, dtype=np.int32)
    crd = np.array(A.indices, dtype=np.int32)
    vals = np.array(A.data, dtype=np.float32)
    nnz = int(pos[-1])  # (nnz = 0: zero-length crd/vals buffers are fine in the simulation)
    compiled(pos=pos, crd=crd, vals=vals, X=X, Y=Y, M=m, N=n, NNZ=nnz)
    csim.check_error(compiled)
    ref = (A @ X.astype(np.float64)).astype(np.float32) if nnz else np.zeros((m, K), np.float32)
    return np.allclose(Y, ref, rtol=1e-4, atol=1e-4), float(np.nanmax(np.abs(Y - ref))) if Y.size else 0.0


def cases(rng):
    yield 'random 37x29 d=0.15', random_csr(37, 29, 0.15, rng)
    yield 'empty rows 20x16', random_csr(20, 16, 0.3, rng, empty_rows=(0, 3, 4, 19))
    yield 'single row 1x50', random_csr(1, 50, 0.4, rng)
    yield 'nnz=0 8x8', sp.csr_matrix((8, 8), dtype=np.float32)
    yield 'dense-ish 64x48 d=0.6', random_csr(64, 48, 0.6, rng)


def main():
    if '--codegen' in sys.argv:
        from dace.codegen import codegen, compiler
        sdfg = build_sdfg(4, 16)
        out = os.path.join(HERE, 'gen', sdfg.name)
        compiler.generate_program_folder(sdfg, codegen.generate_code(sdfg), out)
        print('generated into', out)
        return
    widths = [int(a) for a in sys.argv[1:] if a.isdigit()] or [1, 2, 4]
    failed = 0
    for W in widths:
        for K in (W, 4 * W):
            t0 = time.time()
            compiled = compile_sdfg(build_sdfg(W, K))
            tb = time.time() - t0
            rng = np.random.default_rng(1000 * W + K)
            for name, A in cases(rng):
                ok, err = run_case(compiled, W, K, A, rng)
                failed += not ok
                print(f'{"PASS" if ok else "FAIL"}  W={W} K={K:2d}  {name:24s} nnz={A.nnz:5d}  '
                      f'max|err|={err:.2e}  (build {tb:.1f}s)', flush=True)
    print('ALL PASS' if not failed else f'{failed} FAILED')
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
