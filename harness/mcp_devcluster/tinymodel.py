"""A tiny Llama for the real vLLM in the tests: random weights from a fixed seed, a byte-level BPE
tokenizer trained here from a fixed corpus (nothing is downloaded), and a chat template.

Two halves in one file. The harness half (stdlib only) names the model's cache directory from a
digest of its parameters and the builder's version, and builds it once under a file lock by
running this same file as a script with the vLLM environment's Python, the one that has torch,
transformers and tokenizers; the project's own environment never needs them.

What the model does: its logits are close to uniform, so sampled tokens are random ids of the
vocabulary. The vocabulary keeps the 256 single bytes of byte-level BPE, so a stream often holds a
byte that begins a multi-byte UTF-8 character: vLLM then sends a chunk with empty text until the
character is complete, as real byte-level tokenizers do. The corpus holds the words of mcp-bench's
synthetic prompts, each after a space, so those prompts tokenize to about one token a word.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

BUILDER_VERSION = "1"  # bump when the built files change for the same parameters

CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}<|end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
SPECIAL_TOKENS = (
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|end|>",
    "<|user|>",
    "<|assistant|>",
    "<|system|>",
)
BOS, EOS = SPECIAL_TOKENS[0], SPECIAL_TOKENS[1]

# mcp_bench.workload's synthetic words (the harness may import the engine, but this file also runs
# in vLLM's environment, which has no mcp_bench): kept equal by a unit test.
PROMPT_WORDS = (  # noqa: SIM905 (the same string as mcp_bench.workload's)
    "the of and to in is was for on are with as by at be this from or have an they which one you "
    "had not but what all were when we there can more if no out so said use each she how their time "
    "will up other about many then them these some her would make like him into has look two write go "
    "see number way could people than first water been call who oil its now find long down day did get "
    "come made may part"
).split()
# Text with characters of two, three and four UTF-8 bytes, so the vocabulary has some of them whole.
EXTRA_TEXT = "naïve café über straße élan Größe Tokyo 東京 日本語 ünïcödé emoji 🙂 🚀 ½ € — “quoted”"


@dataclass(frozen=True)
class TinyModelSpec:
    """Everything the built files depend on; the cache directory is named from its digest."""

    name: str = "mcp-tiny-llama"
    seed: int = 1234
    vocab_size: int = 1024  # the BPE trainer's target; the model's vocabulary is what it reaches
    hidden_size: int = 256
    intermediate_size: int = 512
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    max_position_embeddings: int = 4096
    dtype: str = "bfloat16"

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes one token takes (keys and values of every layer)."""
        width = {"bfloat16": 2, "float16": 2, "float32": 4}[self.dtype]
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * width

    def digest(self) -> str:
        text = json.dumps({"builder": BUILDER_VERSION, **asdict(self)}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


class TinyModelError(RuntimeError):
    """The model could not be built; the message carries the builder's output."""


def cache_root() -> Path:
    return Path(os.environ.get("MCP_OPERATOR_CACHE", "~/.cache/mcp-operator")).expanduser()


def model_dir(spec: TinyModelSpec) -> Path:
    return cache_root() / "models" / f"{spec.name}-{spec.digest()}"


def ensure_tiny_model(spec: TinyModelSpec, python: Path, timeout_s: float = 600) -> Path:
    """The model's directory, built first (with ``python``, which must have torch, transformers and
    tokenizers) when it is not in the cache yet."""
    out = model_dir(spec)
    done = out / ".complete"
    if done.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return out
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        argv = [str(python), "-I", str(Path(__file__).resolve()), str(tmp), json.dumps(asdict(spec))]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
        if res.returncode != 0:
            raise TinyModelError(f"building {out.name} failed ({res.returncode}): {res.stderr[-2000:]}")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        done.write_text(spec.digest() + "\n")
    return out


def corpus(spec: TinyModelSpec) -> list[str]:
    """The BPE training text: deterministic sentences of the prompt words, and the extra text."""
    import random

    rng = random.Random(spec.seed)
    lines = [" ".join(rng.choices(PROMPT_WORDS, k=24)) for _ in range(400)]
    lines += [" " + " ".join(PROMPT_WORDS)] * 50
    lines += [EXTRA_TEXT] * 20
    return lines


def _build(out: Path, spec: TinyModelSpec) -> None:  # runs in the vLLM environment
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(spec), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=EOS,
        additional_special_tokens=list(SPECIAL_TOKENS[2:]),
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = spec.max_position_embeddings
    fast.save_pretrained(out)

    torch.manual_seed(spec.seed)
    config = LlamaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        max_position_embeddings=spec.max_position_embeddings,
        bos_token_id=tok.token_to_id(BOS),
        eos_token_id=tok.token_to_id(EOS),
        pad_token_id=tok.token_to_id(EOS),
        tie_word_embeddings=False,
        torch_dtype=spec.dtype,
    )
    model = LlamaForCausalLM(config).to(getattr(torch, spec.dtype))
    model.generation_config.eos_token_id = config.eos_token_id
    model.save_pretrained(out, safe_serialization=True)
    (out / "mcp-tiny-model.json").write_text(
        json.dumps({**asdict(spec), "digest": spec.digest(), "vocab": tok.get_vocab_size()}, indent=2) + "\n"
    )


if __name__ == "__main__":
    _build(Path(sys.argv[1]), TinyModelSpec(**json.loads(sys.argv[2])))
