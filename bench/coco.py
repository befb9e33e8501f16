"""COCO image-caption retrieval at full size with synthetic features: time per epoch, and memory.

SentEval's COCO sizes: 113,287 train images x 5 captions, 5,000 dev and 5,000 test images (x 5),
2048-d image features; captions here are 768-d. A caption's vector is the first 768 features of
its image plus noise, so the model has something to learn. Times the training steps of
embeval.evaluate.retrieval (the real code path), one full dev evaluation (5 folds of 1,000 images),
and SentEval's way of drawing the contrastive samples (a Python list of the complement and
np.random.choice per batch) against embeval's equivalent draw.

An epoch has 4,426 batches; on a small CPU that is tens of minutes, so by default the CPU run times
--batches batches and extrapolates to the epoch (the output says so). --batches 0 runs full epochs.

    python bench/coco.py                       # CPU, 60 batches, writes bench/results/coco_cpu.json
    python bench/coco.py --device cuda --batches 0 --epochs 2
"""

import argparse
import itertools
import json
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from embeval.evaluate import retrieval  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def rss_mb():
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def synthetic(n_train, n_eval, sent_dim, img_dim, seed=0):
    """Image features per split and one caption table (train, dev, test captions in that order)."""
    rng = np.random.default_rng(seed)
    images = {
        name: rng.standard_normal((n, img_dim), dtype=np.float32)
        for name, n in (("train", n_train), ("dev", n_eval), ("test", n_eval))
    }
    n_captions = 5 * (n_train + 2 * n_eval)
    table = np.empty((n_captions, sent_dim), dtype=np.float32)
    offset, rows = 0, {}
    for name, feats in images.items():
        n = 5 * len(feats)
        block = table[offset : offset + n]
        rng.standard_normal(out=block, dtype=np.float32)
        block *= 2.0
        block.reshape(len(feats), 5, sent_dim)[...] += feats[:, None, :sent_dim]  # in place, no temporary
        rows[name] = np.arange(offset, offset + n)
        offset += n
    return images, table, rows


def senteval_draw_seconds(n, batches, rng):
    """Seconds per batch of SentEval's draw: the complement as a Python list, then two choices."""
    permutation = list(rng.permutation(n))
    start = time.perf_counter()
    for i in range(0, batches * retrieval.BATCH_SIZE, retrieval.BATCH_SIZE):
        complement = permutation[:i] + permutation[i + retrieval.BATCH_SIZE :]
        rng.choice(complement, retrieval.NCONTRAST * retrieval.BATCH_SIZE)
        rng.choice(complement, retrieval.NCONTRAST * retrieval.BATCH_SIZE)
    return (time.perf_counter() - start) / batches


def embeval_draw_seconds(n, batches, rng):
    start = time.perf_counter()
    for _ in itertools.islice(retrieval.epoch_batches(rng, n), batches):
        pass
    return (time.perf_counter() - start) / batches


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    parser.add_argument("--batches", type=int, default=60, help="train batches to time per epoch (0: whole epochs)")
    parser.add_argument("--epochs", type=int, default=1, help="epochs (each followed by a dev evaluation)")
    parser.add_argument("--train-images", type=int, default=113287)
    parser.add_argument("--eval-images", type=int, default=5000)
    parser.add_argument("--sentence-dim", type=int, default=768)
    parser.add_argument("--image-dim", type=int, default=2048)
    parser.add_argument("--out", default=None, help="results JSON (default bench/results/coco_DEVICE.json)")
    args = parser.parse_args()
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device)

    t0 = time.perf_counter()
    images, table_np, rows = synthetic(args.train_images, args.eval_images, args.sentence_dim, args.image_dim)
    build_seconds = time.perf_counter() - t0
    rss_data = rss_mb()
    table = torch.from_numpy(table_np).to(device)
    splits = {
        name: retrieval.CaptionSplit(
            table, rows[name], np.repeat(np.arange(len(images[name])), 5), images[name], device
        )
        for name in images
    }
    train, dev = splits["train"], splits["dev"]
    shared = device.type == "cpu" and train.images.data_ptr() == images["train"].ctypes.data
    nbatches_epoch = -(-len(train) // retrieval.BATCH_SIZE)
    timed = nbatches_epoch if args.batches <= 0 else min(args.batches, nbatches_epoch)

    rng = np.random.RandomState(1111)
    model = retrieval.RankingModel(table.shape[1], train.images.shape[1], 1111).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    epochs = []
    for epoch in range(args.epochs):
        model.train()
        sync(device)
        start = time.perf_counter()
        for batch in itertools.islice(retrieval.epoch_batches(rng, len(train)), timed):
            retrieval.train_step(model, optimizer, train, batch)
        sync(device)
        train_seconds = time.perf_counter() - start
        start = time.perf_counter()
        acc, score = retrieval.evaluate_split(model, dev)
        sync(device)
        eval_seconds = time.perf_counter() - start
        per_epoch = train_seconds * nbatches_epoch / timed
        epochs.append(
            {
                "batches": timed,
                "train_seconds": round(train_seconds, 2),
                "seconds_per_batch": round(train_seconds / timed, 4),
                "epoch_seconds": round(per_epoch, 1),
                "dev_eval_seconds": round(eval_seconds, 2),
                "dev_score": round(score, 2),
                "dev_i2t_r10": round(acc["i2t"]["r10"], 2),
                "dev_t2i_r10": round(acc["t2i"]["r10"], 2),
            }
        )
        print(
            f"epoch {epoch + 1}: {timed} batches in {train_seconds:.1f} s "
            f"({train_seconds / timed:.3f} s/batch) -> {per_epoch:.0f} s per epoch of {nbatches_epoch} batches"
            f"{'' if timed == nbatches_epoch else ' (extrapolated)'}; dev evaluation {eval_seconds:.1f} s, "
            f"dev score {score:.1f}"
        )

    draw_batches = 20
    senteval_draw = senteval_draw_seconds(len(train), draw_batches, np.random.RandomState(0))
    embeval_draw = embeval_draw_seconds(len(train), draw_batches, np.random.RandomState(0))
    per_epoch = float(np.mean([e["epoch_seconds"] for e in epochs]))
    eval_seconds = float(np.mean([e["dev_eval_seconds"] for e in epochs]))
    record = {
        "benchmark": "coco",
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else platform.processor() or platform.machine(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "sizes": {
            "train_images": args.train_images,
            "train_captions": len(train),
            "eval_images": args.eval_images,
            "sentence_dim": args.sentence_dim,
            "image_dim": args.image_dim,
            "batches_per_epoch": nbatches_epoch,
        },
        "extrapolated": timed < nbatches_epoch,
        "epochs": epochs,
        "seconds_per_epoch": round(per_epoch, 1),
        "dev_eval_seconds": round(eval_seconds, 2),
        "total_seconds_estimate": {
            "5_epochs": round(5 * (per_epoch + eval_seconds) + eval_seconds, 1),
            "21_epochs": round(21 * (per_epoch + eval_seconds) + eval_seconds, 1),
        },
        "contrastive_draw_seconds_per_epoch": {
            "senteval_list_choice": round(senteval_draw * nbatches_epoch, 1),
            "embeval": round(embeval_draw * nbatches_epoch, 2),
        },
        "memory": {
            "data_mib": round((table_np.nbytes + sum(a.nbytes for a in images.values())) / 2**20, 1),
            "train_images_mib": round(images["train"].nbytes / 2**20, 1),
            "peak_rss_after_data_mib": round(rss_data, 1),
            "peak_rss_mib": round(rss_mb(), 1),
            "train_images_shared_not_copied": bool(shared),
        },
        "data_build_seconds": round(build_seconds, 1),
        "note": (
            "5 epochs is the fewest SentEval can run (best at epoch 1, then 4 non-improving), 21 the most; "
            "each epoch is followed by a dev evaluation, and the test evaluation costs one more."
        ),
    }
    if device.type == "cuda":
        record["memory"]["gpu_peak_allocated_mib"] = round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    print(json.dumps(record, indent=1))
    out = Path(args.out) if args.out else RESULTS / f"coco_{device.type}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
