"""TemporalVectorization (multi-pumping) recipe from DaCe's tests/rtl hardware test, code generation only."""
import os, sys
os.environ.setdefault('DACE_CONFIG', '/tmp/fpga_probe/dace.conf')
import dace
from dace.config import Config
from dace.codegen import codegen, compiler
from dace.transformation.dataflow import StreamingMemory, Vectorization
from dace.transformation.interstate import FPGATransformState
from dace.transformation.subgraph import TemporalVectorization

Config.set('compiler', 'fpga', 'vendor', value='xilinx')
Config.set('compiler', 'xilinx', 'frequency', value='"0:300\\|1:600"')
size_n, veclen = 1024, 4
N = dace.symbol('N')

def np_vadd(x: dace.float32[N], y: dace.float32[N]):
    return x + y

sdfg = dace.program(np_vadd).to_sdfg()
sdfg.name = 'tvadd'
for dn in sdfg.nodes()[0].data_nodes():
    if '__' in dn.data:
        sdfg.replace(dn.data, dn.data.replace('__', '') + 'new')
map_entry = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.MapEntry)][0]
print('Vectorization', sdfg.apply_transformations(Vectorization, {'vector_len': veclen, 'preamble': False,
      'postamble': False, 'propagate_parent': True, 'strided_map': False, 'map_entry': map_entry}))
print('FPGATransformState', sdfg.apply_transformations(FPGATransformState))
print('StreamingMemory', sdfg.apply_transformations_repeated(StreamingMemory, {'storage': dace.StorageType.FPGA_Local, 'buffer_size': 1}))
sgs = dace.sdfg.concurrent_subgraphs(sdfg.states()[0])
sf = TemporalVectorization()
cba = [TemporalVectorization.can_be_applied(sf, sdfg, sg) for sg in sgs]
print('TemporalVectorization can_be_applied per concurrent subgraph:', cba)
for i, sg in enumerate(sgs):
    if cba[i]:
        TemporalVectorization.apply_to(sdfg, sg)
sdfg.specialize({'N': size_n})
sdfg.validate()
out = '/tmp/fpga_probe/work/tvadd'
os.makedirs(out, exist_ok=True)
sdfg.save(out + '/tvadd.sdfg')
objs = codegen.generate_code(sdfg)
for o in objs:
    print(f'  {o.name}.{o.language} target={o.target.target_name} type={o.target_type!r} title={o.title}')
compiler.generate_program_folder(sdfg, objs, out + '/prog')
