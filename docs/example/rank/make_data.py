"""Write the small tasks of the ranking example (docs/ranking.md) into this folder: made-up sentences over
six topics, each task of one of MTEB's kinds with an [mteb] table of its own name, so that the runs'
benchmark aggregates (MTEB's means and Borda's rank) are computed as for MTEB's tasks.

    python docs/example/rank/make_data.py      # rewrites the files beside it (the same bytes every time)

- ToyDuplicates: pair classification, MTEB's protocol: a sentence and its paraphrase (two of its four
  topic words kept, the others swapped for other words of the topic, the order shuffled: label 1) or
  another sentence of the topic (one word kept: 0);
- ToySimilarity: STS, MTEB's cosine: pairs sharing 0 to 4 of their topic words, scored 0 to 5;
- ToyTopics: classification, MTEB's protocol: a sentence's topic;
- ToyRetrieval: retrieval: three words of a document find it among all documents.
"""

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
TOPICS = {
    "animals": "cat dog horse rabbit tiger eagle salmon goat sheep whale fox wolf deer otter bear owl",
    "weather": "rain snow storm cloud wind thunder frost sunshine fog drizzle hail breeze heat humid chill gale",
    "sport": "football tennis goal match referee stadium league coach sprint marathon racket season score team "
    "trophy pitch",
    "food": "bread cheese soup pasta salad pepper garlic butter onion apple honey rice sauce lemon oven spice",
    "music": "guitar piano violin melody drum concert chorus singer rhythm album tune orchestra jazz opera song band",
    "travel": "train airport ticket hotel passport luggage beach museum ferry map journey border suitcase tour "
    "harbour taxi",
}
FILLERS = ["the", "a", "an", "of", "with", "and", "near", "about", "under", "over", "in", "on", "at", "for", "from"]


def sentence(rng, topic, topic_words=4, fillers=3):
    words = rng.sample(TOPICS[topic].split(), topic_words) + [rng.choice(FILLERS) for _ in range(fillers)]
    rng.shuffle(words)
    return words


def variant(rng, words, topic, keep):
    """The sentence with all but `keep` of its topic words swapped for other words of the topic, shuffled."""
    vocabulary = TOPICS[topic].split()
    own = [w for w in words if w in vocabulary]
    kept = rng.sample(own, keep)
    fresh = [w for w in vocabulary if w not in own]
    out = kept + rng.sample(fresh, len(own) - keep) + [w for w in words if w not in vocabulary]
    rng.shuffle(out)
    return out


def tsv(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["\t".join(header)] + ["\t".join(str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def main(folder=HERE):
    """Write the tasks' data files into folder."""
    folder = Path(folder)
    rng = random.Random(46)
    topics = list(TOPICS)
    rows = []
    for i in range(400):
        topic = topics[i % len(topics)]
        first = sentence(rng, topic)
        keep = 2 if i % 2 else 1  # a paraphrase keeps two of its topic words; another sentence, one
        rows.append((" ".join(first), " ".join(variant(rng, first, topic, keep)), i % 2))
    tsv(folder / "duplicates.tsv", ("sentence1", "sentence2", "label"), rows)
    rows = []
    for i in range(300):
        topic = topics[i % len(topics)]
        first, keep = sentence(rng, topic), i % 5
        second = variant(rng, first, topic, keep) if keep else sentence(rng, rng.choice(topics))
        rows.append((" ".join(first), " ".join(second), round(min(5.0, max(0.0, 1.25 * keep + rng.gauss(0, 0.4))), 2)))
    tsv(folder / "similarity.tsv", ("sentence1", "sentence2", "score"), rows)
    for split, count in (("train", 240), ("test", 300)):
        rows = [(" ".join(sentence(rng, topics[i % 6], 3, 4)), topics[i % 6]) for i in range(count)]
        tsv(folder / "topics" / f"{split}.tsv", ("text", "label"), rows)
    documents = [(f"d{i}", sentence(rng, topics[i % 6], 6, 6)) for i in range(300)]
    jsonl(folder / "retrieval" / "corpus.jsonl", [{"_id": d, "text": " ".join(w)} for d, w in documents])
    queries = []
    for q in range(120):
        doc, words = documents[rng.randrange(len(documents))]
        own = [w for w in words if w not in FILLERS]
        queries.append((f"q{q}", " ".join(rng.sample(own, 3)), doc))
    jsonl(folder / "retrieval" / "queries.jsonl", [{"_id": q, "text": text} for q, text, _ in queries])
    tsv(folder / "retrieval" / "qrels.tsv", ("query-id", "corpus-id", "score"), [(q, d, 1) for q, _, d in queries])


if __name__ == "__main__":
    main()
