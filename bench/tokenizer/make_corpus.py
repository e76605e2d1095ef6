"""Writes the tokenizer benchmark corpus: GSM8K questions and answers
(English, numbers), generated Chinese/Japanese prose, and generated code,
interleaved line by line. Deterministic (fixed seed)."""
import json
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GSM8K = REPO.parent / "shared" / "data" / "gsm8k" / "test.jsonl"

ZH = ("我们今天讨论人工智能模型的训练与推理效率，以及在大规模数据中心部署时遇到的工程问题。"
      "北京和上海的研究团队发表了新的论文，介绍了混合专家架构和量化方法。经济社会文化历史自主性发展学习研究")
JA = "東京の研究者は、大規模言語モデルのトークナイザーを評価しました。ひらがなとカタカナ、漢字が混ざった文章です。"
CODE = ["def {n}(x, y=None):\n    return [v * 2 for v in x if v is not y]\n",
        "for (int i = 0; i < {k}; ++i) {{ total += values[i] * weights[i]; }}\n",
        "const {n} = async (req, res) => {{ const data = await fetch(`/api/${{req.id}}`); res.json(data); }};\n",
        "SELECT id, name, created_at FROM {n} WHERE score >= {k} ORDER BY created_at DESC LIMIT 10;\n",
        "    if self.{n} is None:\n        raise ValueError(f\"missing {{self.name!r}}: {k}\")\n"]


def main(out_path, target_bytes=1_000_000):
    rng = random.Random(2024)
    english = []
    with open(GSM8K) as f:
        for line in f:
            row = json.loads(line)
            english += [row["question"], row["answer"].replace("\n", " ")]
    lines, size, i = [], 0, 0
    while size < target_bytes:
        kind = i % 4
        if kind == 0 or kind == 1:
            line = english[(i // 2) % len(english)]
        elif kind == 2:
            src = ZH if rng.random() < 0.6 else JA
            start = rng.randrange(len(src) - 20)
            line = src[start:start + rng.randint(20, 80)]
        else:
            line = rng.choice(CODE).format(n=f"name_{rng.randrange(1000)}", k=rng.randrange(10000)).rstrip("\n")
        lines.append(line)
        size += len(line.encode()) + 1
        i += 1
    Path(out_path).write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "corpus.txt")
