"""A toy proposer for ``shrinkgpu reduce --propose-with``: reads the best program so far on
stdin and proposes it with one random line deleted, a few times (one JSON object a line).
Seeded by the program's text, so the same program gets the same proposals."""

import json
import random
import sys

PROPOSALS = 8

text = sys.stdin.read()
lines = text.splitlines(keepends=True)
rng = random.Random(text)
for _ in range(min(PROPOSALS, len(lines))):
    k = rng.randrange(len(lines))
    print(json.dumps({"text": "".join(lines[:k] + lines[k + 1:])}))
