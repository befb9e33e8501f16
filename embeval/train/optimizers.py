"""torch.optim's optimizers applied to many independent problems at once, and the optimizer string.

The optimizer string is SentEval's; embeval.settings.optimizers declares the optimizers (torch.optim
class, keywords, defaults, the values each refuses) and reads the string without torch. `parse`
reads it with that table, after checking that this torch's optimizer class takes the table's keywords
and defaults (a torch whose optimizers drifted from the table refuses here, never silently).

Every parameter tensor holds a (G, R) grid of problems; `shapes` says how a per-problem value
(G, R) broadcasts over each tensor. Each problem has its own weight decay (the regularization
grid; SentEval sets it on the optimizer, overriding any weight_decay of the string) and its own
step count. A step may carry a mask: a masked-out problem's parameters and state do not move.
The arithmetic is torch.optim's single-tensor implementation, operation by operation, written
with public device-agnostic torch operations (torch._foreach_* for the in-place Adam step).
"""

import inspect
from functools import cache

import numpy as np
import torch

from embeval.settings import optimizers as table

CLASSES = {name: getattr(torch.optim, optimizer.torch_class) for name, optimizer in table.OPTIMIZERS.items()}


def parse(text):
    """'adam' or 'sgd,lr=0.1,momentum=0.9' -> (name, settings) as embeval.settings.optimizers.parse
    reads it (a ValueError with one line where it is refused), once this torch's optimizer class has
    been found to take the keywords and defaults the table declares."""
    name, settings = table.parse(text)
    _same_as_table(name)
    return name, settings


@cache
def _same_as_table(name):
    """Refuse an optimizer whose torch.optim signature (keywords, defaults) is not the table's: the
    arithmetic follows the table, so another torch's optimizer must not be taken for it. The table's
    refusals are checked against torch's constructors by the tests; building an optimizer here would
    import torch._dynamo (about a second) for nothing."""
    cls = CLASSES[name]
    found = tuple((p.name, p.default) for p in list(inspect.signature(cls.__init__).parameters.values())[2:])
    if found != table.OPTIMIZERS[name].defaults:
        raise ValueError(
            f"torch.optim.{cls.__name__} of torch {torch.__version__} takes {dict(found)}, not the keywords and "
            f"defaults embeval's optimizer table declares for {name!r}: use a torch this embeval supports"
        )


class BatchedOptimizer:
    def __init__(self, name, params, weight_decay, settings, shapes=None):
        """params: tensors of a (G, R) problem grid; weight_decay: (G, R); settings: from `parse`."""
        self.name = name
        self.settings = settings
        self.weight_decay = weight_decay
        self.shapes = shapes or [tuple(p.shape[:2]) + (1,) * (p.dim() - 2) for p in params]
        self.steps = torch.zeros(weight_decay.shape, dtype=torch.float64, device=params[0].device)
        self.host_steps = np.zeros(weight_decay.shape, dtype=np.int64)
        self.uniform_step = 0
        self.state = [self._init_state(p) for p in params]

    def _init_state(self, p):
        s, zeros = self.settings, torch.zeros_like(p)
        if self.name == "adam":
            state = {"m": zeros, "v": torch.zeros_like(p)}
            if s["amsgrad"]:
                state["vmax"] = torch.zeros_like(p)
            return state
        if self.name == "adamax":
            return {"m": zeros, "u": torch.zeros_like(p)}
        if self.name == "adadelta":
            return {"sq": zeros, "acc": torch.zeros_like(p)}
        if self.name == "adagrad":
            return {"sum": torch.full_like(p, s["initial_accumulator_value"])}
        if self.name == "rmsprop":
            state = {"sq": zeros}
            if s["centered"]:
                state["avg"] = torch.zeros_like(p)
            if s["momentum"] > 0:
                state["buf"] = torch.zeros_like(p)
            return state
        if self.name == "rprop":
            return {"prev": zeros, "size": torch.full_like(p, s["lr"])}
        if self.name == "sgd":
            return {"buf": zeros} if s["momentum"] != 0 else {}
        return {}  # asgd: its averaged parameters are not used by the classifier

    def select(self, index, host_index):
        """The optimizer restricted to the problem groups `index` (on the device; the same
        groups as `host_index` on the host): a copy."""
        other = object.__new__(BatchedOptimizer)
        other.name, other.settings = self.name, self.settings
        other.weight_decay = self.weight_decay[index]
        other.shapes = [(len(index),) + tuple(s[1:]) for s in self.shapes]
        other.steps = self.steps[index]
        other.host_steps = self.host_steps[host_index]
        other.uniform_step = _shared_value(other.host_steps)
        other.state = [{k: v[index] for k, v in s.items()} for s in self.state]
        return other

    def put(self, index, host_index, other):
        """Write back the state of a selection made with `select(index, host_index)`."""
        self.steps[index] = other.steps
        self.host_steps[host_index] = other.host_steps
        self.uniform_step = _shared_value(self.host_steps)
        for mine, theirs in zip(self.state, other.state):
            for key in mine:
                mine[key][index] = theirs[key]

    def step(self, params, grads, mask=None, host_mask=None):
        """One update of every problem, or of those where mask (G, R) is True; host_mask: the
        mask's groups (G,) on the host, which keep the step counts known without asking the device."""
        if mask is None:
            self.steps += 1
            self.host_steps += 1
            self.uniform_step = None if self.uniform_step is None else self.uniform_step + 1
        else:
            self.steps = torch.where(mask, self.steps + 1, self.steps)
            self.host_steps[np.asarray(host_mask, dtype=bool)] += 1
            self.uniform_step = None
        s = self.settings
        if (
            self.uniform_step is not None
            and self.name == "adam"
            and not (s["amsgrad"] or s["maximize"] or s["decoupled_weight_decay"])
        ):
            return self._adam_in_place(params, grads, self.uniform_step)
        scalars = self._per_step()
        for p, g, state, shape in zip(params, grads, self.state, self.shapes):
            new_p, new_state = self._update(p, g, state, shape, {k: v.reshape(shape) for k, v in scalars.items()})
            if mask is None:
                p.copy_(new_p)
                for key, value in new_state.items():
                    state[key].copy_(value)
            else:
                m = mask.reshape(shape)
                p.copy_(torch.where(m, new_p, p))
                for key, value in new_state.items():
                    state[key].copy_(torch.where(m, value, state[key]))

    def _adam_in_place(self, params, grads, step):
        """Adam for every problem at the same step count: in place, torch.optim's single-tensor
        arithmetic on every tensor at once (torch's foreach operations); the per-problem weight
        decay is added to the gradient first, as torch.optim does.
        """
        s = self.settings
        beta1, beta2 = s["betas"]
        means, squares = [st["m"] for st in self.state], [st["v"] for st in self.state]
        torch._foreach_addcmul_(grads, [self.weight_decay.reshape(shape) for shape in self.shapes], params)
        torch._foreach_lerp_(means, grads, 1 - beta1)
        torch._foreach_mul_(squares, beta2)
        torch._foreach_addcmul_(squares, grads, grads, value=1 - beta2)
        denom = torch._foreach_sqrt(squares)
        torch._foreach_div_(denom, (1 - beta2**step) ** 0.5)
        torch._foreach_add_(denom, s["eps"])
        torch._foreach_addcdiv_(params, means, denom, value=-s["lr"] / (1 - beta1**step))

    def _per_step(self):
        """Per-problem step-size factors from the step counts (float64 arithmetic, as torch.optim's
        Python floats, then float32 as its kernels take them)."""
        s, t = self.settings, self.steps
        if self.name == "adam":
            beta1, beta2 = s["betas"]
            return {"step_size": (s["lr"] / (1 - beta1**t)).float(), "bias2_sqrt": (1 - beta2**t).sqrt().float()}
        if self.name == "adamax":
            return {"clr": (s["lr"] / (1 - s["betas"][0] ** t)).float()}
        if self.name == "adagrad":
            return {"clr": (s["lr"] / (1 + (t - 1) * s["lr_decay"])).float()}
        if self.name == "asgd":
            # torch keeps eta in a float32 tensor: lr before the first step, then lr / (1 + lambd lr t)^alpha
            eta = torch.where(
                t <= 1, torch.full_like(t, s["lr"]), s["lr"] / (1 + s["lambd"] * s["lr"] * (t - 1)) ** s["alpha"]
            ).float()
            return {"eta": eta, "decay": (1 - s["lambd"] * eta.double()).float()}
        if self.name == "sgd":
            return {"first": t == 1}
        return {}

    def _update(self, p, g, state, shape, scalars):
        """The new parameter and state tensors of one parameter tensor."""
        s = self.settings
        wd = self.weight_decay.reshape(shape)
        if s.get("maximize"):
            g = -g
        if self.name == "rprop":
            return _rprop(p, g, state, s)
        if self.name == "adam" and s["decoupled_weight_decay"]:
            p = p * (1 - s["lr"] * wd.double()).float()
        else:
            g = g + wd * p
        if self.name == "adam":
            beta1, beta2 = s["betas"]
            m = torch.lerp(state["m"], g, 1 - beta1)
            v = state["v"] * beta2 + (1 - beta2) * g * g
            out = {"m": m, "v": v}
            if s["amsgrad"]:
                out["vmax"] = v = torch.maximum(state["vmax"], v)
            denom = v.sqrt() / scalars["bias2_sqrt"] + s["eps"]
            return p - scalars["step_size"] * (m / denom), out
        if self.name == "adamax":
            beta1, beta2 = s["betas"]
            m = torch.lerp(state["m"], g, 1 - beta1)
            u = torch.maximum(state["u"] * beta2, g.abs() + s["eps"])
            return p - scalars["clr"] * (m / u), {"m": m, "u": u}
        if self.name == "adadelta":
            rho, eps = s["rho"], s["eps"]
            sq = state["sq"] * rho + (1 - rho) * g * g
            delta = (state["acc"] + eps).sqrt() / (sq + eps).sqrt() * g
            acc = state["acc"] * rho + (1 - rho) * delta * delta
            return p - s["lr"] * delta, {"sq": sq, "acc": acc}
        if self.name == "adagrad":
            total = state["sum"] + g * g
            return p - scalars["clr"] * (g / (total.sqrt() + s["eps"])), {"sum": total}
        if self.name == "asgd":
            return p * scalars["decay"] - scalars["eta"] * g, {}
        if self.name == "rmsprop":
            alpha = s["alpha"]
            sq = state["sq"] * alpha + (1 - alpha) * g * g
            out = {"sq": sq}
            if s["centered"]:
                out["avg"] = avg = torch.lerp(state["avg"], g, 1 - alpha)
                root = (sq - avg * avg).sqrt() + s["eps"]
            else:
                root = sq.sqrt() + s["eps"]
            if "buf" in state:
                out["buf"] = buf = state["buf"] * s["momentum"] + g / root
                return p - s["lr"] * buf, out
            return p - s["lr"] * (g / root), out
        if "buf" not in state:
            return p - s["lr"] * g, {}
        buf = torch.where(scalars["first"], g, state["buf"] * s["momentum"] + (1 - s["dampening"]) * g)
        direction = g + s["momentum"] * buf if s["nesterov"] else buf
        return p - s["lr"] * direction, {"buf": buf}


def _rprop(p, g, state, s):
    """Rprop (no weight decay: torch.optim.Rprop has none)."""
    etaminus, etaplus = s["etas"]
    low, high = s["step_sizes"]
    sign = (g * state["prev"]).sign()
    factor = torch.where(sign > 0, etaplus, torch.where(sign < 0, etaminus, 1.0))
    size = (state["size"] * factor).clamp(low, high)
    g = torch.where(factor == etaminus, torch.zeros_like(g), g)
    return p - g.sign() * size, {"prev": g, "size": size}


def _shared_value(steps):
    """The step count every problem has reached (host counts), or None where they differ."""
    return int(steps.min()) if steps.size and steps.min() == steps.max() else None
