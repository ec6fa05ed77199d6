"""vadd with StreamingMemory (+ optional Vectorization) -> multiple dataflow PEs connected by hlslib::Stream."""
import os, sys
os.environ.setdefault('DACE_CONFIG', '/tmp/fpga_probe/dace.conf')
import dace
from dace.config import Config
from dace.codegen import codegen, compiler
from dace.transformation.dataflow import Vectorization
from dace.transformation.interstate import FPGATransformSDFG, InlineSDFG
from dace.transformation.dataflow import StreamingMemory, StreamingComposition

Config.set('compiler', 'fpga', 'vendor', value='xilinx')
N = dace.symbol('N')

@dace.program
def vaddst(x: dace.float32[N], y: dace.float32[N], z: dace.float32[N]):
    for i in dace.map[0:N]:
        with dace.tasklet:
            a << x[i]
            b << y[i]
            c >> z[i]
            c = a + b

def main(veclen):
    sdfg = vaddst.to_sdfg(simplify=True)
    name = 'vaddst' if veclen == 1 else f'vaddst{veclen}'
    sdfg.name = name
    if veclen > 1:
        n = sdfg.apply_transformations(Vectorization, options=dict(vector_len=veclen, propagate_parent=True, preamble=False, postamble=False))
        print('Vectorization applied:', n)
    n = sdfg.apply_transformations(FPGATransformSDFG)
    print('FPGATransformSDFG:', n)
    sdfg.apply_transformations_repeated(InlineSDFG)
    n = sdfg.apply_transformations_repeated(StreamingMemory, dict(storage=dace.StorageType.FPGA_Local))
    print('StreamingMemory applied:', n)
    sdfg.validate()
    out = f'/tmp/fpga_probe/work/{name}'
    os.makedirs(out, exist_ok=True)
    sdfg.save(out + '/' + name + '.sdfg')
    objs = codegen.generate_code(sdfg)
    for o in objs:
        print(f'  {o.name}.{o.language} target={o.target.target_name} type={o.target_type!r}')
    compiler.generate_program_folder(sdfg, objs, out + '/prog')

if __name__ == '__main__':
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
