"""synthenv: a GPU-native RL environment for program synthesis in BF.

Data flow (one step, program mode): tokens ``[N, L]`` -> ``compilers.<backend>.compile`` ->
``Program`` IR -> ``engines.<engine>.run`` -> ``Execution`` -> ``scoring.score_outputs`` ->
rewards. Everything stays on the tokens' device.

Dimension names used in shape comments throughout:
    N programs, L tokens per program, P IR op slots (L + 1), K test cases, O outputs kept
    per case, T tape cells, B lockstep lanes (N * K), V vocabulary (9).

>>> import synthenv
>>> synthenv.score([",[>,]+[,<.]"], "reverse").solved.tolist()
[True]
"""

from synthenv import compilers, engines, tasks
from synthenv.api import ScoreResult, score
from synthenv.execution import Execution
from synthenv.ir import Op, Program
from synthenv.language import Status, decode_batch, encode_batch, text_to_tokens, tokens_to_text
from synthenv.scoring import Scores
from synthenv.tasks import Task

__version__ = "0.1.0"

from synthenv import env  # noqa: E402  registers the Gymnasium ids synthenv/<task>-v0

__all__ = [
    "score", "ScoreResult", "Task", "Status", "Program", "Op", "Execution", "Scores",
    "compilers", "engines", "tasks", "env", "encode_batch", "decode_batch", "text_to_tokens", "tokens_to_text",
]
