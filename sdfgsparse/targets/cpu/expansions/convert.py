"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.convert.Convert`."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation
from sdfgsparse.targets.cpu.compress import compress_kernel, emit_append
from sdfgsparse.targets.cpu.entries import Entries
from sdfgsparse.ops.base import member_conn
from sdfgsparse.ops.convert import Convert
from sdfgsparse.targets.registry import register
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU

__all__ = ['ExpandConvertCPU']


@dace.library.expansion
class ExpandConvertCPU(ExpandTransformation):
    """Expand the entries of A (any format), sort, compress (see :mod:`..targets/cpu/compress`);
    the result's type (CSR or CSC) decides the compressed dimension."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: 'Convert', state, sdfg):
        st = node.operand_type(state, 'A')
        ent = Entries(st, {m: member_conn('A', m) for m in st.fmt.member_names})

        def expand(kb, vt):
            ent.emit(kb, emit_append(ent.i, ent.j, ent.val), parallel=False)

        # a CSC result (the type of ``out``) is compressed by columns in compress_kernel
        return compress_kernel(node, state, sdfg, expand, st.rows, st.cols)


register(Convert, 'cpu', ExpandConvertCPU, default=True)
