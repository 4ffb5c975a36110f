"""The bad-input corpus: broken inputs and the exact error each one must produce.

Every case is one call of ``flask-eval run`` (or of ``producer.inputs``): an instances
path plus raw ``NAME=PATH`` responses arguments, exactly as typed on the command line.
Paths are relative to the repository root, so run the cases with the repository root
as the working directory (:data:`REPO_ROOT`).

Expected error: ``str(InputError)`` must start with ``where + ": "`` and contain
``message``. ``where`` is ``"path:line"`` (1-based line) or just ``"path"`` for errors
about a whole file; ``""`` means an argument error with no file location (the error
string is the message itself and ``InputError.path`` is None).

Used by ``tests/test_loaders.py`` (through ``producer.inputs``) and meant to be reused
through the CLI (exit code 2, nothing written).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
BAD = "tests/bad_inputs"
EXAMPLES = "flask_eval/examples"
GOOD_INSTANCES = f"{EXAMPLES}/instances.jsonl"
GOOD_A = f"model_a={EXAMPLES}/model_a.jsonl"
GOOD_B = f"model_b={EXAMPLES}/model_b.jsonl"

#: The skill names the corpus is checked against (FLASK's 12 skills).
FLASK_SKILLS: tuple[str, ...] = (
    "Logical Robustness",
    "Logical Correctness",
    "Logical Efficiency",
    "Factuality",
    "Commonsense Understanding",
    "Comprehension",
    "Insightfulness",
    "Completeness",
    "Metacognition",
    "Conciseness",
    "Readability",
    "Harmlessness",
)


@dataclass(frozen=True)
class BadCase:
    """One broken input and the error it must raise."""

    id: str
    instances: str
    responses: list[str]
    where: str
    message: str


def _inst(name: str, where_line: int | None, message: str, case_id: str | None = None) -> BadCase:
    """A broken instances file, with a good responses file."""
    path = f"{BAD}/{name}.jsonl"
    where = path if where_line is None else f"{path}:{where_line}"
    return BadCase(case_id or name, path, [GOOD_A], where, message)


def _resp(name: str, where_line: int | None, message: str, case_id: str | None = None) -> BadCase:
    """A broken responses file (as the second model), with good instances."""
    path = f"{BAD}/{name}.jsonl"
    where = path if where_line is None else f"{path}:{where_line}"
    return BadCase(case_id or name, GOOD_INSTANCES, [GOOD_A, f"broken={path}"], where, message)


CASES: list[BadCase] = [
    # --- instances files
    _inst("invalid_json", 2, "invalid JSON: Expecting ',' delimiter"),
    _inst("truncated_last_line", 3, "looks truncated"),
    _inst("not_object", 2, "expected a JSON object, got array"),
    _inst("missing_field", 2, "missing field 'skill'"),
    _inst("wrong_type_skill", 2, "field 'skill' must be a list of skill names, got string"),
    _inst("wrong_type_id", 3, "field 'idx' must be an integer or a non-empty string, got number"),
    _inst("duplicate_instance_id", 3, "duplicate instance id '1' (first on line 1)"),
    _inst("unknown_skill", 2, "unknown skill 'Creativity'; valid skills: Logical Robustness"),
    _inst("unknown_domain", 2, "unknown domain 'Astrology'; valid domains: Humanities"),
    _inst("unknown_difficulty", 2, "unknown difficulty label 'very hard'; valid labels:"),
    _inst("difficulty_out_of_range", 2, "difficulty level 6 is out of range"),
    _inst("empty_skill_list", 2, "field 'skill' is empty"),
    _inst("duplicate_skill", 2, "skill 'Factuality' is listed twice"),
    _inst("empty_instruction", 2, "field 'instruction' is empty"),
    _inst("blank_lines_then_error", 4, "field 'difficulty' must be a difficulty label"),
    _inst("mixed_schemas", 2, "mixed schemas"),
    _inst("older_schema_missing_field", 1, "missing field 'metrics'"),
    _inst("invalid_utf8", 2, "invalid UTF-8"),
    _inst("empty", None, "no records; expected JSON Lines", "empty_instances"),
    _inst("no_such_file", None, "file not found", "instances_missing"),
    # --- responses files
    _resp("duplicate_response_id", 3, "duplicate response for instance '2' (first on line 2)"),
    _resp("unknown_instance_response", 2, "response for unknown instance '999'"),
    _resp("response_missing_text", 2, "missing field 'text'"),
    _resp("response_text_null", 2, "field 'text' must be a string, got null"),
    _resp("response_not_object", 2, "expected a JSON object, got string"),
    _resp("blank_lines", None, "no records; expected JSON Lines", "empty_responses"),
    _resp("no_such_file", None, "file not found", "responses_missing"),
    BadCase(
        "responses_is_directory",
        GOOD_INSTANCES,
        [f"broken={BAD}"],
        BAD,
        "is a directory",
    ),
    # --- responses arguments
    BadCase(
        "responses_arg_without_equals",
        GOOD_INSTANCES,
        [f"{EXAMPLES}/model_a.jsonl"],
        "",
        "expected NAME=PATH",
    ),
    BadCase(
        "responses_arg_without_path",
        GOOD_INSTANCES,
        ["model_a="],
        "",
        "missing path in responses argument 'model_a='",
    ),
    BadCase(
        "bad_model_name",
        GOOD_INSTANCES,
        [f"bad name!={EXAMPLES}/model_a.jsonl"],
        "",
        "invalid model name 'bad name!'",
    ),
    BadCase(
        "duplicate_model_names",
        GOOD_INSTANCES,
        [GOOD_A, f"model_a={EXAMPLES}/model_b.jsonl"],
        "",
        "duplicate model name 'model_a'",
    ),
]
