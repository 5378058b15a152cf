"""The neural compiler: a learned model maps ``[N, L]`` tokens to the same Program IR as the
traditional compiler, in one non-autoregressive forward pass on the tokens' device.

What is learned and what is not:

- **Learned** (``PointerTagger`` in ``neural_model.py``, weights in ``neural_weights.pt``):
  every token's class, including whether a bracket is matched or unmatched under PQT's rule,
  and every matched bracket's partner (a pointer). This is the non-local, structural part of
  compilation, the part ``traditional.match_brackets`` does with scans and a sort.
- **Deterministic assembly**, shared with the traditional compiler and fed the predicted
  classes and partners: lexing for the liveness mask and the ``+-``/``<>`` deltas
  (``traditional.lex``), counted-loop detection (``find_counted_loops``), innermost-loop
  flags, run folding and prefix-sum layout (``emit``). If the predictions are right, the IR
  is identical to the traditional compiler's; if not, it is whatever they imply. Nothing
  here checks them against the traditional compiler (``compile_checked`` reports only the
  model's self-consistency); the ``hybrid`` backend does the checking.

Its accuracy is measured, not assumed: ``synthenv compiler-report``. ``synthenv
train-compiler`` reproduces the shipped weights.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import torch

from synthenv import language as lang
from synthenv import storage
from synthenv.checks import require_positive_int
from synthenv.ir import Program
from synthenv.syncpoints import sync_point
from synthenv.tables import lookup_table

from . import traditional
from .neural_model import BACKWARD, FORWARD, ModelConfig, PointerTagger, bracket_counts, bracket_width

WEIGHTS_PATH = Path(__file__).with_name("neural_weights.pt")
"""The shipped weights (package data)."""

FORMAT = "synthenv-neural-compiler/1"


def save_weights(model: PointerTagger, path: str | Path, metadata: dict | None = None) -> None:
    """Write a model's config and weights (loadable with ``torch.load(weights_only=True)``)."""
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    document = {"format": FORMAT, "config": asdict(model.config), "state_dict": state, "metadata": dict(metadata or {})}
    storage.write_atomic(path, lambda f: torch.save(document, f), "neural-compiler weights")


def load_model(path: str | Path | None = None) -> PointerTagger:
    """The ``PointerTagger`` stored at ``path`` (default: the shipped weights), in eval mode."""
    path = Path(path) if path is not None else WEIGHTS_PATH
    if not path.exists():
        raise FileNotFoundError(f"no neural-compiler weights at {path}; train them with `synthenv train-compiler`")
    blob = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        raise ValueError(f"{path} is not a neural-compiler weights file (format {FORMAT!r})")
    model = PointerTagger(ModelConfig(**blob["config"]))
    model.load_state_dict(blob["state_dict"])
    return model.eval()


def load_metadata(path: str | Path | None = None) -> dict:
    """The metadata saved with the weights (training config, final losses)."""
    path = Path(path) if path is not None else WEIGHTS_PATH
    return torch.load(path, map_location="cpu", weights_only=True)["metadata"]


@torch.no_grad()
def predict(model: PointerTagger, tokens: torch.Tensor, width: int | None = None
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Run the model: ``(classes [N, L], partner [N, L], consistent [N])``.

    ``width``: bracket slots (``PointerTagger.forward``); None = L, always enough.

    ``partner`` is -1 where the model points at no partner. ``consistent`` says the
    predictions form a valid matching that agrees with the token classes (each matched
    bracket's partner is an opposite bracket, in the right direction, pointing back); an
    inconsistent program is certainly miscompiled, a consistent one probably is not.
    """
    out = model(tokens, width)
    length = tokens.shape[1]
    classes = torch.where(out.alive, out.class_logits.argmax(-1), traditional.NONE)  # [N, L]
    back, fwd = out.pointer[:, BACKWARD], out.pointer[:, FORWARD]  # [N, L]; L = the sink
    has_back, has_fwd = back < length, fwd < length
    partner = torch.where(has_back, back, torch.where(has_fwd, fwd, -1))  # [N, L]
    return classes, partner, _consistent(out.alive, tokens, classes, partner, has_back, has_fwd)


def _consistent(alive, tokens, classes, partner, has_back, has_fwd) -> torch.Tensor:
    tok = torch.where(alive, tokens.long(), lang.EOS)
    is_open, is_close = tok == lang.OPEN, tok == lang.CLOSE
    lex_class = lookup_table(traditional.TOKEN_CLASS, tokens.device)[tok]  # [N, L]
    expected = torch.where(is_open, torch.where(has_fwd, traditional.OPEN, traditional.UNMATCHED),
                           torch.where(is_close, torch.where(has_back, traditional.CLOSE, traditional.UNMATCHED),
                                       lex_class))
    direction_ok = torch.where(is_open, ~has_back, torch.where(is_close, ~has_fwd, ~has_back & ~has_fwd))
    positions = torch.arange(tok.shape[1], device=tok.device).expand_as(tok)
    mutual = partner.gather(1, partner.clamp(min=0)) == positions
    ok = (classes == expected) & direction_ok & ((partner < 0) | mutual)
    return (ok | ~alive).all(1)


def assemble(tokens: torch.Tensor, classes: torch.Tensor, partner: torch.Tensor) -> Program:
    """Deterministic IR assembly from token classes and bracket partners (the traditional
    compiler's passes after bracket matching, with folding and counted loops on)."""
    lexed = traditional.lex(tokens)
    classes = torch.where(lexed.alive, classes, traditional.NONE)
    loops = traditional.find_counted_loops(classes, partner, lexed)
    return traditional.emit(classes, partner, lexed, loops, fold=True)


class NeuralCompiler:
    """Learned BF -> IR compiler (registered as ``"neural"``).

    Args:
        weights: a weights file (default: the shipped ``neural_weights.pt``).
        max_scores: bound on ``N * B * B`` per forward pass (memory; B = bracket slots);
            larger batches run in chunks of a fixed shape.
        sync_width: on CUDA, read the batch's largest bracket count back to the host (one
            sync per call) and attend over that many slots instead of L. On the CPU this
            read is free and done unless ``static_shapes``.
        bucket: on the CPU, programs per group of similar bracket counts (see ``tag``).
        static_shapes: attend over L slots, with no host read of bracket counts (the CUDA
            path without ``sync_width``). None: on CUDA only; True: on every device, e.g. to
            check the GPU path on a CPU (tests/test_sync.py).

    >>> from synthenv.language import encode_batch
    >>> compiler = NeuralCompiler()
    >>> program = compiler.compile(encode_batch(["+++[->++<]"]))
    >>> int(program.num_ops[0])  # ADD 3, LOOP, ADD, MOVE, ADD, MOVE, JNZ
    7
    """

    name = "neural"

    def __init__(self, weights: str | Path | None = None, max_scores: int = 2**26, sync_width: bool = False,
                 bucket: int = 256, static_shapes: bool | None = None):
        require_positive_int("max_scores", max_scores)
        require_positive_int("bucket", bucket)
        self.weights = Path(weights) if weights is not None else WEIGHTS_PATH
        self.max_scores = max_scores
        self.sync_width = sync_width
        self.bucket = bucket
        self.static_shapes = static_shapes
        self._cpu_model = load_model(self.weights)
        self._models: dict[torch.device, PointerTagger] = {torch.device("cpu"): self._cpu_model}

    def model(self, device: torch.device | str) -> PointerTagger:
        """The model on ``device`` (copied there once)."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if device not in self._models:
            self._models[device] = load_model(self.weights).to(device)
        return self._models[device]

    def tag(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(classes, partner, consistent)`` for ``tokens [N, L]``, chunked to bound memory.

        On the CPU, programs are grouped by bracket count (``bucket`` programs per group) and
        each group attends over just as many slots as its longest member needs.
        """
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape [N, L], got {tuple(tokens.shape)}")
        num, length = tokens.shape
        if length == 0:  # empty programs: nothing to tag, and nothing a model could get wrong
            empty = torch.empty((num, 0), dtype=torch.int64, device=tokens.device)
            return empty, empty.clone(), torch.ones(num, dtype=torch.bool, device=tokens.device)
        model = self.model(tokens.device)
        on_cpu = tokens.device.type == "cpu"
        static = self.static_shapes if self.static_shapes is not None else not (on_cpu or self.sync_width)
        if static:
            return self._tag_chunked(model, tokens, length)
        with sync_point("neural_width"):  # a host read of bracket counts: free on the CPU
            if on_cpu and num > self.bucket:
                return self._tag_bucketed(model, tokens)
            return self._tag_chunked(model, tokens, bracket_width(tokens))

    def _tag_chunked(self, model, tokens, width):
        num = tokens.shape[0]
        chunk = max(1, self.max_scores // max(1, width * width))
        if num <= chunk:
            return predict(model, tokens, width)
        parts = [predict(model, tokens[i : i + chunk], width) for i in range(0, num, chunk)]
        return tuple(torch.cat(p) for p in zip(*parts))

    def _tag_bucketed(self, model, tokens):
        counts = bracket_counts(tokens)  # [N]
        order = torch.argsort(counts, stable=True)
        outputs = [torch.empty_like(tokens, dtype=torch.int64), torch.empty_like(tokens, dtype=torch.int64),
                   torch.empty(tokens.shape[0], dtype=torch.bool)]
        for first in range(0, tokens.shape[0], self.bucket):
            rows = order[first : first + self.bucket]
            width = max(1, int(counts[rows[-1]]))  # the group's largest count (sorted)
            for out, part in zip(outputs, self._tag_chunked(model, tokens[rows], width)):
                out[rows] = part
        return tuple(outputs)

    def compile_checked(self, tokens: torch.Tensor) -> tuple[Program, torch.Tensor]:
        """Compile ``tokens [N, L]``; also return ``consistent [N]`` (see ``predict``)."""
        classes, partner, consistent = self.tag(tokens)
        return assemble(tokens, classes, partner), consistent

    def compile(self, tokens: torch.Tensor) -> Program:
        """Compile ``tokens [N, L]`` (ids in [0, 9), EOS-terminated) to IR on their device."""
        return self.compile_checked(tokens)[0]
