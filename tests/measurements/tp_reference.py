"""The unsplit model that ``measurements/gpu_model_server/server.py --tensor-parallel N`` splits
across ranks, computed here in one process and written independently of the server's code (plain
matrix products, attention by hand, the whole sequence recomputed for every token: no shards, no
KV cache, no collectives). Only the weights come from the server's seeded generators, so both hold the same
numbers. Run by ``test_tp_server.py`` with a Python that has PyTorch:

    python tests/measurements/tp_reference.py PRESET MAX_TOKENS PROMPT_IDS_JSON

prints JSON: per prompt the greedy tokens, the final normalised hidden state of the prompt's last
position, and the smallest gap between the best and the second-best logit over the steps (how
far the greedy choice is from a tie).
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from typing import Any

SERVER = Path(__file__).resolve().parents[2] / "measurements" / "gpu_model_server" / "server.py"


def _server() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_model_server", SERVER)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def main(preset_name: str, max_tokens: int, prompts: list[list[int]]) -> dict[str, Any]:
    import torch

    tp = _server()
    config = tp.preset(preset_name)
    d, h = config["d_model"], config["heads"]
    hd = d // h
    g = tp.global_weights(config, "cpu")
    layers = [tp.layer_weights(config, i, "cpu") for i in range(config["layers"])]

    def norm(x: torch.Tensor) -> torch.Tensor:
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + torch.finfo(x.dtype).eps)

    def forward(ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        t = len(ids)
        x = g["emb"][torch.tensor(ids)] + g["pos"][:t]  # [t, d]
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        for w in layers:
            qkv = norm(x) @ w["qkv"].reshape(3 * d, d).T  # features ordered (q|k|v, head, dim)
            q, k, v = qkv.view(t, 3, h, hd).permute(1, 2, 0, 3)  # each [h, t, hd]
            scores = (q @ k.transpose(1, 2)) / math.sqrt(hd)
            scores = scores.masked_fill(~causal, float("-inf"))
            a = (scores.softmax(-1) @ v).transpose(0, 1).reshape(t, d)
            x = x + a @ w["o"].T
            x = x + torch.nn.functional.gelu(norm(x) @ w["up"].T) @ w["down"].T
        hn = norm(x[-1])
        return hn, hn @ g["head"].T

    out = []
    with torch.no_grad():
        for ids in prompts:
            seq = list(ids)
            tokens: list[int] = []
            hidden: list[float] = []
            margin = float("inf")
            for step in range(max_tokens):
                hn, logits = forward(seq)
                if step == 0:
                    hidden = hn.tolist()
                top = logits.topk(2).values
                margin = min(margin, float(top[0] - top[1]))
                tok = int(logits.argmax())
                tokens.append(tok)
                seq.append(tok)
            out.append({"tokens": tokens, "hidden": hidden, "margin": margin})
    return {"prompts": out}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]))))
