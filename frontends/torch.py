"""PyTorch models and functions as SDFGs: ``ss.torch.compile``.

>>> import torch, sdfgsparse as ss                                   # doctest: +SKIP
>>> model = ss.torch.compile(GCN(), example_inputs=(A, X))           # doctest: +SKIP
>>> model(A, X)          # one SDFG: sparse products, dense layers, softmax
>>> print(model.report())   # what ran where, graph breaks, compile time

How a model becomes an SDFG:

1. ``torch.export.export`` captures the model as an ATen graph. It keeps sparse layouts
   (CSR / CSC / COO placeholders, ``aten._sparse_mm``), which ``torch.compile`` refuses.
2. :mod:`frontends.torch_graph` translates the graph, node by node, into operations of
   :mod:`frontends.torch_sdfg`, which builds the SDFG directly: each operation is a small
   NumPy-style function of that module (``a @ b``, ``ss.relu(x)``, ``np.maximum(x, 0)``)
   parsed for its arguments' descriptors and nested, then all are inlined into one
   dataflow, so every sparse node, dense library node and fusion of the NumPy frontend
   applies; no program text is written or run. ``compiled.source`` lists the operations in
   NumPy notation (a listing; ``compiled.sdfg`` is the program). Dimensions are symbols: user inputs' sizes are free, parameters' sizes fixed, and each
   operation unifies the sizes it needs equal, so a new batch or graph size runs without
   recompiling. An ATen operation without a translation either runs in torch between
   two SDFGs (``fallback='torch'``, a graph break listed by ``report()``) or raises
   :class:`~sdfgsparse.errors.UnsupportedOperationError` naming it (``fallback='raise'``,
   the default), before anything is compiled.
3. ``ss.optimize`` runs the sparse pipeline on each SDFG.

Sparse weights: a parameter may be a torch sparse CSR tensor; :func:`sparsify` prunes the
``nn.Linear`` weights of a model by magnitude into such parameters.

Training: when autograd is on and a parameter or input requires a gradient, the model
runs as its ATen graph in torch with every sparse product, sampled product
(``sparse.sampled_addmm``) and row-wise sparse softmax replaced by sdfgsparse's custom
operators (:mod:`frontends.torch_ops`), whose forwards and backwards are sdfgsparse
programs, so torch's optimizers train it; the dense operations between them run in torch. Inference (``torch.no_grad()``,
``model.eval()`` with nothing requiring a gradient) runs the SDFGs.
"""
import hashlib
import time
from typing import Any, Callable, Dict, List, Tuple

import torch

from sdfgsparse import errors
from sdfgsparse.frontends.torch_graph import Segment, plan_segments, translate

from sdfgsparse.frontends.torch_dispatch import LayoutTensor
from sdfgsparse.frontends.torch_layers import SparseConv2d, SparseLinear, sparsify_layers
from sdfgsparse.frontends.torch_rigl import RigL
from sdfgsparse.frontends.torch_sparsifiers import Block, Magnitude, Random, Sparsifier, check_density

__all__ = ['compile', 'CompiledModel', 'sparsify', 'SparseOptimizer', 'LayoutTensor', 'SparseLinear', 'SparseConv2d',
           'Sparsifier', 'Magnitude', 'Random', 'Block', 'RigL']

FALLBACKS = ('raise', 'torch')


def _export(model, example_inputs: Tuple[Any, ...]):
    if not isinstance(example_inputs, tuple):
        raise errors.ArgumentError(f'ss.torch.compile: example_inputs must be a tuple of tensors, got '
                                   f'{type(example_inputs).__name__}')
    for k, v in enumerate(example_inputs):
        if not isinstance(v, torch.Tensor):
            raise errors.ArgumentError(f'ss.torch.compile: example_inputs[{k}] is {type(v).__name__}, not a tensor')
        if v.device.type != 'cpu':
            raise errors.UnsupportedOperationError(f'ss.torch.compile: example_inputs[{k}] is on {v.device}; the '
                                                   'torch frontend compiles for the CPU')
    module = model if isinstance(model, torch.nn.Module) else _FunctionModule(model)
    try:
        return module, torch.export.export(module, example_inputs, strict=False)
    except Exception as e:  # torch's own message names the construct it could not capture
        raise errors.UnsupportedOperationError(f'ss.torch.compile: torch.export could not capture the model: '
                                               f'{type(e).__name__}: {str(e).splitlines()[0]}') from e


class _FunctionModule(torch.nn.Module):
    """A plain function as a module without parameters (torch.export takes modules)."""

    def __init__(self, fn: Callable):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


class CompiledModel(torch.nn.Module):
    """A model compiled by :func:`compile`. Call it like the model; it reads the model's
    current parameters on every call (training updates them in place)."""

    def __init__(self, module: torch.nn.Module, exported, segments: List[Segment], fallback: str,
                 compile_s: float, timings: Dict[str, float]):
        super().__init__()
        self.module = module
        self._exported = exported
        self._segments = segments
        self.fallback = fallback
        self.compile_seconds = compile_s
        #: seconds of each compile step: torch.export, parse (DaCe's frontend), optimize, build
        self.timings = dict(timings)
        self.calls = {'sdfg': 0, 'autograd': 0}

    # ------------------------------------------------------------------ inspection
    @property
    def source(self) -> str:
        """The operations of every compiled segment in NumPy notation, one line each: what
        the SDFGs compute (they are built node by node; this text is a listing, not run)."""
        return '\n\n'.join(s.source for s in self._segments if s.compiled)

    @property
    def sdfgs(self):
        """The optimised SDFG of each compiled segment, in order."""
        return [s.program.sdfg for s in self._segments if s.compiled]

    @property
    def sdfg(self):
        """The optimised SDFG of a model compiled as one segment (no graph break)."""
        sdfgs = self.sdfgs
        if len(sdfgs) != 1:
            raise errors.UnsupportedOperationError(f'the model has {len(sdfgs)} compiled segments (graph breaks: '
                                                   f'{", ".join(self.graph_breaks()) or "none"}); use .sdfgs')
        return sdfgs[0]

    def graph_breaks(self) -> List[str]:
        """The ATen operations that run in torch between compiled segments."""
        return [s.label for s in self._segments if not s.compiled]

    def report(self) -> str:
        steps = ', '.join(f'{k} {v:.2f} s' for k, v in self.timings.items())
        lines = [f'ss.torch.compile: {len(self.sdfgs)} SDFG(s), compiled in {self.compile_seconds:.2f} s ({steps}); '
                 f'calls: {self.calls["sdfg"]} as SDFGs, {self.calls["autograd"]} with autograd']
        for s in self._segments:
            lines.append(f'  {"SDFG " if s.compiled else "torch"}  {s.label}')
        for s in self._segments:
            if s.compiled:
                lines.extend('    ' + line for line in s.program.report().splitlines())
        return '\n'.join(lines)

    # ------------------------------------------------------------------ calls
    def _inputs(self, args) -> Dict[str, Any]:
        specs = self._input_specs()
        if len(args) != self._n_user:
            raise errors.ArgumentError(f'the compiled model takes {self._n_user} inputs, got {len(args)}')
        env = {}
        it = iter(args)
        for name, target in specs:
            if target is None:  # a user input
                v = next(it)
                if not isinstance(v, torch.Tensor):
                    raise errors.ArgumentError(f'{name}: expected a tensor, got {type(v).__name__}')
                env[name] = v
            elif target in self._exported.constants:
                env[name] = self._exported.constants[target]
            else:  # a parameter or buffer, looked up on every call (training may replace it)
                v = self.module
                for part in target.split('.'):
                    v = getattr(v, part)
                env[name] = v
        return env

    def _input_specs(self) -> List[Tuple[str, Any]]:
        """(graph input name, None for a user input or the parameter/buffer/constant's
        target), computed once (not ``named_parameters()`` walked on every call)."""
        specs = self.__dict__.get('_specs')
        if specs is None:
            user = torch.export.graph_signature.InputKind.USER_INPUT
            specs = [(spec.arg.name, None if spec.kind == user else spec.target)
                     for spec in self._exported.graph_signature.input_specs]
            self.__dict__['_specs'] = specs
            self.__dict__['_n_user'] = sum(t is None for _, t in specs)
        return specs

    def forward(self, *args):
        env = self._inputs(args)
        needs_grad = torch.is_grad_enabled() and any(
            isinstance(v, torch.Tensor) and v.requires_grad for v in env.values())
        if needs_grad:
            from sdfgsparse.frontends.torch_ops import run_with_autograd
            self.calls['autograd'] += 1
            return run_with_autograd(self._exported.graph_module.graph, env, self._outputs())
        self.calls['sdfg'] += 1
        for seg in self._segments:
            seg.run(env)
        outs = [env[name] for name in self._outputs()]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _outputs(self) -> List[str]:
        return [spec.arg.name for spec in self._exported.graph_signature.output_specs]


def compile(model, example_inputs: Tuple[Any, ...], fallback: str = 'raise') -> CompiledModel:
    """Compile a ``torch.nn.Module`` or a function of tensors into SDFGs (see the module
    docstring). ``example_inputs``: a tuple of CPU tensors (dense, or sparse CSR / CSC /
    COO) like the ones the model will be called with; their values are not kept.

    :param fallback: ``'raise'`` (default): an ATen operation without a translation raises
                     :class:`~sdfgsparse.errors.UnsupportedOperationError` naming it;
                     ``'torch'``: it runs in torch between compiled segments.
    """
    if fallback not in FALLBACKS:
        raise errors.ArgumentError(f'ss.torch.compile: fallback must be one of {FALLBACKS}, got {fallback!r}')
    if isinstance(model, torch.nn.Module):
        layers = [(n, m) for n, m in model.named_modules() if isinstance(m, (SparseLinear, SparseConv2d))]
        if layers:
            n, m = layers[0]
            raise errors.UnsupportedOperationError(
                f'ss.torch.compile: layer {n or type(model).__name__} is a {type(m).__name__} ({m.format!r}); models '
                'with layout layers are not translated: call the model itself (each of its products runs as an '
                'sdfgsparse program), or sparsify with a density (CSR parameters) to compile it')
    t0 = time.perf_counter()
    module, exported = _export(model, example_inputs)
    timings = {'export': time.perf_counter() - t0}
    graph = exported.graph_module.graph
    user = [spec.arg.name for spec in exported.graph_signature.input_specs
            if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT]
    segments = plan_segments(graph, fallback, user)
    name = type(model).__name__ if isinstance(model, torch.nn.Module) else getattr(model, '__name__', 'fn')
    key = hashlib.sha256(str(graph).encode()).hexdigest()[:10]
    for k, seg in enumerate(segments):
        if seg.compiled:
            for step, seconds in translate(seg, f'{_identifier(name)}_{key}_{k}').items():
                timings[step] = timings.get(step, 0.0) + seconds
    return CompiledModel(module, exported, segments, fallback, time.perf_counter() - t0, timings)


def _identifier(name: str) -> str:
    out = ''.join(c if c.isalnum() else '_' for c in name)
    return out if out and not out[0].isdigit() else f'm_{out}'


def sparsify(module, density):
    """Sparsify the weights of ``module`` **in place** and return it.

    ``density`` a sparsifier (:class:`Magnitude`, :class:`Random`, :class:`Block`, each
    with its layout: ``ss.torch.Magnitude(layout=ss.NM[2, 4])``): every ``nn.Linear`` and
    every pointwise (1x1) ``nn.Conv2d`` below ``module`` becomes a :class:`SparseLinear` /
    :class:`SparseConv2d` whose weight is the sparsifier's :class:`LayoutTensor` (values a
    parameter, trainable by any torch optimizer); a ``nn.ReLU`` right after one in a
    ``nn.Sequential`` is fused into it; other convolutions stay dense. Raises
    ``ArgumentError`` when there is no such layer.

    ``density`` a number: the CSR form below, which :func:`compile` reads as CSR arguments.

    Prune every ``torch.nn.Linear`` weight of ``module`` (itself included) to its
    ``density`` fraction of largest-magnitude entries (``round(density * numel)``, at least
    one; ties to the lower flat index), stored as a sparse CSR parameter. **In place**, as
    ``torch.nn.utils.prune`` does; returns ``module``. Biases stay dense; a weight keeps its
    ``requires_grad``.

    The compiled model (:func:`compile`) reads such weights as CSR arguments and, in
    training, gives each a gradient on its pattern (a CSR tensor, from an SDDMM; the
    pattern never grows). Train it with any torch optimizer through :class:`SparseOptimizer`
    (torch's own optimizers do not take CSR parameters: ``Adam`` refuses them, ``SGD`` adds
    the gradient by a slow general sparse addition). ``copy.deepcopy`` cannot copy a module
    with CSR parameters (torch clones a parameter "preserving format", which CSR refuses):
    sparsify each copy you need. Eager
    torch runs the pruned model for inference (``F.linear`` takes a CSR weight), and trains
    it through :class:`SparseOptimizer` (its dense weight gradients are read on the pattern)."""
    if not isinstance(module, torch.nn.Module):
        raise errors.ArgumentError(f'ss.torch.sparsify: module must be a torch.nn.Module, got {type(module).__name__}')
    if isinstance(density, Sparsifier):
        wrapped = torch.nn.Sequential(module)  # so that module itself can be replaced too
        if not sparsify_layers(wrapped, density):
            raise errors.ArgumentError(f'ss.torch.sparsify: {type(module).__name__} has no torch.nn.Linear or '
                                       'pointwise torch.nn.Conv2d layer')
        if wrapped[0] is not module:
            raise errors.ArgumentError(f'ss.torch.sparsify: {type(module).__name__} is itself a layer; use '
                                       f'ss.torch.{type(wrapped[0]).__name__}.from_dense(layer, sparsifier)')
        return module
    density = check_density(density, 'ss.torch.sparsify')
    layers = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    if not layers:
        raise errors.ArgumentError(f'ss.torch.sparsify: {type(module).__name__} has no torch.nn.Linear layer')
    for lin in layers:
        W = lin.weight
        if W.layout != torch.strided:
            raise errors.ArgumentError(f'ss.torch.sparsify: a weight of {type(module).__name__} is already '
                                       f'{W.layout}; sparsify a dense model')
    for lin in layers:
        W = lin.weight.detach()
        keep = max(1, round(float(density) * W.numel()))
        order = torch.argsort(W.abs().flatten(), descending=True, stable=True)[:keep]
        mask = torch.zeros(W.numel(), dtype=torch.bool)
        mask[order] = True
        # built from the mask (kept entries that are 0.0 stay stored), rows in order
        rows, cols = mask.reshape(W.shape).nonzero(as_tuple=True)
        crow = torch.zeros(W.shape[0] + 1, dtype=torch.int64)
        crow[1:] = torch.bincount(rows, minlength=W.shape[0]).cumsum(0)
        csr = torch.sparse_csr_tensor(crow, cols, W[rows, cols], W.shape, check_invariants=False)
        lin.weight = torch.nn.Parameter(csr, requires_grad=lin.weight.requires_grad)
    return module


class SparseOptimizer:
    """A torch optimizer that trains sparse CSR parameters on their pattern.

    >>> opt = ss.torch.SparseOptimizer(torch.optim.Adam, model.parameters(), lr=1e-3)  # doctest: +SKIP

    ``optimizer_cls(proxies, **kwargs)`` is built over the dense parameters as they are and,
    for each CSR parameter, its values (a dense vector sharing the parameter's storage), so
    every torch optimizer, its state and its hyper-parameters apply unchanged and the
    pattern never changes. Before each :meth:`step` a CSR parameter's gradient is given to
    its values: a CSR gradient on the same pattern (what a model compiled by
    :func:`compile` produces) as it is, a dense gradient (eager torch's, for a CSR weight
    of ``F.linear``) read at the stored positions. ``params``: tensors, as for torch's
    optimizers (parameter groups are not supported).
    """

    def __init__(self, optimizer_cls, params, **kwargs):
        if not (isinstance(optimizer_cls, type) and issubclass(optimizer_cls, torch.optim.Optimizer)):
            raise errors.ArgumentError(f'SparseOptimizer: optimizer_cls must be a torch.optim.Optimizer class, got '
                                       f'{optimizer_cls!r}')
        if isinstance(params, torch.Tensor):
            raise errors.ArgumentError('SparseOptimizer: params must be an iterable of tensors, got one tensor')
        self.params = list(params)
        self._sparse = []  # (parameter, values proxy, (rows, cols) of its entries or None until needed)
        proxies = []
        for k, p in enumerate(self.params):
            if not isinstance(p, torch.Tensor):
                raise errors.ArgumentError(f'SparseOptimizer: params[{k}] is {type(p).__name__}, not a tensor '
                                           '(parameter groups are not supported)')
            if p.layout == torch.sparse_csr:
                proxy = p.detach().values()
                self._sparse.append([p, proxy, None])
                proxies.append(proxy)
            elif p.layout == torch.strided:
                proxies.append(p)
            else:
                raise errors.ArgumentError(f'SparseOptimizer: params[{k}] is {p.layout}; dense and CSR parameters '
                                           'are supported')
        self.optimizer = optimizer_cls(proxies, **kwargs)

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @property
    def state(self):
        return self.optimizer.state

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state):
        self.optimizer.load_state_dict(state)

    def zero_grad(self, set_to_none: bool = True):
        for entry in self._sparse:
            entry[0].grad = None
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for entry in self._sparse:
            p, proxy, _ = entry
            g = p.grad
            if g is None:
                proxy.grad = None
            elif g.layout == torch.sparse_csr:
                if g.values().numel() != proxy.numel() or not torch.equal(g.col_indices(), p.col_indices()) or \
                        not torch.equal(g.crow_indices(), p.crow_indices()):
                    raise errors.ArgumentError(f'SparseOptimizer: the gradient of a {tuple(p.shape)} CSR parameter '
                                               'has another pattern than the parameter')
                proxy.grad = g.values().detach().to(proxy.dtype)
            elif g.layout == torch.strided and g.shape == p.shape:
                if entry[2] is None:
                    crow = p.crow_indices()
                    rows = torch.repeat_interleave(torch.arange(p.shape[0]), crow[1:] - crow[:-1])
                    entry[2] = (rows, p.col_indices())
                rows, cols = entry[2]
                proxy.grad = g.detach()[rows, cols].to(proxy.dtype)
            else:
                raise errors.ArgumentError(f'SparseOptimizer: a {g.layout} gradient of shape {tuple(g.shape)} for a '
                                           f'{tuple(p.shape)} CSR parameter')
        self.optimizer.step()
        return loss
