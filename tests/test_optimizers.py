"""The optimizer string as SentEval reads it, and the batched optimizers step for step against torch.optim."""

import inspect
import itertools
import subprocess
import sys

import numpy as np
import pytest
import torch

from embeval.errors import EmbevalError
from embeval.run.config import build
from embeval.settings import optimizers as table
from embeval.train.optimizers import CLASSES, BatchedOptimizer, parse


@pytest.mark.parametrize("name", sorted(set(CLASSES) - {"sgd"}))
def test_a_bare_name_takes_torchs_defaults(name):
    got_name, settings = parse(name)
    defaults = CLASSES[name]([torch.zeros(1, requires_grad=True)]).defaults
    assert got_name == name
    assert settings == {
        k: v
        for k, v in defaults.items()
        if k not in ("foreach", "fused", "capturable", "differentiable", "weight_decay")
    }


def test_settings_use_torchs_keyword_names():
    assert parse("sgd,lr=0.1,momentum=0.9,nesterov=1")[1] == {
        "lr": 0.1,
        "momentum": 0.9,
        "dampening": 0,
        "nesterov": True,
        "maximize": False,
    }
    assert parse("adam,lr=.5,amsgrad=1,eps=0.001")[1]["lr"] == 0.5
    assert parse("rmsprop,lr=-0,centered=1")[1]["centered"] is True
    assert parse("adagrad,lr_decay=0.1,initial_accumulator_value=0.5")[1]["initial_accumulator_value"] == 0.5
    assert parse("adam,weight_decay=0.5,foreach=0")[1] == parse("adam")[1]  # the grid's decay applies


@pytest.mark.parametrize(
    "text,message",
    [
        ("sgd", "needs a learning rate"),
        ("nadam", "unknown optimizer 'nadam'"),
        ("adam,lr", "not key=value"),
        ("adam,lr=0.1,", "not key=value"),
        ("adam,lr=1e-3", "not a plain decimal"),
        ("adam,lr=x", "not a plain decimal"),
        ("adam,beta1=0.9", "takes no 'beta1'"),
        ("adam, lr=0.1", "takes no ' lr'"),
        ("adam,betas=0.9", "pair of numbers"),
        ("adam,lr=-0.1", "refuses"),
        ("sgd,lr=0.1,nesterov=1", "refuses"),
        ("rprop,lr=0.1,momentum=0.9", "takes no 'momentum'"),
    ],
)
def test_strings_senteval_refuses_are_one_line_errors_naming_the_option(text, message):
    with pytest.raises(ValueError, match=message):
        parse(text)
    with pytest.raises(EmbevalError) as err:
        build(classifier={"optim": text})
    assert "--classifier" in str(err.value) and "\n" not in str(err.value) and message in str(err.value)


@pytest.mark.parametrize("name", sorted(table.OPTIMIZERS))
def test_the_table_declares_torch_optims_keywords_and_defaults(name):
    """The torch-free table names each optimizer's torch.optim class, and its keywords with torch's
    defaults (values and types), in the signature's order."""
    cls = getattr(torch.optim, table.OPTIMIZERS[name].torch_class)
    assert CLASSES[name] is cls
    parameters = list(inspect.signature(cls.__init__).parameters.values())[2:]
    declared = table.OPTIMIZERS[name].defaults
    assert [p.name for p in parameters] == [key for key, _ in declared]
    for (key, default), parameter in zip(declared, parameters):
        assert default == parameter.default and type(default) is type(parameter.default), (name, key)


def _torch_reference(text):
    """(name, settings) as torch.optim itself reads the string, independently of embeval's table: the
    class built with the string's keywords (SentEval's rules first: sgd needs lr, no pair from one
    number), its `defaults` without the implementation switches and weight_decay; None when refused."""
    name, _, rest = text.partition(",")
    given = {k: float(v) for k, v in (part.split("=") for part in rest.split(","))} if rest else {}
    if name not in CLASSES or (name == "sgd" and "lr" not in given) or any(k in table.PAIRS for k in given):
        return None
    try:
        defaults = CLASSES[name]([torch.zeros(1, requires_grad=True)], **given).defaults
    except (ValueError, TypeError, RuntimeError):
        return None
    flags = ("amsgrad", "maximize", "centered", "nesterov", "decoupled_weight_decay")
    return name, {
        k: bool(v) if k in flags else v
        for k, v in defaults.items()
        if k not in ("foreach", "fused", "capturable", "differentiable", "weight_decay")
    }


def _strings():
    """Every optimizer with every keyword alone at values on both sides of torch's limits, and the
    combinations torch checks together (Nesterov's momentum and dampening; fused with foreach and
    differentiable)."""
    values = ("-1", "-0", "0", "0.5", "1", "1.5", "2")
    for name, optimizer in table.OPTIMIZERS.items():
        lr = ["lr=0.1"] if name == "sgd" else []
        yield ",".join([name] + lr)
        for key in optimizer.keywords:
            for value in values:
                yield ",".join([name] + [p for p in lr if not p.startswith(key + "=")] + [f"{key}={value}"])
        switches = [k for k in ("fused", "foreach", "differentiable", "capturable") if k in optimizer.keywords]
        for on in itertools.product(("0", "1"), repeat=len(switches)):
            yield ",".join([name] + lr + [f"{k}={v}" for k, v in zip(switches, on)])
    for momentum, dampening, nesterov in itertools.product(("0", "0.5"), ("0", "0.1"), ("0", "1")):
        yield f"sgd,lr=0.1,momentum={momentum},dampening={dampening},nesterov={nesterov}"
    yield from ("nadam", "adam,beta1=0.9", "sgd,momentum=0.9")


def test_the_table_and_torch_accept_and_refuse_the_same_strings():
    """Over 500 strings: embeval's torch-free reading (what the command line checks) and the trainer's
    accept exactly the strings torch.optim accepts, with torch's settings."""
    strings = list(dict.fromkeys(_strings()))
    assert len(strings) > 500
    disagree = []
    for text in strings:
        reference = _torch_reference(text)
        ours = None if table.problem(text) else table.parse(text)
        try:
            trainer = parse(text)
        except ValueError:
            trainer = None
        if not (ours == reference == trainer):
            disagree.append((text, reference, ours, trainer))
    assert disagree == []
    accepted = sum(table.problem(text) is None for text in strings)
    assert 0.3 * len(strings) < accepted < 0.9 * len(strings)  # both outcomes are well represented


CASES = [
    "adam",
    "adam,lr=0.01",
    "adam,lr=0.01,amsgrad=1",
    "adam,lr=0.01,maximize=1",
    "adam,lr=0.01,decoupled_weight_decay=1",
    "adamax,lr=0.01",
    "adadelta",
    "adadelta,lr=0.5,rho=0.8",
    "adagrad",
    "adagrad,lr=0.1,lr_decay=0.01,initial_accumulator_value=0.1",
    "asgd,lr=0.05",
    "asgd,lr=0.05,t0=3,lambd=0.01",
    "rmsprop",
    "rmsprop,lr=0.01,momentum=0.5,centered=1",
    "rprop",
    "rprop,lr=0.05",
    "sgd,lr=0.1",
    "sgd,lr=0.1,momentum=0.5,dampening=0.2",
    "sgd,lr=0.1,momentum=0.9,nesterov=1",
]


@pytest.mark.parametrize("text", CASES)
def test_batched_optimizer_equals_torch_optim_step_for_step(text):
    """A 2 x 3 grid of problems, each with its own weight decay, 15 steps with some groups held still
    (masked) at some steps: every problem's weights equal torch.optim's on that problem alone."""
    name, settings = parse(text)
    G, R, steps = 2, 3, 15
    rng = np.random.default_rng(0)
    regs = np.array([[0.0, 1e-3, 1e-1], [1e-2, 0.0, 0.5]])
    start = rng.standard_normal((G, R, 4, 3)).astype(np.float32)
    bias = rng.standard_normal((G, R, 4)).astype(np.float32)
    grads = rng.standard_normal((steps, G, R, 4, 3)).astype(np.float32)
    bias_grads = rng.standard_normal((steps, G, R, 4)).astype(np.float32)
    moves = np.ones((steps, G), dtype=bool)
    moves[[3, 4, 9], 0] = False
    moves[[6], 1] = False
    ours = [torch.tensor(start), torch.tensor(bias)]
    optimizer = BatchedOptimizer(name, ours, torch.tensor(regs, dtype=torch.float32), settings)
    references = {}
    for g in range(G):
        for r in range(R):
            weights = [torch.nn.Parameter(torch.tensor(start[g, r])), torch.nn.Parameter(torch.tensor(bias[g, r]))]
            decay = {} if name == "rprop" else {"weight_decay": regs[g, r]}  # Rprop has no weight decay
            references[g, r] = (weights, CLASSES[name](weights, **dict(settings, **decay)))
    for t in range(steps):
        for g in range(G):
            if moves[t, g]:
                for r in range(R):
                    weights, opt = references[g, r]
                    weights[0].grad, weights[1].grad = torch.tensor(grads[t, g, r]), torch.tensor(bias_grads[t, g, r])
                    opt.step()
        step_grads = [torch.tensor(grads[t]), torch.tensor(bias_grads[t])]
        if moves[t].all():
            optimizer.step(ours, step_grads)
        else:
            mask = torch.tensor(moves[t])[:, None].expand(G, R)
            optimizer.step(ours, step_grads, mask, moves[t])
        for g in range(G):
            for r in range(R):
                weights, _ = references[g, r]
                for mine, theirs in zip(ours, weights):
                    torch.testing.assert_close(
                        mine[g, r], theirs.detach(), rtol=2e-6, atol=2e-6, msg=f"{text}: step {t}, problem {g, r}"
                    )


def test_batched_adam_is_torch_optim_single_tensor_adam_bit_for_bit():
    """Adam at a step count shared by every problem (the batched trainer's usual case) gives exactly
    the weights of torch.optim.Adam's single-tensor path, which SentEval runs on the CPU."""
    name, settings = parse("adam")
    R, steps = 5, 60
    rng = np.random.default_rng(1)
    regs = np.array([[0.0, 1e-5, 1e-3, 1e-1, 0.5]])
    start = rng.standard_normal((1, R, 2, 64)).astype(np.float32)
    bias = rng.standard_normal((1, R, 2)).astype(np.float32)
    ours = [torch.tensor(start), torch.tensor(bias)]
    optimizer = BatchedOptimizer(name, ours, torch.tensor(regs, dtype=torch.float32), settings)
    references = []
    for r in range(R):
        weights = [torch.nn.Parameter(torch.tensor(start[0, r])), torch.nn.Parameter(torch.tensor(bias[0, r]))]
        references.append(
            (weights, torch.optim.Adam(weights, weight_decay=float(np.float32(regs[0, r])), foreach=False, **settings))
        )
    for _ in range(steps):
        grads = [torch.tensor(rng.standard_normal(p.shape).astype(np.float32)) for p in ours]
        for r, (weights, opt) in enumerate(references):
            weights[0].grad, weights[1].grad = grads[0][0, r].clone(), grads[1][0, r].clone()
            opt.step()
        optimizer.step(ours, grads)
    for r, (weights, _) in enumerate(references):
        for mine, theirs in zip(ours, weights):
            assert torch.equal(mine[0, r], theirs.detach()), f"problem {r}"


def test_a_torch_whose_optimizer_drifted_from_the_table_is_refused(monkeypatch):
    """parse compares this torch's signature with the table instead of building an optimizer."""
    from embeval.train import optimizers

    class Drifted(torch.optim.Adam):
        def __init__(self, params, lr=0.002, betas=(0.9, 0.999), eps=1e-08):
            super().__init__(params, lr=lr, betas=betas, eps=eps)

    optimizers._same_as_table.cache_clear()
    monkeypatch.setitem(optimizers.CLASSES, "adam", Drifted)
    try:
        with pytest.raises(ValueError, match="not the keywords and defaults embeval's optimizer table declares"):
            optimizers.parse("adam")
    finally:
        optimizers._same_as_table.cache_clear()


def test_reading_an_optimizer_string_builds_no_torch_optimizer():
    """Building a torch.optim optimizer imports torch._dynamo (about a second per process)."""
    code = (
        "import sys; from embeval.train.optimizers import parse; parse('rmsprop'); parse('sgd,lr=0.1'); "
        "print('torch._dynamo' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
