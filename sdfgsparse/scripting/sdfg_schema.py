"""An SDFG file checked by DaCe's own serialisation schema before DaCe reads it.

DaCe's ``SDFG.from_json`` evaluates many strings of a file with ``sympify`` (shapes,
subsets, symbolic properties, interstate conditions and assignments), imports the classes
it names (``pydoc.locate``) and, when a program is built, pastes code blocks into the C++
it compiles. It only *warns* about keys it does not know. :func:`check_sdfg_json` walks the
parsed JSON the way DaCe will read it:

- every object's ``type`` names a class of DaCe's serialisation registry (library nodes
  and expansions: a class of DaCe or sdfgsparse by ``classpath``) of the kind the place
  holds (a node where nodes belong, a data descriptor in ``_arrays`` ...);
- an object has only the keys its kind has: the top-level keys of its JSON form and, in
  ``attributes``, the properties of its class (``__properties__``); any other key is refused;
- every value is checked by its property's kind: symbolic properties, shapes and subsets as
  expressions, code properties as Python code (interstate and loop conditions and loop
  statements, which DaCe reads as Python whatever the language says) or by the language
  DaCe resolves from the label (tasklets, global code: Python or C++; other languages are
  refused), data types by the type grammar, enums by their members, names as identifiers;
  values of properties with no schema (plain ``dict`` / ``list``) are walked
  conservatively: every string an expression, every code block Python;
- strings are checked by the grammars of :mod:`sdfgsparse.scripting.sdfg_grammar`.

The first problem raises :class:`~sdfgsparse.scripting.sdfg_grammar.UnsafeSDFGError`
naming the source, the JSON path and the reason. Nothing in the file is evaluated or
imported (class paths are located only under ``dace.`` and ``sdfgsparse.``).
"""
import json
import pydoc
import re
from typing import Any, Callable, Optional

import aenum
import dace
from dace import data as dt
from dace import dtypes, serialize, subsets
from dace import properties as props
from dace.sdfg import nodes as nd
from dace.sdfg import state as st
from dace.transformation import transformation as xf

import sdfgsparse.transformations  # noqa: F401  (registers the Sparse transformations a history may name)
from sdfgsparse.notes import NOTES
from sdfgsparse.ops.shape_checks import KEY as SHAPE_RULES
from sdfgsparse.scripting.sdfg_grammar import (CLASSPATH_PREFIXES, UnsafeSDFGError, check_code, check_cpp,
                                               check_expression, check_name, check_subset_text, check_text)

__all__ = ['check_sdfg_json', 'UnsafeSDFGError', 'FREE_TEXT_PROPERTIES']

#: Code properties DaCe reads as Python (``sympify`` or ``ast``) whatever their language.
PYTHON_CODE_PROPERTIES = frozenset({'condition', 'loop_condition', 'init_statement', 'update_statement',
                                    'instrument_condition'})
#: String properties that are text (never evaluated; written into comments at most).
TEXT_PROPERTIES = frozenset({'guid', 'hash', 'filename'})
#: String properties that are free text for people, which DaCe neither evaluates nor writes into
#: generated code: a transformation's reason (SparseFormatSelection's costs as JSON), the I/O lower
#: bound SparseIOLowerBound notes on a sparse node, descriptions.
FREE_TEXT_PROPERTIES = frozenset({'reason', 'desc', 'doc', 'io_lower_bound'})

_SDFG_KEYS = {'type', 'attributes', 'nodes', 'edges', 'collapsed', 'label', 'id', 'cfg_list_id', 'start_block',
              'dace_version'}
_STATE_KEYS = {'type', 'label', 'id', 'collapsed', 'scope_dict', 'nodes', 'edges', 'attributes'}
_REGION_KEYS = {'type', 'attributes', 'nodes', 'edges', 'collapsed', 'label', 'id', 'cfg_list_id', 'start_block'}
_NODE_KEYS = {'type', 'label', 'attributes', 'id', 'scope_entry', 'scope_exit'}
_XFORM_TYPES = {'PatternTransformation': xf.PatternTransformation, 'SubgraphTransformation':
                xf.SubgraphTransformation, 'ExpandTransformation': xf.ExpandTransformation}
_LANGUAGES = {'Python', 'CPP', 'OpenCL', 'SystemVerilog', 'MLIR', 'NoCode'}


def check_sdfg_json(content: Any, source: str) -> None:
    """Raise :class:`UnsafeSDFGError` (``<source>: field <json path>: ...``) at the first
    key or value of the parsed SDFG file ``content`` outside DaCe's schema or the grammar
    of its kind (module docstring)."""
    try:
        _Walker(source).sdfg(content, '$')
    except UnsafeSDFGError:
        raise
    except (RecursionError, MemoryError):
        raise UnsafeSDFGError(f'{source}: nested too deeply to check; the file is refused') from None
    except Exception as exc:  # a shape of JSON the walk did not foresee: refused, never passed on
        raise UnsafeSDFGError(f'{source}: not of DaCe\'s schema ({type(exc).__name__}: {str(exc)[:80]}); the file '
                              'is refused') from None


def _show(value) -> str:
    if isinstance(value, dict) and isinstance(value.get('string_data'), str):
        value = value['string_data']
    if not isinstance(value, str):
        return ''
    shown = value.strip().replace('\n', '; ')
    return f' {shown[:80]!r}{"..." if len(shown) > 80 else ""}' if shown else ''


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float))


class _Walker:

    def __init__(self, source: str):
        self.source = source
        self.depth = 0

    # --- reporting ---------------------------------------------------------------------------------------------

    def fail(self, path: str, why: str, value=None):
        shown = _show(value)
        raise UnsafeSDFGError(f'{self.source}: field {path}{":" + shown if shown else ""}: {why}; the file is '
                              'refused (DaCe would evaluate, import or compile it, or it is not of DaCe\'s schema)')

    def string(self, check: Callable[[str], str], value, path: str):
        why = check(value)
        if why:
            self.fail(path, why, value)

    def keys(self, value, allowed, path: str, required=('type', )):
        if not isinstance(value, dict):
            self.fail(path, f'a {type(value).__name__} where an object belongs')
        for key in value:
            if key not in allowed:
                self.fail(path, f'the key {str(key)[:60]!r} is not a key of {_type_of(value)}')
        for key in required:
            if key not in value:
                self.fail(path, f'the key {key!r} is missing')

    def items(self, value, path: str, each):
        if not isinstance(value, list):
            self.fail(path, f'a {type(value).__name__} where a list belongs')
        for i, item in enumerate(value):
            each(item, f'{path}[{i}]')

    def integer(self, value, path: str, allow_none=True):
        if value is None and allow_none:
            return
        if _is_int(value) or (isinstance(value, str) and value.lstrip('-').isdigit() and len(value) < 20):
            return
        self.fail(path, 'not an integer', value)

    # --- the graph ---------------------------------------------------------------------------------------------

    def sdfg(self, value, path: str):
        self.depth += 1
        if self.depth > 64:
            self.fail(path, 'SDFGs nested more than 64 deep')
        self.keys(value, _SDFG_KEYS, path, required=('type', 'attributes', 'nodes', 'edges'))
        if value['type'] != 'SDFG':
            self.fail(f'{path}.type', 'not an SDFG', value['type'])
        attributes = value['attributes']
        if not isinstance(attributes, dict):
            self.fail(f'{path}.attributes', 'not an object')
        if 'name' not in attributes:
            self.fail(f'{path}.attributes', 'the SDFG has no name')
        # the name: of the generated functions and of the build folder, an identifier
        self.properties(dace.SDFG, attributes, f'{path}.attributes', extra={'hash': self.text, NOTES: self.notes,
                                                                             'name': self.name})
        self.region_common(value, path)
        self.text(value.get('dace_version'), f'{path}.dace_version')
        self.items(value['nodes'], f'{path}.nodes', self.block)
        self.items(value['edges'], f'{path}.edges', self.control_edge)
        self.depth -= 1

    def region_common(self, value, path: str):
        for key in ('id', 'cfg_list_id', 'start_block'):
            self.integer(value.get(key), f'{path}.{key}')
        self.boolean(value.get('collapsed'), f'{path}.collapsed')
        self.text(value.get('label'), f'{path}.label')

    def block(self, value, path: str):
        cls = self.resolve(value, path, st.ControlFlowBlock)
        if cls is dace.SDFG:  # nested SDFGs belong in a NestedSDFG node
            self.fail(f'{path}.type', 'not a control-flow block', value.get('type'))
        label = value.get('label')
        if label is None:
            self.fail(path, 'the key \'label\' is missing')
        self.string(check_name, label, f'{path}.label')  # states are C++ labels in the generated code
        if issubclass(cls, st.SDFGState):
            self.keys(value, _STATE_KEYS, path, required=('type', 'label', 'nodes', 'edges', 'attributes'))
            self.properties(cls, value['attributes'], f'{path}.attributes')
            self.integer(value.get('id'), f'{path}.id')
            self.boolean(value.get('collapsed'), f'{path}.collapsed')
            scope = value.get('scope_dict', {})
            if not isinstance(scope, dict):
                self.fail(f'{path}.scope_dict', 'not an object')
            for key, ids in scope.items():
                self.integer(key, f'{path}.scope_dict')
                self.items(ids, f'{path}.scope_dict[{key!r}]', self.integer)
            self.items(value['nodes'], f'{path}.nodes', self.node)
            self.items(value['edges'], f'{path}.edges', self.dataflow_edge)
            return
        allowed = _REGION_KEYS | ({'branches'} if issubclass(cls, st.ConditionalBlock) else set())
        self.keys(value, allowed, path, required=('type', 'label', 'attributes'))
        self.properties(cls, value['attributes'], f'{path}.attributes')
        self.region_common(value, path)
        if issubclass(cls, st.ControlFlowRegion):
            self.items(value.get('nodes', []), f'{path}.nodes', self.block)
            self.items(value.get('edges', []), f'{path}.edges', self.control_edge)
        elif value.get('nodes') or value.get('edges'):
            self.fail(path, f'a {cls.__name__} holds no nodes or edges')
        if issubclass(cls, st.ConditionalBlock):
            for i, branch in enumerate(value.get('branches', [])):
                where = f'{path}.branches[{i}]'
                if not (isinstance(branch, list) and len(branch) == 2):
                    self.fail(where, 'a branch is a pair [condition, region]')
                self.code(branch[0], f'{where}[0]', python_only=True)
                if not isinstance(branch[1], dict) or branch[1].get('type') != 'ControlFlowRegion':
                    self.fail(f'{where}[1]', 'not a control-flow region')
                self.block(branch[1], f'{where}[1]')

    def node(self, value, path: str):
        if isinstance(value, dict) and value.get('type') == 'LibraryNode':
            cls = self.classpath(value, path, nd.LibraryNode)
            allowed = _NODE_KEYS | {'classpath'}
        else:
            cls = self.resolve(value, path, nd.Node)
            if issubclass(cls, nd.LibraryNode):
                self.fail(f'{path}.type', 'a library node is saved with the type LibraryNode and its classpath')
            allowed = _NODE_KEYS
        self.keys(value, allowed, path, required=('type', 'attributes'))
        self.properties(cls, value['attributes'], f'{path}.attributes')
        self.text(value.get('label'), f'{path}.label')
        for key in ('id', 'scope_entry', 'scope_exit'):
            self.integer(value.get(key), f'{path}.{key}')

    def dataflow_edge(self, value, path: str):
        self.keys(value, {'type', 'attributes', 'src', 'dst', 'src_connector', 'dst_connector'}, path,
                  required=('type', 'attributes', 'src', 'dst'))
        if value['type'] != 'MultiConnectorEdge':
            self.fail(f'{path}.type', 'not a dataflow edge', value['type'])
        self.integer(value['src'], f'{path}.src', allow_none=False)
        self.integer(value['dst'], f'{path}.dst', allow_none=False)
        for key in ('src_connector', 'dst_connector'):
            if value.get(key) is not None:
                self.string(check_name, value[key], f'{path}.{key}')
        attributes = value['attributes']
        self.keys(attributes, {'data'}, f'{path}.attributes', required=('data', ))
        memlet = attributes['data']
        self.resolve(memlet, f'{path}.attributes.data', dace.Memlet)
        self.keys(memlet, {'type', 'attributes'}, f'{path}.attributes.data', required=('type', 'attributes'))
        # Memlet.to_json writes these four beside its properties
        self.properties(dace.Memlet, memlet['attributes'], f'{path}.attributes.data.attributes',
                        extra={'src_subset': self.subset, 'dst_subset': self.subset, 'num_accesses': self.expression,
                               'is_data_src': self.boolean})

    def control_edge(self, value, path: str):
        self.keys(value, {'type', 'attributes', 'src', 'dst'}, path, required=('type', 'attributes', 'src', 'dst'))
        if value['type'] != 'Edge':
            self.fail(f'{path}.type', 'not a control-flow edge', value['type'])
        self.integer(value['src'], f'{path}.src', allow_none=False)
        self.integer(value['dst'], f'{path}.dst', allow_none=False)
        attributes = value['attributes']
        self.keys(attributes, {'data'}, f'{path}.attributes', required=('data', ))
        data = attributes['data']
        self.keys(data, {'type', 'attributes', 'label'}, f'{path}.attributes.data', required=('type', 'attributes'))
        if data['type'] != 'InterstateEdge':
            self.fail(f'{path}.attributes.data.type', 'not an interstate edge', data['type'])
        self.text(data.get('label'), f'{path}.attributes.data.label')
        self.properties(dace.InterstateEdge, data['attributes'], f'{path}.attributes.data.attributes')

    def notes(self, value, path: str):
        """The SDFG's ``sparse_notes`` (:mod:`sdfgsparse.notes`): shape rules (expressions the
        call evaluates, with free text for the error), the I/O lower bound (text for people),
        recorded examples (names and numbers)."""
        if not isinstance(value, dict):
            self.fail(path, f'a {type(value).__name__} where an object belongs')
        for key, item in value.items():
            where = _child(path, key)
            if key == SHAPE_RULES:
                def rule(r, w):
                    self.keys(r, {'a', 'b', 'reason'}, w, required=('a', 'b'))
                    self.expression(r['a'], f'{w}.a')
                    self.expression(r['b'], f'{w}.b')
                    self.free_text(r.get('reason'), f'{w}.reason')

                self.items(item, where, rule)
            elif key == 'io_lower_bound':
                self.free_text(item, where)
            else:
                self.loose(item, where)

    def free_text(self, value, path: str):
        """Text for people, in strings, lists and objects; nothing DaCe would deserialise
        (an object with a type, or with attributes)."""
        if value is None or isinstance(value, (bool, int, float, str)):
            return
        if isinstance(value, list):
            return self.items(value, path, self.free_text)
        if not isinstance(value, dict):
            self.fail(path, f'a {type(value).__name__} is not a JSON value')
        if 'type' in value or 'attributes' in value:
            self.fail(path, 'an object DaCe would deserialise where text belongs')
        for k, v in value.items():
            self.free_text(v, _child(path, k))

    # --- objects by type ---------------------------------------------------------------------------------------

    def resolve(self, value, path: str, base: Optional[type] = None) -> type:
        """The class ``value['type']`` names in DaCe's registry (a subclass of ``base``)."""
        if not isinstance(value, dict):
            self.fail(path, f'a {type(value).__name__} where an object belongs')
        name = value.get('type')
        if not isinstance(name, str):
            self.fail(f'{path}.type', 'an object without a type')
        cls = serialize._DACE_SERIALIZE_TYPES.get(name)
        if cls is None or not isinstance(cls, type):
            self.fail(f'{path}.type', 'a type DaCe does not serialise', name)
        if base is not None and not issubclass(cls, base):
            self.fail(f'{path}.type', f'a {name} where a {base.__name__} belongs', name)
        return cls

    def classpath(self, value, path: str, base: type) -> type:
        where = f'{path}.classpath'
        cp = value.get('classpath')
        if not isinstance(cp, str) or not cp.startswith(CLASSPATH_PREFIXES) or check_name(cp):
            self.fail(where, f'a class outside {" and ".join(p.rstrip(".") for p in CLASSPATH_PREFIXES)} (DaCe '
                      'would import it)', cp)
        try:
            cls = pydoc.locate(cp)
        except Exception:  # a module of ours or DaCe's that fails to import
            cls = None
        if not (isinstance(cls, type) and issubclass(cls, base)):
            self.fail(where, f'not a {base.__name__} class', cp)
        return cls

    def typed_object(self, value, path: str, base: type):
        """A ``{"type": ..., "attributes": {...}}`` object of a subclass of ``base``."""
        cls = self.resolve(value, path, base)
        self.keys(value, {'type', 'attributes'}, path, required=('type', 'attributes'))
        self.properties(cls, value['attributes'], f'{path}.attributes')

    def data(self, value, path: str):
        self.typed_object(value, path, dt.Data)

    def transformation(self, value, path: str):
        if value is None:
            return
        if not isinstance(value, dict):
            self.fail(path, f'a {type(value).__name__} where a transformation belongs')
        kind = value.get('type')
        base = _XFORM_TYPES.get(kind) if isinstance(kind, str) else None
        if base is None:
            self.fail(f'{path}.type', 'not a transformation', kind)
        name = value.get('transformation')
        if base is xf.ExpandTransformation:
            cls = self.classpath(value, path, xf.ExpandTransformation)
        else:
            cls = next((c for c in base.subclasses_recursive(all_subclasses=True) if c.__name__ == name), None) \
                if isinstance(name, str) else None
        if cls is None or cls.__name__ != name:
            self.fail(f'{path}.transformation', 'not a transformation DaCe or sdfgsparse defines', name)
        flat = {k: v for k, v in value.items() if k not in ('type', 'transformation', 'classpath')}
        self.properties(cls, flat, path)

    def typeclass(self, value, path: str):
        if value is None:
            return
        if isinstance(value, str):
            try:
                serialize.get_serializer(value)
            except KeyError:
                self.fail(path, 'not a data type', value)
            return
        if not isinstance(value, dict):
            self.fail(path, f'a {type(value).__name__} where a data type belongs')
        kind = value.get('type')
        if kind == 'pointer':
            self.keys(value, {'type', 'dtype'}, path)
            self.typeclass(value.get('dtype'), f'{path}.dtype')
        elif kind == 'vector':
            self.keys(value, {'type', 'dtype', 'elements'}, path, required=('type', 'dtype', 'elements'))
            self.typeclass(value['dtype'], f'{path}.dtype')
            self.expression(value['elements'], f'{path}.elements')
        elif kind == 'struct':
            self.keys(value, {'type', 'name', 'data', 'length', 'bytes'}, path, required=('type', 'name', 'data'))
            self.string(check_name, value['name'], f'{path}.name')
            self.pairs(value['data'], f'{path}.data', self.typeclass)
            self.pairs(value.get('length', []), f'{path}.length', self.expression)
            self.integer(value.get('bytes'), f'{path}.bytes')
        elif kind == 'opaque':
            self.keys(value, {'type', 'ctype'}, path, required=('type', 'ctype'))
            ctype = value['ctype']
            if not (isinstance(ctype, str) and _is_ctype(ctype)):
                self.fail(f'{path}.ctype', 'not a C++ type name', ctype)
        elif kind == 'callback':
            self.keys(value, {'type', 'arguments', 'returntypes'}, path)
            self.items(value.get('arguments', []), f'{path}.arguments', self.typeclass)
            self.items(value.get('returntypes', []), f'{path}.returntypes', self.typeclass)
        elif kind in ('string', 'pyobject'):
            self.keys(value, {'type'}, path)
        else:
            self.fail(f'{path}.type', 'not a data type', kind)

    def pairs(self, value, path: str, each):
        def pair(item, where):
            if not (isinstance(item, list) and len(item) == 2):
                self.fail(where, 'not a [name, value] pair')
            self.string(check_name, item[0], f'{where}[0]')
            each(item[1], f'{where}[1]')

        self.items(value, path, pair)

    def debuginfo(self, value, path: str):
        if value is None:
            return
        self.keys(value, {'type', 'start_line', 'end_line', 'start_column', 'end_column', 'filename'}, path)
        if value['type'] != 'DebugInfo':
            self.fail(f'{path}.type', 'not debug information', value['type'])
        for key in ('start_line', 'end_line', 'start_column', 'end_column'):
            self.integer(value.get(key), f'{path}.{key}')
        self.text(value.get('filename'), f'{path}.filename')

    def subset(self, value, path: str):
        if value is None:
            return
        if isinstance(value, str):
            self.string(check_subset_text, value, path)
            return
        if not isinstance(value, dict):
            self.fail(path, f'a {type(value).__name__} where a subset belongs')
        if value.get('type') == 'Range':
            self.keys(value, {'type', 'ranges'}, path, required=('type', 'ranges'))

            def one(r, where):
                self.keys(r, {'start', 'end', 'step', 'tile'}, where, required=('start', 'end', 'step', 'tile'))
                for key, bound in r.items():
                    if isinstance(bound, dict):
                        self.keys(bound, {'main', 'approx'}, f'{where}.{key}', required=('main', 'approx'))
                        self.expression(bound['main'], f'{where}.{key}.main')
                        self.expression(bound['approx'], f'{where}.{key}.approx')
                    else:
                        self.expression(bound, f'{where}.{key}')

            self.items(value['ranges'], f'{path}.ranges', one)
        elif value.get('type') == 'Indices':
            self.keys(value, {'type', 'indices'}, path, required=('type', 'indices'))
            self.items(value['indices'], f'{path}.indices', self.expression)
        else:
            self.fail(f'{path}.type', 'not a subset', value.get('type'))

    def code(self, value, path: str, python_only: bool):
        """A code block: Python wherever DaCe reads it as Python (``python_only``, or a
        language DaCe resolves to Python), C++ where DaCe compiles it as C++; nothing else."""
        if value is None:
            return
        self.keys(value, {'string_data', 'language'}, path, required=('string_data', ))
        text, language = value['string_data'], value.get('language')
        if language is not None and (not isinstance(language, str) or language not in _LANGUAGES):
            self.fail(f'{path}.language', 'not a language of DaCe', language)
        where = f'{path}.string_data'
        if python_only or language in (None, 'Python', 'NoCode'):
            self.string(check_code, text, where)
        elif language == 'CPP':
            self.string(check_cpp, text, where)
        else:
            self.fail(f'{path}.language', f'code in {language} is not accepted in a file', language)

    def member(self, enum, value, path: str):
        """The name of a member of ``enum`` (DaCe reads enums by member name)."""
        if not (isinstance(value, str) and value in getattr(enum, '__members__', {})):
            self.fail(path, f'not a {getattr(enum, "__name__", "choice")}', value)

    def boolean(self, value, path: str):
        if value is not None and not isinstance(value, bool):
            self.fail(path, 'not true or false', value)

    def expression(self, value, path: str):
        if value is None or isinstance(value, bool) or _is_number(value):
            return
        self.string(check_expression, value, path)

    def text(self, value, path: str):
        if value is not None:
            self.string(check_text, value, path)

    def name(self, value, path: str):
        if value is not None:
            self.string(check_name, value, path)

    # --- properties --------------------------------------------------------------------------------------------

    def properties(self, cls: type, attributes, path: str, extra=None):
        """``attributes`` holds only properties of ``cls``, each of its kind."""
        if not isinstance(attributes, dict):
            self.fail(path, f'a {type(attributes).__name__} where the properties of a {cls.__name__} belong')
        known = getattr(cls, '__properties__', {})
        extra = extra or {}
        for key, value in attributes.items():
            where = _child(path, key)
            if key in extra:
                extra[key](value, where)
            elif key in known:
                self.prop(known[key], key, value, where)
            else:
                self.fail(path, f'the key {str(key)[:60]!r} is not a property of {cls.__name__}')

    def prop(self, p: props.Property, key: str, value, path: str):
        if value is None:
            return
        if isinstance(p, props.CodeProperty):
            return self.code(value, path, python_only=key in PYTHON_CODE_PROPERTIES)
        if isinstance(p, props.SymbolicProperty):
            return self.expression(value, path)
        if isinstance(p, props.ShapeProperty):
            if isinstance(value, str):
                return self.string(check_subset_text, value, path)
            return self.items(value, path, self.expression)
        if isinstance(p, (props.SubsetProperty, props.RangeProperty)):
            return self.subset(value, path)
        if isinstance(p, props.DataProperty):
            return self.name(value, path)
        if isinstance(p, props.LambdaProperty):
            if not (isinstance(value, str) and value.lstrip('( ').startswith('lambda')):
                self.fail(path, 'not a lambda', value)
            return self.string(check_expression, value, path)
        if isinstance(p, props.TypeClassProperty):
            return self.typeclass(value, path)
        if isinstance(p, props.DebugInfoProperty):
            return self.debuginfo(value, path)
        if isinstance(p, props.EnumProperty):
            return self.member(p.dtype, value, path)
        if isinstance(p, props.SDFGReferenceProperty):
            if isinstance(value, str):  # DaCe still reads a nested SDFG saved as JSON text
                try:
                    value = json.loads(value)
                except ValueError:
                    self.fail(path, 'not an SDFG', value)
            return self.sdfg(value, path)
        if isinstance(p, props.TransformationHistProperty):
            return self.items(value, path, self.transformation)
        if isinstance(p, props.NestedDataClassProperty):
            return self.name(value, path) if isinstance(value, str) else self.data(value, path)
        if isinstance(p, props.OrderedDictProperty):  # Structure.members: [name, descriptor or size] pairs
            return self.pairs(value, path, lambda v, w: self.expression(v, w) if isinstance(v, str) else
                              self.data(v, w))
        if isinstance(p, props.TypeProperty):  # located by pydoc (an import); no SDFG of ours has one
            self.fail(path, 'a type named by its import path is not accepted in a file', value)
        if isinstance(p, props.LibraryImplementationProperty):
            return self.name(value, path)
        if isinstance(p, props.DictProperty):
            if not isinstance(value, dict):
                self.fail(path, f'a {type(value).__name__} where an object belongs')
            for k, v in value.items():
                self.element(p.key_type, k, path, key=True)
                self.element(p.value_type, v, _child(path, k))
            return
        if isinstance(p, props.ListProperty):
            return self.items(value, path, lambda v, w: self.element(p.element_type, v, w))
        if isinstance(p, props.SetProperty):
            return self.items(value, path, lambda v, w: self.element(p._element_type, v, w))
        if key == '_arrays':
            if not isinstance(value, dict):
                self.fail(path, 'not an object')
            for k, v in value.items():
                self.string(check_name, k, path)
                self.data(v, f'{path}.{k}')
            return
        dtype = p.dtype
        if dtype in (bool, int, float) or (isinstance(dtype, type) and issubclass(dtype, (bool, int, float))):
            if isinstance(value, (bool, int, float)):
                return
            return self.expression(value, path)
        if dtype is str:
            if key in FREE_TEXT_PROPERTIES:
                return
            if key in TEXT_PROPERTIES:
                return self.text(value, path)
            return self.string(check_expression, value, path)
        if isinstance(dtype, type) and issubclass(dtype, aenum.Enum):
            return self.member(dtype, value, path)
        return self.loose(value, path)

    def element(self, t, value, path: str, key: bool = False):
        """A key, value or element whose declared type is ``t``."""
        if key:
            if t is int:
                return self.integer(value, path, allow_none=False)
            if not isinstance(value, str) or check_expression(value):
                self.fail(path, f'the key {str(value)[:60]!r} is not a name or an expression')
            return
        if value is None:
            return
        if t is dtypes.typeclass:
            return self.typeclass(value, path)
        if t is props.CodeBlock:
            return self.code(value, path, python_only=False)
        if t in (int, float, bool):
            return self.expression(value, path)
        if t is str:
            return self.string(check_expression, value, path)
        if t is subsets.Range:
            return self.subset(value, path)
        if isinstance(t, type) and t not in (list, dict, tuple) and hasattr(t, 'from_json'):
            return self.typed_object(value, path, t)
        return self.loose(value, path)  # a symbolic conversion (pystr_to_symbolic), a list, a dict

    def loose(self, value, path: str):
        """A value with no schema of its own: every string an expression, every object with
        a type by its type, every code block Python."""
        if value is None or isinstance(value, bool) or _is_number(value):
            return
        if isinstance(value, str):
            return self.string(check_expression, value, path)
        if isinstance(value, list):
            return self.items(value, path, self.loose)
        if not isinstance(value, dict):
            self.fail(path, f'a {type(value).__name__} is not a JSON value')
        if 'string_data' in value or 'language' in value:
            return self.code(value, path, python_only=True)
        if 'type' not in value and isinstance(value.get('attributes'), dict) and 'type' in value['attributes']:
            self.fail(path, 'an object DaCe would deserialise by the type in its attributes')
        if 'type' in value:
            kind = value['type']
            if kind == 'ndarray':
                self.keys(value, {'type', 'data', 'dtype'}, path, required=('type', 'data'))
                self.numbers(value['data'], f'{path}.data')
                return self.typeclass(value.get('dtype'), f'{path}.dtype')
            if kind in ('Range', 'Indices'):
                return self.subset(value, path)
            if kind == 'DebugInfo':
                return self.debuginfo(value, path)
            if kind in ('pointer', 'vector', 'struct', 'opaque', 'callback', 'string', 'pyobject'):
                return self.typeclass(value, path)
            cls = self.resolve(value, path)
            if issubclass(cls, dt.Data) or hasattr(cls, '__properties__'):
                return self.typed_object(value, path, cls)
            self.fail(f'{path}.type', 'an object DaCe would not read here', kind)
        for k, v in value.items():
            if not isinstance(k, str) or check_expression(k):
                self.fail(path, f'the key {str(k)[:60]!r} is not a name or an expression')
            self.loose(v, _child(path, k))

    def numbers(self, value, path: str):
        if isinstance(value, list):
            return self.items(value, path, self.numbers)
        if not (value is None or isinstance(value, bool) or _is_number(value)):
            self.fail(path, 'not a number', value)


def _child(path: str, key) -> str:
    """The JSON path of ``key`` under ``path``: ``$.a.b``, or ``$.a['not a name']``."""
    return f'{path}.{key}' if isinstance(key, str) and check_name(key) == '' else f'{path}[{str(key)[:40]!r}]'


def _type_of(value: dict) -> str:
    kind = value.get('type') if isinstance(value, dict) else None
    return kind if isinstance(kind, str) and check_name(kind) == '' else 'this object'


def _is_ctype(text: str) -> bool:
    return re.fullmatch(r'[A-Za-z_][A-Za-z0-9_:<>, *&]*', text) is not None and check_cpp(f'{text} _x;') == ''
