"""Penn Treebank-style tokenization as SentEval applies it to MR, CR, SUBJ, MPQA and SNLI.

SentEval pipes those files through `sed -f tokenizer.sed`, Robert MacIntyre's 1995 sed script for
Penn Treebank tokenization, after `cat -v` for the four sentiment/subjectivity corpora. This module
reimplements both steps in Python: `show_nonprinting` is cat -v's byte notation, `tokenize` the sed
rules in the sed script's order (one line, without its newline).
"""

import re

_CONTRACTIONS = (
    (re.compile(r" ([Cc])annot "), r" \1an not "),
    (re.compile(r" ([Dd])'ye "), r" \1' ye "),
    (re.compile(r" ([Gg])imme "), r" \1im me "),
    (re.compile(r" ([Gg])onna "), r" \1on na "),
    (re.compile(r" ([Gg])otta "), r" \1ot ta "),
    (re.compile(r" ([Ll])emme "), r" \1em me "),
    (re.compile(r" ([Mm])ore'n "), r" \1ore 'n "),
    (re.compile(r" '([Tt])is "), r" '\1 is "),
    (re.compile(r" '([Tt])was "), r" '\1 was "),
    (re.compile(r" ([Ww])anna "), r" \1an na "),
)
_CLITICS = ("'ll ", "'re ", "'ve ", "n't ", "'LL ", "'RE ", "'VE ", "N'T ")


def tokenize(line):
    """One line through the Penn Treebank sed rules."""
    text = re.sub(r'^"', "`` ", line)
    text = re.sub(r'([ (\[{<])"', r"\1 `` ", text)
    text = text.replace("...", " ... ")
    text = re.sub(r"[,;:@#$%&]", r" \g<0> ", text)
    text = re.sub(r"([^.])([.])([\])}>\"']*)[ \t]*$", r"\1 \2\3 ", text)
    text = re.sub(r"[?!]", r" \g<0> ", text)
    text = re.sub(r"[\][(){}<>]", r" \g<0> ", text)
    text = text.replace("--", " -- ")
    text = f" {text} "
    text = text.replace('"', " '' ")
    text = re.sub(r"([^'])' ", r"\1 ' ", text)
    text = re.sub(r"'([sSmMdD]) ", r" '\1 ", text)
    for clitic in _CLITICS:
        text = text.replace(clitic, " " + clitic)
    for pattern, repl in _CONTRACTIONS:
        text = pattern.sub(repl, text)
    text = re.sub(r"  *", " ", text)
    return re.sub(r"^ *", "", text)


def show_nonprinting(data):
    """GNU `cat -v`: control bytes as ^X, DEL as ^?, bytes >= 128 as M- + the same notation.

    Tabs and newlines pass unchanged. Takes and returns bytes.
    """
    return b"".join(_CAT_V[b] for b in data)


def _cat_v_byte(value):
    prefix = b""
    if value >= 128:
        prefix, value = b"M-", value - 128
    if value == 127:
        return prefix + b"^?"
    if value < 32 and (prefix or value not in (9, 10)):
        return prefix + b"^" + bytes([value + 64])
    return prefix + bytes([value])


_CAT_V = [_cat_v_byte(b) for b in range(256)]
