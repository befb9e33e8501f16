"""Moses-style word tokenization (tokenizer.perl with `-l en -no-escape`), written for embeval.

SentEval tokenizes STS, SICK and MRPC with Moses' tokenizer.perl. The files it published were made by
different versions of that script, and the differences are visible in the files, so each version is
a named profile here (PROFILES), chosen per file in data/sources.json:

- "en": today's tokenizer.perl. Contractions stay attached (``it's`` -> ``it 's``), the period of
  the last word is always split off (``t.v.`` -> ``t.v .``), English non-breaking prefixes
  (``Mr.``, ``Jan.``; ``No.`` before a number) keep their period. SentEval's STS12-16 files.
- "en-2017": the same without splitting the last word's period after an abbreviation (``Corp.``
  stays ``Corp.`` at the end of a line). SentEval's copy of MRPC.
- "senteval-stsb": what SentEval's STS Benchmark and SICK files show: every apostrophe inside a
  word is padded (``it ' s``), and a non-breaking prefix keeps its period only when the next token
  starts with a letter (``Jan. 8`` -> ``Jan . 8``, ``Corp. ,`` -> ``Corp . ,``); numeric-only
  prefixes never keep it.

The rules follow the script's order: whitespace and control characters, isolation of every
character that is not alphanumeric or one of . ' ` , -, multi-dot protection, commas outside
numbers, apostrophes, the final-period rule, clean-up.
"""

import re
import sys
import unicodedata
from functools import cache

PERL_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_BLANK_LINE = re.compile(f"^[{PERL_SPACE}]*$")


def _ranges(test):
    """A regex character-class body for every code point where test(category) holds."""
    parts, start, prev = [], None, None
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        if test(unicodedata.category(chr(cp)), chr(cp)):
            if start is None:
                start = cp
            prev = cp
        elif start is not None:
            parts.append((start, prev))
            start = None
    if start is not None:
        parts.append((start, prev))
    return "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in parts)


@cache
def _classes():
    """Perl's \\p{IsAlpha}, \\p{IsAlnum}, \\p{IsN} and \\p{IsLower} as Python class bodies."""
    alpha = _ranges(lambda cat, ch: cat in ("Lu", "Ll", "Lt", "Lm", "Lo", "Nl"))
    alnum = _ranges(lambda cat, ch: cat in ("Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "Nd"))
    number = _ranges(lambda cat, ch: cat in ("Nd", "Nl", "No"))
    lower = _ranges(lambda cat, ch: ch.islower())
    return alpha, alnum, number, lower


@cache
def _nonbreaking_prefixes():
    """English non-breaking prefixes: {prefix: 1 always, 2 only before a number} (Moses' list)."""
    from sacremoses.corpus import NonbreakingPrefixes

    prefixes = {}
    for item in NonbreakingPrefixes().words("en"):
        item = item.strip()
        if not item or item.startswith("#"):
            continue
        match = re.match(r"(.*)\s+#NUMERIC_ONLY#", item)
        if match:
            prefixes[match.group(1)] = 2
        else:
            prefixes[item] = 1
    return prefixes


PROFILES = {
    "en": {"contractions": "attach", "split_last_word": True, "prefix_needs_letter": False},
    "en-2017": {"contractions": "attach", "split_last_word": False, "prefix_needs_letter": False},
    "senteval-stsb": {"contractions": "pad", "split_last_word": True, "prefix_needs_letter": True},
}


class MosesTokenizer:
    """tokenize(line) -> the line as tokenizer.perl -l en -no-escape prints it (without newline)."""

    def __init__(self, profile="en"):
        if profile not in PROFILES:
            raise ValueError(f"unknown Moses profile {profile!r}; profiles are {', '.join(PROFILES)}")
        options = PROFILES[profile]
        self.profile = profile
        self.split_last_word = options["split_last_word"]
        self.prefix_needs_letter = options["prefix_needs_letter"]
        self.prefixes = _nonbreaking_prefixes()
        alpha, alnum, number, lower = _classes()
        self._alpha = re.compile(f"[{alpha}]")
        self._lower_start = re.compile(f"^[{lower}]")
        self._space_runs = re.compile(f"[{PERL_SPACE}]+")
        self._isolate = re.compile(f"([^{alnum}{PERL_SPACE}.'`,\\-])")
        self._comma = [
            (re.compile(f"([^{number}])[,]"), r"\1 , "),
            (re.compile(f"[,]([^{number}])"), r" , \1"),
            (re.compile(f"([{number}])[,]$"), r"\1 ,"),
        ]
        inner = r"\1 '\2" if options["contractions"] == "attach" else r"\1 ' \2"
        self._apostrophes = [
            (re.compile(f"([^{alpha}])[']([^{alpha}])"), r"\1 ' \2"),
            (re.compile(f"([^{alpha}{number}])[']([{alpha}])"), r"\1 ' \2"),
            (re.compile(f"([{alpha}])[']([^{alpha}])"), r"\1 ' \2"),
            (re.compile(f"([{alpha}])[']([{alpha}])"), inner),
            (re.compile(f"([{number}])[']([s])"), inner),
        ]

    def tokenize(self, line):
        line = line[:-1] if line.endswith("\n") else line
        if _BLANK_LINE.match(line):
            return line
        text = self._space_runs.sub(" ", f" {line} ")
        text = re.sub(r"[\x00-\x1f]", "", text)
        text = _strip_one(re.sub(" +", " ", text))
        text = self._isolate.sub(r" \1 ", text)
        text = _protect_multidots(text)
        for pattern, repl in self._comma + self._apostrophes:
            text = pattern.sub(repl, text)
        text = self._final_periods(text)
        text = _strip_one(re.sub(" +", " ", text))
        text = re.sub(r"\.' ?$", " . ' ", text, count=1)
        return _restore_multidots(text)

    def _keeps_period(self, pre, following):
        """Whether `pre.` followed by the token `following` (None at the end) keeps its period."""
        if following is None:
            return not self.split_last_word and self._abbreviation(pre, following)
        return self._abbreviation(pre, following)

    def _abbreviation(self, pre, following):
        if "." in pre and self._alpha.search(pre):
            return True
        if following is not None and self._lower_start.match(following):
            return True
        kind = self.prefixes.get(pre)
        if self.prefix_needs_letter:
            return kind == 1 and following is not None and bool(self._alpha.match(following))
        if kind == 1:
            return True
        return kind == 2 and following is not None and bool(re.match(r"^[0-9]+", following))

    def _final_periods(self, text):
        words = text.split(" ")
        while words and words[-1] == "":
            words.pop()
        out = []
        for i, word in enumerate(words):
            match = re.match(r"^(\S+)\.$", word)
            if match:
                following = words[i + 1] if i + 1 < len(words) else None
                if not self._keeps_period(match.group(1), following):
                    word = match.group(1) + " ."
            out.append(word + " ")
        return "".join(out)


def _strip_one(text):
    """Perl's s/^ //g; s/ $//g on a string whose space runs are already single."""
    if text.startswith(" "):
        text = text[1:]
    if text.endswith(" "):
        text = text[:-1]
    return text


def _protect_multidots(text):
    text = re.sub(r"\.([.]+)", r" DOTMULTI\1", text)
    while "DOTMULTI." in text:
        text = re.sub(r"DOTMULTI\.([^.])", r"DOTDOTMULTI \1", text)
        text = text.replace("DOTMULTI.", "DOTDOTMULTI")
    return text


def _restore_multidots(text):
    while "DOTDOTMULTI" in text:
        text = text.replace("DOTDOTMULTI", "DOTMULTI.")
    return text.replace("DOTMULTI", ".")


def lowercase(text):
    """Moses' lowercase.perl: Perl's lc, which maps every capital sigma to σ (Python's lower()
    writes ς at the end of a word)."""
    if "\u03a3" in text:
        return "".join(ch.lower() for ch in text)
    return text.lower()
