"""PyTorch's Adam, RMSprop, SGD and Adagrad, applied to many independent problems at once.

Every parameter tensor holds a (G, R) grid of problems; `shapes` says how a per-problem value
(G, R) broadcasts over each tensor. Each problem has its own weight decay (L2 added to the
gradient, as torch.optim does) and its own step count. A step may carry a mask: a masked-out
problem's parameters and state do not move. The arithmetic follows torch.optim's single-tensor
implementations operation by operation.
"""
import numpy as np
import torch


class BatchedOptimizer:
    def __init__(self, name, params, weight_decay, settings, shapes=None):
        """params: tensors of a (G, R) problem grid; weight_decay: (G, R); shapes: broadcast shapes."""
        self.name = name
        self.settings = settings
        self.weight_decay = weight_decay
        self.shapes = shapes or [tuple(p.shape[:2]) + (1,) * (p.dim() - 2) for p in params]
        self.steps = torch.zeros(weight_decay.shape, dtype=torch.float64, device=params[0].device)
        self.host_steps = np.zeros(weight_decay.shape, dtype=np.int64)
        self.uniform_step = 0
        self.state = [self._init_state(p) for p in params]

    def _init_state(self, p):
        if self.name == "adam":
            return {"m": torch.zeros_like(p), "v": torch.zeros_like(p)}
        if self.name == "rmsprop":
            state = {"sq": torch.zeros_like(p)}
            if self.settings["momentum"] > 0:
                state["buf"] = torch.zeros_like(p)
            return state
        if self.name == "sgd":
            return {"buf": torch.zeros_like(p)} if self.settings["momentum"] > 0 else {}
        return {"sum": torch.full_like(p, self.settings["initial_accumulator_value"])}

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
        if self.uniform_step is not None and self.name == "adam":
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
        means, squares = [st["m"] for st in self.state], [st["v"] for st in self.state]
        torch._foreach_addcmul_(grads, [self.weight_decay.reshape(shape) for shape in self.shapes], params)
        torch._foreach_lerp_(means, grads, 1 - s["beta1"])
        torch._foreach_mul_(squares, s["beta2"])
        torch._foreach_addcmul_(squares, grads, grads, value=1 - s["beta2"])
        denom = torch._foreach_sqrt(squares)
        torch._foreach_div_(denom, (1 - s["beta2"] ** step) ** 0.5)
        torch._foreach_add_(denom, s["eps"])
        torch._foreach_addcdiv_(params, means, denom, value=-s["lr"] / (1 - s["beta1"] ** step))

    def _per_step(self):
        """Per-problem step-size factors (float64 arithmetic, as torch.optim's Python floats)."""
        s = self.settings
        if self.name == "adam":
            return {"step_size": (s["lr"] / (1 - s["beta1"] ** self.steps)).float(),
                    "bias2_sqrt": (1 - s["beta2"] ** self.steps).sqrt().float()}
        if self.name == "adagrad":
            return {"clr": (s["lr"] / (1 + (self.steps - 1) * s["lr_decay"])).float()}
        return {}

    def _update(self, p, g, state, shape, scalars):
        """The new parameter and state tensors of one parameter tensor."""
        s = self.settings
        g = g + self.weight_decay.reshape(shape) * p
        if self.name == "adam":
            exp_avg = torch.lerp(state["m"], g, 1 - s["beta1"])
            exp_avg_sq = state["v"] * s["beta2"] + (1 - s["beta2"]) * g * g
            denom = exp_avg_sq.sqrt() / scalars["bias2_sqrt"] + s["eps"]
            return p - scalars["step_size"] * (exp_avg / denom), {"m": exp_avg, "v": exp_avg_sq}
        if self.name == "rmsprop":
            sq = state["sq"] * s["alpha"] + (1 - s["alpha"]) * g * g
            avg = sq.sqrt() + s["eps"]
            if "buf" in state:
                buf = state["buf"] * s["momentum"] + g / avg
                return p - s["lr"] * buf, {"sq": sq, "buf": buf}
            return p - s["lr"] * (g / avg), {"sq": sq}
        if self.name == "sgd":
            if "buf" in state:
                first = (self.steps == 1).reshape(shape)
                buf = torch.where(first, g, state["buf"] * s["momentum"] + g)
                return p - s["lr"] * buf, {"buf": buf}
            return p - s["lr"] * g, {}
        total = state["sum"] + g * g
        return p - scalars["clr"] * (g / (total.sqrt() + s["eps"])), {"sum": total}


def _shared_value(steps):
    """The step count every problem has reached (host counts), or None where they differ."""
    return int(steps.min()) if steps.size and steps.min() == steps.max() else None
