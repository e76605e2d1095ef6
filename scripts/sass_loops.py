#!/usr/bin/env python3
"""Instruction mix of the loops in a CUDA object's SASS, without a GPU.

Every backward branch of a kernel's SASS closes a loop; this prints, for each
loop of more than --min instructions, its size and its most frequent opcodes
(IMAD.MOV / IMAD.X / IMAD.SHL kept apart from IMAD: register moves, the high
half of 64-bit pointer adds, shifts). How session 19 found the pointer
overhead of the strip-pair loop (docs/kernels.md, "Session 19").

cuobjdump is not in the CUDA build image here; PyPI has it:
  pip download --no-deps nvidia-cuda-cuobjdump -d /tmp/nvd && unzip -qo /tmp/nvd/*.whl -d /tmp/nvd/x
  /tmp/nvd/x/nvidia/cu13/bin/cuobjdump -sass build-cuda/src/cuda/CMakeFiles/mx_cuda.dir/mxfp4_gemm_pair.cu.o > pair.sass
  scripts/sass_loops.py pair.sass dense_pair_kernelILi2ELb0ELi4ELi2ELi0E
"""
import argparse
import collections
import re

KEPT_APART = ("IMAD.MOV", "IMAD.X", "IMAD.SHL")


def opcode(text):
    words = text.split()
    op = words[1] if words[0].startswith("@") else words[0]
    return op if op.startswith(KEPT_APART) else op.split(".")[0]


def loops(function_text):
    """(first address, last address, instructions) of each backward branch's loop."""
    code = []
    for line in function_text.split("\n"):
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            code.append((int(m.group(1), 16), m.group(2).strip()))
    for address, text in code:
        m = re.search(r"\bBRA (0x[0-9a-f]+)", text)
        if not m or "BRA.U" in text or "BRA.DIV" in text:
            continue
        target = int(m.group(1), 16)
        if target < address:
            yield target, address, [t for a, t in code if target <= a <= address]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("sass", help="cuobjdump -sass output")
    p.add_argument("function", nargs="?", default="", help="substring of the mangled kernel name")
    p.add_argument("--min", type=int, default=60, help="smallest loop shown (instructions)")
    a = p.parse_args()
    for part in open(a.sass).read().split("Function : ")[1:]:
        name = part.split("\n", 1)[0].strip()
        if a.function not in name:
            continue
        for first, last, body in loops(part):
            if len(body) < a.min:
                continue
            mix = collections.Counter(opcode(t) for t in body).most_common(14)
            print(f"{name[-60:]} {first:#x}..{last:#x} n={len(body)} " + " ".join(f"{k}:{v}" for k, v in mix))


if __name__ == "__main__":
    main()
