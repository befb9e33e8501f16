#!/usr/bin/env bash
# Rebuild the example report in this folder: two quickstart encoders (the hashing bag of words and
# all-MiniLM-L6-v2), both classifiers, z-score normalization, a bag-of-words baseline at MiniLM's
# dimension, bootstrap intervals, the paired comparison, the report with its plots and two published
# baselines, the same as one HTML page (and its screenshot, when Chromium is installed), and MiniLM's
# MTEB result files.
#
#   EMBEVAL_DATA=/path/to/senteval_data docs/example/build.sh [WORKDIR]
#
# Needs `pip install -e '.[exporters,report]'`. About 36 minutes on an otherwise idle 2-core CPU (REPORT_ONLY=1: a few minutes).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="${1:-embeval-example}"
tasks=STS12,STS13,STS14,STS15,STS16,STSBenchmark,SICKRelatedness,MR,CR,TREC,MRPC
common=(--workdir "$work" --tasks "$tasks" --device cpu --classifiers logreg,mlp --normalize zscore
        --save-predictions)

if [[ "${REPORT_ONLY:-}" != 1 ]]; then  # REPORT_ONLY=1: redraw the tables from the results already in WORKDIR
  embeval quickstart --encoder bow "${common[@]}"
  embeval quickstart --encoder minilm --baseline-bow-dim 384 "${common[@]}"
fi

runs=("$work/results-bow.json" "$work/results-minilm.json")
labels=(--label "hashing BoW" --label "all-MiniLM-L6-v2")
published=(--baselines simcse-unsup-bert-base,sbert-nli-base)
embeval report "${runs[@]}" "${labels[@]}" "${published[@]}" --format markdown --plots "$here/plots" \
  --out "$here/report.md"
embeval report "${runs[@]}" "${labels[@]}" "${published[@]}" --format html --out "$here/report.html"
embeval report "${runs[@]}" "${labels[@]}" --format latex --out "$here/report.tex"
embeval report "${runs[@]}" "${labels[@]}" --format csv --out "$here/report.csv"
embeval compare "${runs[@]}" "${labels[@]}" --format markdown --out "$here/compare.md"
embeval compare "${runs[@]}" "${labels[@]}" --out "$here/compare.txt"
rm -rf "$here/mteb"
embeval export-mteb "$work/results-minilm.json" --model sentence-transformers/all-MiniLM-L6-v2 --out "$here/mteb"
if command -v chromium >/dev/null || [[ -n "${EMBEVAL_CHROMIUM:-}" ]]; then
  python3 "$here/../../scripts/chromium_check.py" "$here/report.html" --screenshot "$here/report.png" --width 1400 \
    --height 1700 >/dev/null
fi
for run in bow minilm; do
  cp "$work/results-$run.json" "$work/results-$run.predictions.npz" "$here/"
done
