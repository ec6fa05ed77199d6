"""Generate Xilinx FPGA code with DaCe 1.0.2 without Vitis (no build)."""
import os, sys
os.environ.setdefault('DACE_CONFIG', '/tmp/fpga_probe/dace.conf')
import dace
from dace.config import Config
from dace.codegen import codegen, compiler

Config.set('compiler', 'fpga', 'vendor', value='xilinx')
Config.set('default_build_folder', value='/tmp/fpga_probe/work/.dacecache')

N = dace.symbol('N')
NNZ = dace.symbol('NNZ')
M = dace.symbol('M')

@dace.program
def vadd(x: dace.float32[N], y: dace.float32[N], z: dace.float32[N]):
    for i in dace.map[0:N]:
        z[i] = x[i] + y[i]

@dace.program
def spmv(rowptr: dace.int32[M + 1], col: dace.int32[NNZ], val: dace.float32[NNZ],
         x: dace.float32[N], y: dace.float32[M]):
    for i in range(M):
        acc = dace.float32(0)
        for j in range(rowptr[i], rowptr[i + 1]):
            acc += val[j] * x[col[j]]
        y[i] = acc

def gen(prog, name, outdir):
    sdfg = prog.to_sdfg(simplify=True)
    sdfg.name = name
    n = sdfg.apply_fpga_transformations()
    print(name, 'FPGA transformations applied:', n)
    sdfg.save(os.path.join(outdir, name + '.sdfg'))
    objs = codegen.generate_code(sdfg)
    os.makedirs(outdir, exist_ok=True)
    for o in objs:
        fn = f'{o.name}.{o.language}'
        print(f'  codeobj name={o.name} lang={o.language} target={o.target.__name__} '
              f'target_type={o.target_type!r} title={o.title} linkable={o.linkable}')
        with open(os.path.join(outdir, o.target.target_name + '__' + (o.target_type or 'x').replace('/', '').replace('.', '') + '__' + fn), 'w') as f:
            f.write(o.clean_code)
    compiler.generate_program_folder(sdfg, objs, os.path.join(outdir, 'prog'))
    return sdfg, objs

if __name__ == '__main__':
    which = sys.argv[1:] or ['vadd', 'spmv']
    for w in which:
        out = f'/tmp/fpga_probe/work/{w}'
        os.makedirs(out, exist_ok=True)
        gen(globals()[w], w, out)
