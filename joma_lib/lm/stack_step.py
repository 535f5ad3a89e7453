"""The training step of a stack of runs (:class:`~joma_lib.lm.stacked.StackedLM`): loss, backward, each run's
gradient-norm clip and Adam, with nothing read back to the host, so that on a GPU the whole step is captured
once as a CUDA graph and replayed (one launch instead of hundreds: the unstacked step is launch-bound there).

Each run has its own learning rate and its own step count. For run ``r`` with gradient ``g``, Adam (Kingma & Ba
2015, Algorithm 1, as ``torch.optim.Adam`` computes it) is

    m <- b1 m + (1 - b1) g,   v <- b2 v + (1 - b2) g^2,
    theta <- theta - lr_r / (1 - b1^t_r) * m / (sqrt(v) / sqrt(1 - b2^t_r) + eps),

which is what each run's slices go through: torch's fused Adam (:func:`fused_adam_`), the unstacked runner's own
kernel on the CPU, one call per run. The clip of each run's gradient to norm ``c_r`` is
``torch.nn.utils.clip_grad_norm_``'s:
``g <- g * min(1, c_r / (||g_r|| + 1e-6))`` with ``||g_r||`` over all of run ``r``'s parameters.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch.optim.adam import adam

from joma_lib.base.precision import numerics
from joma_lib.lm.stacked import CounterMasks, StackedLM

BETAS, EPS = (0.9, 0.999), 1e-8  # torch.optim.Adam's defaults, as make_optimizer uses them
#: eager steps (on a side stream) before a step is captured: cuBLAS and the allocator settle first
WARMUP_STEPS = 3


class AdamState:
    """Each run's Adam moments and step count for every parameter of a stack (zero: a fresh optimiser)."""

    def __init__(self, params: Sequence[torch.Tensor]) -> None:
        self.exp_avg = [torch.zeros_like(p) for p in params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in params]
        self.steps = torch.zeros(params[0].shape[0], dtype=torch.float64, device=params[0].device)

    def reset(self) -> None:
        """A new optimiser for every run (the authors' reset at each epoch)."""
        for t in (*self.exp_avg, *self.exp_avg_sq, self.steps):
            t.zero_()


@torch.no_grad()
def clip_(grads: Sequence[torch.Tensor], clip: torch.Tensor) -> None:
    """Scale each run's gradients so that their norm is at most ``clip[r]`` (see the module docstring), as
    ``clip_grad_norm_`` does for one run: the norm of its tensors' norms (``get_total_norm``'s multi-tensor norms,
    of every run's tensors in one call), then one multi-tensor scaling per run."""
    runs = [[g[r] for g in grads] for r in range(clip.numel())]
    tensor_norms = torch.stack(torch._foreach_norm([t for run in runs for t in run])).view(len(runs), -1)
    norms = torch.linalg.vector_norm(tensor_norms, 2.0, dim=1)  # [R]
    coef = (clip.to(norms.dtype) / (norms + 1e-6)).clamp(max=1.0)
    for run, c in zip(runs, coef.unbind(), strict=True):
        torch._foreach_mul_(run, c)


@torch.no_grad()
def fused_adam_(params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor], state: AdamState, lr: torch.Tensor
                ) -> None:
    """One Adam update of every run (see the module docstring): each run's slices go through torch's fused Adam,
    the kernel of the unstacked runner's optimiser (:func:`~joma_lib.lm.step.make_optimizer`), with the run's own
    learning rate and step count. It reads and writes each tensor once; on a GPU a call is a couple of kernels for
    all of a run's tensors (a written-out update was ten per tensor) and reads its learning rate and step from the
    device, so the step can be captured. A run's slice ``p[r]`` of a stacked parameter is contiguous, so the
    kernel updates the stack in place; a gradient can come strided (that of a transposed weight in a batched
    product), and the kernel walks every tensor in the parameter's layout, so it is made contiguous first."""
    b1, b2 = BETAS
    grads = [g.contiguous() for g in grads]
    # torch's Adam keeps a float32 step per tensor and adds 1 to it before the update
    steps = state.steps.to(torch.float32)[:, None].repeat(1, len(params))
    on_cpu = lr.device.type == "cpu"
    run_lrs = lr.tolist() if on_cpu else lr.to(torch.float32).unbind()
    for r, run_lr in enumerate(run_lrs):
        adam([p[r] for p in params], [g[r] for g in grads], [m[r] for m in state.exp_avg],
             [v[r] for v in state.exp_avg_sq], [], list(steps[r].unbind()), fused=True, amsgrad=False, beta1=b1,
             beta2=b2, lr=run_lr, weight_decay=0.0, eps=EPS, maximize=False)
    state.steps += 1


class Bf16Copies:
    """bf16 copies of the weights and biases of every layer's linear maps (:meth:`StackedLM.linear_names`), for a
    step in bf16 autocast.

    Autocast rounds a float32 weight to bf16 at the product that reads it and widens its bf16 gradient back to
    float32: one kernel each way for each weight and bias, 16 a layer, where a GPU step of this model costs about its
    number of kernels. Here the copies are made for all of them in one multi-tensor copy a step
    (``torch._foreach_copy_`` converts as it copies), the products read them as they are (autocast casts nothing
    already in bf16), and their gradients are widened into float32 buffers in one more. The numbers are autocast's
    bit for bit: the same weights rounded to bf16, the same products, the gradients widened exactly and laid out as
    autocast's come.
    """

    def __init__(self, model: StackedLM) -> None:
        self.params = model.params
        names = set(model.linear_names())
        self.index = [i for i, name in enumerate(self.params) if name in names]
        self.names = [name for name in self.params if name in names]
        self.masters = [self.params[name] for name in self.names]
        self.copies = [p.detach().to(torch.bfloat16).requires_grad_() for p in self.masters]
        self.widened: list[torch.Tensor] = []

    @contextmanager
    def in_use(self) -> Iterator[list[torch.Tensor]]:
        """Inside the block the model reads the copies, made afresh from the float32 weights; yields the tensors to
        differentiate the loss by: the model's parameters, the copies in the place of those copied."""
        with torch.no_grad():
            torch._foreach_copy_(self.copies, self.masters)
        self.params.update(zip(self.names, self.copies, strict=True))
        try:
            yield list(self.params.values())
        finally:
            self.params.update(zip(self.names, self.masters, strict=True))

    def widen(self, grads: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The gradients by the tensors :meth:`in_use` yielded, those of the copies widened to float32."""
        low = [grads[i] for i in self.index]
        if not self.widened:  # once: buffers laid out as the gradients come (kept for a captured graph)
            self.widened = [torch.empty_strided(g.shape, g.stride(), dtype=torch.float32, device=g.device)
                            for g in low]
        torch._foreach_copy_(self.widened, low)
        out = list(grads)
        for i, wide in zip(self.index, self.widened, strict=True):
            out[i] = wide
        return out


class StackStep:
    """The step of a stack: ``step(x, y)`` trains every run on the batch ``x -> y`` and adds each run's loss
    to ``running`` (``[R]``, on the device). On a GPU it is captured as a CUDA graph per sequence length after
    :data:`WARMUP_STEPS` eager steps (``capture=False``, or a capture that fails, keeps it eager: ``mode`` says
    which)."""

    def __init__(self, model: StackedLM, state: AdamState, lr: torch.Tensor, clip: torch.Tensor, precision: str,
                 capture: bool = True) -> None:
        self.model, self.state, self.lr, self.clip = model, state, lr, clip
        self.params = list(model.params.values())
        self.precision = precision
        self.device = self.params[0].device
        self.running = torch.zeros(model.n_runs, dtype=torch.float32, device=self.device)
        self.mode = "cuda-graph" if capture and self.device.type == "cuda" else "eager"
        self._graphs: dict[tuple[int, ...], tuple[torch.cuda.CUDAGraph, torch.Tensor, torch.Tensor]] = {}
        self._eager_steps: dict[tuple[int, ...], int] = {}
        self._copies = Bf16Copies(model) if precision == "bf16" else None

    def _body(self, x: torch.Tensor, y: torch.Tensor) -> None:
        masks = self.model.masks
        if isinstance(masks, CounterMasks):
            masks.start_step(tuple(x.shape))
        if self._copies is None:
            with numerics(self.precision, self.device):
                losses = self.model.losses(x, y)
            grads = list(torch.autograd.grad(losses.sum(), self.params))
        else:
            with numerics(self.precision, self.device), self._copies.in_use() as inputs:
                losses = self.model.losses(x, y)
            grads = self._copies.widen(torch.autograd.grad(losses.sum(), inputs))
        clip_(grads, self.clip)
        fused_adam_(self.params, grads, self.state, self.lr)
        with torch.no_grad():
            self.running += losses.detach()
        if isinstance(masks, CounterMasks):
            masks.advance()

    def warm_up(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Train :data:`WARMUP_STEPS` + 1 steps on ``x -> y``, so that the next step of this shape is a replay of its
        captured graph on a GPU (a throw-away stack whose step is to be timed)."""
        for _ in range(WARMUP_STEPS + 1):
            self.step(x, y)

    def step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        if self.mode == "eager":
            self._body(x, y)
            return
        key = tuple(x.shape)
        if key in self._graphs:
            graph, static_x, static_y = self._graphs[key]
            static_x.copy_(x)
            static_y.copy_(y)
            graph.replay()
            return
        done = self._eager_steps.get(key, 0)
        if done < WARMUP_STEPS:  # warm-up steps are real steps, run eagerly on a side stream
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                self._body(x, y)
            torch.cuda.current_stream(self.device).wait_stream(side)
            self._eager_steps[key] = done + 1
            return
        self._capture(key, x, y)

    def _capture(self, key: tuple[int, ...], x: torch.Tensor, y: torch.Tensor) -> None:
        static_x, static_y = x.clone(), y.clone()
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self._body(static_x, static_y)
        except Exception as err:  # a capture that fails leaves the state untouched: nothing ran
            print(f"joma_lib: capturing the training step as a CUDA graph failed ({type(err).__name__}: "
                  f"{' '.join(str(err).split())[:200]}); training eagerly", file=sys.stderr)
            self.mode = "eager"
            torch.cuda.synchronize(self.device)
            self._body(x, y)
            return
        self._graphs[key] = (graph, static_x, static_y)
        graph.replay()  # capturing only records: this replay is the step


def on_device(values: Sequence[float], device: torch.device) -> torch.Tensor:
    """Per-run hyperparameters (learning rates, clips) as one float64 tensor ``[R]`` on ``device``."""
    return torch.tensor(list(values), dtype=torch.float64, device=device)
