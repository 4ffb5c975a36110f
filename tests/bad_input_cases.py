"""The bad-input corpus: broken inputs and the exact error each one must produce.

Every case is one call of ``flask-eval run``: an instances path plus raw ``NAME=PATH``
responses arguments, exactly as typed on the command line, and (``CLI_CASES``) more
arguments (``--judge``, ``--judges FILE``, ``--rubrics FILE``, ``--run``) or environment
variables. Paths are relative to the repository root, so run the cases with the
repository root as the working directory (:data:`REPO_ROOT`).

Expected error: ``str(InputError)`` must start with ``where + ": "`` and contain
``message``. ``where`` is ``"path:line"`` (1-based line) or just ``"path"`` for errors
about a whole file; ``""`` means an error with no file location (a flag or a setting:
the error string is the message itself). ``absent`` lists text that must not appear in
the output at all (secrets).

``CASES`` (inputs only) run through ``producer.inputs`` in tests/test_loaders.py; all
cases run through the CLI with a real Redis broker in tests/test_cli_errors.py (exit code
2, one line, nothing written). Files made at test time (FIFOs, symlinks to devices) are
in tests/test_cli_errors.py.
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


#: a judge that is never called (every case fails before a call)
JUDGE = "openai/judge@http://127.0.0.1:9/v1"


@dataclass(frozen=True)
class BadCase:
    """One broken input and the error it must raise."""

    id: str
    instances: str
    responses: list[str]
    where: str
    message: str
    #: more `flask-eval run` arguments; without any, the CLI test adds ``--judge JUDGE``
    args: tuple[str, ...] = ()
    #: environment variables of the run
    env: tuple[tuple[str, str], ...] = ()
    #: text that must not appear in the output (secrets)
    absent: tuple[str, ...] = ()


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


#: good conversations (one ours, one MT-Bench's) and a model's good answers to them
CONVERSATIONS = f"{BAD}/conversations.jsonl"
CONVERSATION_ANSWERS = f"conv_model={BAD}/conversation_answers.jsonl"


def _conv(name: str, where_line: int | None, message: str) -> BadCase:
    """A broken responses file to conversations (as the second model), with good
    conversations."""
    path = f"{BAD}/{name}.jsonl"
    where = path if where_line is None else f"{path}:{where_line}"
    return BadCase(name, CONVERSATIONS, [CONVERSATION_ANSWERS, f"broken={path}"], where, message)


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
    _inst(
        "older_schema_missing_field",
        1,
        "missing fields 'metrics', 'domain_labeled', 'difficulty_labeled' (older FLASK schema",
    ),
    _inst("invalid_utf8", 2, "invalid UTF-8"),
    _inst("empty", None, "no records; expected JSON Lines", "empty_instances"),
    _inst("no_such_file", None, "file not found", "instances_missing"),
    # --- responses files
    _resp("duplicate_response_id", 3, "duplicate response for instance '2' (first on line 2)"),
    _resp("responses_to_no_instance", None, "none of its 2 responses answers an instance"),
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
    BadCase(
        "model_name_too_long",
        GOOD_INSTANCES,
        ["m" * 65 + f"={EXAMPLES}/model_a.jsonl"],
        "",
        "invalid model name 'mmmmmmmm",
    ),
    # --- text no database or judge can take: lone surrogates and NUL, from \u escapes
    _inst("surrogate_instruction", 2, "field 'instruction' contains a lone UTF-16 surrogate"),
    _inst("surrogate_low_in_id", 3, "field 'idx' contains a lone UTF-16 surrogate (\\udc00)"),
    _inst("surrogate_in_skill", 2, "field 'skill'[1] contains a lone UTF-16 surrogate"),
    _inst("nul_in_answer", 2, "field 'answer' contains a NUL character"),
    _inst("nul_in_id", 1, "field 'idx' contains a NUL character"),
    _inst("nul_in_domain", 2, "field 'domain'[0] contains a NUL character"),
    _resp("response_surrogate", 2, "field 'text' contains a lone UTF-16 surrogate (\\udfff)"),
    _resp("response_nul", 3, "field 'text' contains a NUL character"),
    # --- values longer than their column (core/limits.py), checked on both databases
    _inst("long_instance_id", 2, "field 'idx' is longer than 200 characters: 'iiii"),
    _inst("huge_int_id", 3, "field 'idx' is longer than 200 characters: a very long number"),
    _resp("response_long_id", 1, "field 'question_id' is longer than 200 characters"),
    _inst("control_char_id", 1, "field 'idx' contains a control character (U+000A)"),
    # --- unbounded values are clipped in messages, never repr()-ed whole
    _inst("long_unknown_skill", 2, "unknown skill 'SSSS"),
    _inst("long_unknown_domain", 2, "unknown domain 'DDDD"),
    _inst("long_unknown_difficulty", 1, "... (10000 characters); valid labels"),
    # --- shapes of broken exports
    _inst("huge_number", 2, "invalid JSON: a number has more than 4300 digits"),
    _inst("deeply_nested", 2, "invalid JSON: nested too deeply"),
    _inst("bom_mid_file", 3, "line starts with a byte-order mark (U+FEFF)"),
    _inst("cr_only_lines", 1, "lines seem to end with CR only"),
    _inst("duplicate_json_key", 2, "key 'idx' appears twice in the object"),
    _resp("response_duplicate_key", 1, "key 'text' appears twice in the object"),
    _inst("difficulty_nan", 2, "field 'difficulty' must be a difficulty label or a level 1-5"),
    BadCase("instances_is_directory", BAD, [GOOD_A], BAD, "is a directory"),
    # --- conversations (producer/conversations.py): instances with turns, their responses
    _inst("conv_turns_not_list", 2, "field 'turns' must be a list of turns (strings), got string"),
    _inst("conv_turn_not_string", 2, "field 'turns': turn 2 must be a string, got array"),
    _inst("conv_empty_turns", 2, "field 'turns' is empty; a conversation has at least one turn"),
    _inst("conv_empty_turn", 1, "field 'turns': turn 2 is empty"),
    _inst("conv_too_many_turns", 2, "field 'turns' has 21 turns; a conversation has at most 20"),
    _inst(
        "conv_references_longer_than_turns",
        2,
        "field 'reference' has 3 references for 2 turn(s); give at most one per turn",
    ),
    _inst(
        "conv_id_clash",
        2,
        "conversation '81': the id of its turn 1, '81:t1', is already an instance id (line 1)",
    ),
    _inst("conv_id_clash_later", 2, "duplicate instance id '81:t2' (first on line 1)"),
    _inst("conv_duplicate_id", 2, "conversation 'c1': the id of its turn 1, 'c1:t1', is already"),
    _inst("conv_unknown_skill", 1, "unknown skill 'Creativity'; valid skills: Logical Robustness"),
    _conv(
        "conv_response_more_turns",
        2,
        "conversation '81' has 2 turn(s) in the instances file, this response gives 3 answer(s)",
    ),
    _conv(
        "conv_response_fewer_turns",
        1,
        "conversation 'c1' has 2 turn(s) in the instances file, this response gives 1 answer(s)",
    ),
    _conv(
        "conv_response_fastchat_fewer_turns",
        2,
        "conversation '81' has 2 turn(s) in the instances file, this response gives 1 answer(s)",
    ),
    _conv("conv_response_turn_not_string", 1, "field 'turns': turn 2 must be a string, got number"),
    _conv(
        "conv_response_turn_answered_alone",
        2,
        "instance '81:t2' is turn 2 of conversation '81'; answer the conversation on one line",
    ),
    _conv(
        "conv_response_text_for_conversation",
        1,
        "'81' is a conversation of 2 turn(s); give the model's answer to each in 'turns'",
    ),
    # --- images (producer/images.py): read and checked before anything is written
    _inst("image_missing_file", 2, "field 'images': image 'no_such_image.png': file not found"),
    _inst("image_directory", 2, "field 'images': image '.': is a directory"),
    _inst("image_text_file", 2, "text, not an image; accepted: PNG, JPEG, WebP, GIF"),
    _inst("image_bmp", 2, "unsupported image type: a BMP image; accepted: PNG, JPEG, WebP, GIF"),
    _inst("image_svg", 2, "an SVG image is not accepted (XML that may carry scripts"),
    _inst("image_svg_media_type", 2, "an SVG image is not accepted"),
    _inst("image_bomb", 2, "the image declares more pixels than the 64,000,000 allowed"),
    _inst(
        "image_url_fetch_off", 2, "given while fetching is off; --fetch-images with --image-hosts"
    ),
    _inst("image_data_not_base64", 2, "the data: URI's data is not valid base64"),
    _inst("image_data_not_image", 2, "text, not an image"),
    _inst(
        "image_claim_mismatch", 2, "the image claims to be 'image/png' but its bytes are image/jpeg"
    ),
    _inst("image_not_a_list", 2, "field 'images' must be a list of image references"),
]


def _judges(name: str, line: int | None, message: str, absent: tuple[str, ...] = ()) -> BadCase:
    """A broken `--judges FILE`, with good instances and responses."""
    path = f"{BAD}/{name}.yaml"
    where = path if line is None else f"{path}:{line}"
    return BadCase(name, GOOD_INSTANCES, [GOOD_A], where, message, ("--judges", path), (), absent)


def _rubrics(name: str, line: int | None, message: str) -> BadCase:
    """A broken `--rubrics FILE`, with good instances, responses and judge."""
    path = f"{BAD}/{name}"
    where = path if line is None else f"{path}:{line}"
    return BadCase(
        name, GOOD_INSTANCES, [GOOD_A], where, message, ("--judge", JUDGE, "--rubrics", path)
    )


def _criteria(name: str, line: int, message: str) -> BadCase:
    """A broken `--criteria FILE`, with good instances, responses and judge."""
    path = f"{BAD}/{name}"
    return BadCase(
        name,
        GOOD_INSTANCES,
        [GOOD_A],
        f"{path}:{line}",
        message,
        ("--judge", JUDGE, "--criteria", path),
    )


def _flag(case_id: str, message: str, *args: str, absent: tuple[str, ...] = ()) -> BadCase:
    """Bad `flask-eval run` flags, with good files."""
    return BadCase(case_id, GOOD_INSTANCES, [GOOD_A], "", message, args, (), absent)


def _env(case_id: str, message: str, absent: tuple[str, ...] = (), **env: str) -> BadCase:
    """A bad setting, with good inputs."""
    return BadCase(case_id, GOOD_INSTANCES, [GOOD_A], "", message, (), tuple(env.items()), absent)


_SECRET = "sk-secretvalue123"
#: files that carry their own instances and responses, read with bad flags
PROMETHEUS_SET = f"{BAD}/mt_bench_eval (1).json"  # a file name that is no model name
PROMETHEUS_SLASH = f"{BAD}/prometheus_source_with_slash.json"  # its response_source is none
BIGGEN_SLASH = f"{BAD}/biggen_model_with_slash.json"  # response_model_name with a '/'
AUTOJ = f"{BAD}/autoj_one_pair.jsonl"


def _set(case_id: str, where: str, message: str, *args: str) -> BadCase:
    """A file that carries its own instances and responses (no --instances), with
    ``args`` (its flag among them) and a judge."""
    return BadCase(case_id, "", [], where, message, (*args, "--judge", JUDGE))


def _references(name: str, line: int, message: str) -> BadCase:
    """A broken ``--reference-answers FILE``, with good conversations and answers."""
    path = f"{BAD}/{name}.jsonl"
    args = ("--reference-answers", path, "--judge", JUDGE)
    return BadCase(name, CONVERSATIONS, [CONVERSATION_ANSWERS], f"{path}:{line}", message, args)


#: Cases that need more than instances and responses: flags, judges and rubric files,
#: settings. Only run through the CLI (and their loaders' unit tests).
CLI_CASES: list[BadCase] = [
    # --- reference answers of conversations (--reference-answers FILE)
    _references(
        "conv_reference_unknown_question",
        2,
        "question_id '99' names no conversation of the instances",
    ),
    _references(
        "conv_reference_wrong_turns",
        1,
        "conversation '81' has 2 turn(s), its reference answer gives 1",
    ),
    BadCase(
        "conv_reference_without_conversations",
        GOOD_INSTANCES,
        [GOOD_A],
        f"{BAD}/conv_reference_wrong_turns.jsonl",
        "the instances hold no conversation (records with 'turns')",
        ("--reference-answers", f"{BAD}/conv_reference_wrong_turns.jsonl", "--judge", JUDGE),
    ),
    # --- judge specs on the command line
    _flag("unknown-provider", "unknown judge provider 'cohere'", "--judge", "cohere/command"),
    _flag("judge-without-model", "expected provider/model", "--judge", "openai"),
    _flag("bad-base-url", "invalid base URL", "--judge", "openai/m@ftp://x"),
    _flag(
        "in-flight-zero", "'--in-flight': 0 is not in the range 1<=x<=100000", "--in-flight", "0"
    ),
    _flag("in-flight-negative", "'--in-flight': -4 is not in the range", "--in-flight", "-4"),
    _flag(
        "credentials-in-url",
        "credentials in the base URL are not allowed",
        "--judge",
        "openai/m@http://user:hunter2pw@127.0.0.1:1/v1",
        absent=("hunter2pw",),
    ),
    _flag(
        "invalid-ipv6-base-url",
        "an unclosed or invalid [IPv6] address",
        "--judge",
        "openai/m@http://[::1/v1",
    ),
    *(
        _flag(
            f"credential-in-query-{param}",
            f"query string carries a credential ('{param}'=...)",
            "--judge",
            f"openai/m@http://127.0.0.1:9/v1?api-version=1&{param}={_SECRET}",
            absent=(_SECRET,),
        )
        for param in ("api_key", "key", "token", "access_token", "password", "secret", "sig")
    ),
    _flag(
        "credential-in-fragment",
        "a base URL has no #fragment",
        "--judge",
        f"openai/m@http://127.0.0.1:9/v1#key={_SECRET}",
        absent=(_SECRET,),
    ),
    _flag(
        "key-shaped-path-in-url",
        "the base URL carries what looks like a key",
        "--judge",
        "openai/m@http://127.0.0.1:9/v1/sk-proj-0a1b2c3d4e5f",
        absent=("0a1b2c3d4e5f",),
    ),
    _flag(
        "judge-spec-too-long",
        "judge spec is longer than 1000 characters",
        "--judge",
        "openai/" + "m" * 1200,
    ),
    _flag("judge-spec-nul", "contains a NUL character", "--judge", "openai/m\x00"),
    _flag(
        "judge-spec-newline", "contains a control character", "--judge", "openai/m\n@http://h/v1"
    ),
    _flag(
        "duplicate-judge",
        "judge name 'openai/judge' is given twice",
        "--judge",
        JUDGE,
        "--judge",
        JUDGE,
    ),
    _flag(
        "same-default-name-two-urls",
        "name them apart with --judge NAME=SPEC or `name:` in the judges file",
        "--judge",
        JUDGE,
        "--judge",
        "openai/judge@http://127.0.0.1:10/v1",
    ),
    _flag(
        "same-short-name-flag-and-file",
        "judge name 'j1' is given twice",
        "--judge",
        f"j1={JUDGE}",
        "--judges",
        f"{BAD}/judges_named_j1.yaml",
    ),
    _flag(
        "retired-judge-model",
        "the model was retired on 2026-06-15 (its provider refuses it); use a current model "
        "instead, e.g. anthropic/claude-sonnet-4-5",
        "--judge",
        "anthropic/claude-sonnet-4-20250514",
    ),
    BadCase(
        "structured-model-without-structured-outputs",
        GOOD_INSTANCES,
        [GOOD_A],
        "",
        "judge haiku: structured: true, but model anthropic/claude-3-5-haiku has no structured "
        "outputs",
        ("--judges", f"{BAD}/judges_structured_unsupported.yaml"),
        (("ANTHROPIC_API_KEY", "sk-ant-test"),),
    ),
    _flag("short-name-with-space", "invalid judge name 'my judge'", "--judge", f"my judge={JUDGE}"),
    _flag("short-name-empty", "invalid judge name ''", "--judge", f"={JUDGE}"),
    _flag("short-name-too-long", "invalid judge name 'nnnn", "--judge", "n" * 301 + f"={JUDGE}"),
    _flag(
        "run-name-too-long",
        "--run name is longer than 200 characters",
        "--judge",
        JUDGE,
        "--run",
        "r" * 201,
    ),
    BadCase(
        "missing-rubrics-file",
        GOOD_INSTANCES,
        [GOOD_A],
        "no/such/rubrics.yaml",
        "not found",
        ("--judge", JUDGE, "--rubrics", "no/such/rubrics.yaml"),
    ),
    _flag("judges-file-is-directory", "is a directory", "--judges", BAD),
    # --- naming the model(s) of a file that carries its responses: --model
    _set(
        "prometheus-set-source-with-a-slash",
        PROMETHEUS_SLASH,
        "response_source 'meta-llama/Llama-2-7b' is not a valid model name (letters, digits, "
        "'.', '_' or '-'); to judge every response as one model, name it with --model NAME",
        "--prometheus-set",
        PROMETHEUS_SLASH,
    ),
    _set(
        "biggen-model-name-with-a-slash",
        BIGGEN_SLASH,
        "response_model_name 'meta-llama/Llama-2-7b' is not a valid model name (letters, "
        "digits, '.', '_' or '-'); name the model with --model NAME",
        "--biggen",
        BIGGEN_SLASH,
    ),
    _flag("model-with-instances", "--model names the model of a --biggen", "--model", "m"),
    _set(
        "model-invalid-name",
        "",
        "--model: invalid model name 'meta-llama/Llama-2-7b'; use 1-64 letters",
        *("--biggen", BIGGEN_SLASH, "--model", "meta-llama/Llama-2-7b"),
    ),
    _set(
        "model-twice-for-a-prometheus-set",
        "",
        "--prometheus-set takes --model for one model (all its responses), got 2",
        *("--prometheus-set", PROMETHEUS_SET, "--model", "a", "--model", "b"),
    ),
    _set(
        "model-once-for-a-pairwise-set",
        "",
        "--pairwise-set takes --model for two models, first and second, got 1",
        *("--pairwise-set", AUTOJ, "--model", "gpt4"),
    ),
    _set(
        "pairwise-set-models-named-alike",
        "",
        "the two models of a pairwise set need two names, got 'gpt4'",
        *("--pairwise-set", AUTOJ, "--model", "gpt4", "--model", "GPT4"),
    ),
    # --- images over a judge's provider limits (core/image_limits.py), at plan time
    BadCase(
        "image-over-anthropic-pixel-limit",
        f"{BAD}/image_too_wide_for_anthropic.jsonl",
        [GOOD_A],
        f"{BAD}/image_too_wide_for_anthropic.jsonl:2",
        "judge anthropic/claude-sonnet-4-5: image 1 (image/png, 8001x1, 103 bytes): over "
        "anthropic's limit of 8000x8000 pixels",
        ("--judge", "anthropic/claude-sonnet-4-5"),
        (("ANTHROPIC_API_KEY", "sk-ant-test"),),
    ),
    BadCase(
        "image-gif-for-gemini",
        f"{BAD}/image_gif_for_gemini.jsonl",
        [GOOD_A],
        f"{BAD}/image_gif_for_gemini.jsonl:2",
        "judge gemini/gemini-3-flash: image 1 (image/gif, 4x4, 48 bytes): gemini takes "
        "image/png, image/jpeg, image/webp",
        ("--judge", "gemini/gemini-3-flash"),
        (("GEMINI_API_KEY", "test-key"),),
    ),
    _flag(
        "fetch-images-without-hosts",
        "--fetch-images needs --image-hosts HOST,...",
        *("--fetch-images", "--judge", JUDGE),
    ),
    _flag(
        "image-hosts-without-fetch",
        "--image-hosts goes with --fetch-images",
        "--image-hosts",
        "a.b",
    ),
    _flag("max-image-mb-zero", "'--max-image-mb': 0.0 is not in the range", "--max-image-mb", "0"),
    # --- budgets and waits
    _flag(
        "max-cost-with-an-unpriced-judge",
        "--max-cost 1 needs a price for every judge: judge openai/judge has none (their "
        "calls would count as free); give each judge `price: {input: USD, output: USD}`",
        *("--judge", JUDGE, "--max-cost", "1"),
    ),
    _flag("max-cost-nan", "'--max-cost': 'nan' is not a finite number", "--max-cost", "nan"),
    _flag("timeout-zero", "'--timeout': 0.0 is not in the range 0<x<=604800", "--timeout", "0"),
    _flag("timeout-inf", "'--timeout': inf is not in the range", "--timeout", "inf"),
    _flag("timeout-nan", "'--timeout': 'nan' is not a finite number", "--timeout", "nan"),
    _flag(
        "timeout-with-no-wait",
        "--no-wait does not wait, so --timeout has nothing to bound",
        *("--judge", JUDGE, "--timeout", "60"),
    ),
    # --- judges files: the strict YAML loader (no aliases, tags or duplicate keys)
    _judges(
        "judges_temperature_reasoning_model",
        3,
        "model openai/gpt-5.4-mini takes no temperature (only its own default)",
    ),
    _judges(
        "judges_max_tokens_over_model_limit",
        3,
        "a budget of 100,000 tokens is more than model anthropic/claude-sonnet-4-5 writes "
        "(64,000 at most)",
    ),
    _judges(
        "judges_retired_model",
        3,
        "judge gemini/gemini-2.5-flash: the model was retired on 2026-12-01",
    ),
    _judges("judges_billion_laughs", 2, "anchors (&name) are not allowed"),
    _judges("judges_alias", 4, "aliases (*name) are not allowed"),
    _judges("judges_python_tag", 1, "explicit tags such as '!!python/object/apply:os.system'"),
    _judges("judges_float_tag", 2, "explicit tags such as '!!float' are not allowed"),
    _judges("judges_duplicate_key", 4, "duplicate key 'rpm' (first on line 2)"),
    _judges("judges_merge_key", 2, "merge keys (<<) are not allowed"),
    _judges("judges_deep", 2, "nested deeper than 32 levels"),
    _judges("judges_huge_int", 2, "a number with more than 4300 digits"),
    _judges("judges_invalid_date", 2, "invalid value (day is out of range for month)"),
    _judges("judges_surrogate", 2, "the text contains a lone UTF-16 surrogate (\\ud800)"),
    _judges("judges_nul", 2, "the text contains a NUL character"),
    _judges("judges_raw_nul", 2, "invalid YAML: character U+0000 is not allowed"),
    _judges("judges_not_utf8", 2, "invalid UTF-8"),
    # --- judges files: shapes
    _judges(
        "judges_empty",
        1,
        "expected a non-empty YAML list of judges, e.g. `- spec: openai/gpt-5.4`; got an empty "
        "file",
    ),
    _judges("judges_comments_only", 1, "got an empty file"),
    _judges("judges_mapping", 1, "got a mapping (list the judges at the top level"),
    _judges("judges_scalar", 1, "got 'openai/judge'"),
    _judges("judges_entry_not_mapping", 1, "each judge must be a mapping with at least `spec`"),
    _judges("judges_unknown_key", 2, "unknown key 'kkkk"),
    # --- judges files: specs, names and the new keys
    _judges("judges_ipv6", 1, "an unclosed or invalid [IPv6] address"),
    _judges("judges_query_key", 1, "query string carries a credential ('api_key'=...)", (_SECRET,)),
    _judges("judges_long_spec", 1, "judge spec is longer than 1000 characters"),
    _judges(
        "judges_same_default_name", 2, "judge name 'openai/judge' is used twice (first on line 1)"
    ),
    _judges("judges_same_name_case", 3, "judge name 'judge' is used twice (first on line 1)"),
    _judges("judges_bad_name", 2, "invalid judge name 'my judge@home'"),
    _judges("judges_long_name", 2, "invalid judge name 'jjjj"),
    _judges("judges_max_tokens_zero", 2, "`max_tokens` must be a whole number >= 1, got 0"),
    _judges("judges_max_tokens_fraction", 2, "`max_tokens` must be a whole number >= 1, got 512.5"),
    _judges("judges_max_tokens_huge", 2, "`max_tokens` must be at most 1_000_000"),
    _judges("judges_temperature_high", 2, "`temperature` must be a number from 0 to 2, got 3"),
    _judges("judges_temperature_nan", 2, "`temperature` must be a number from 0 to 2, got nan"),
    _judges("judges_temperature_text", 2, "`temperature` must be a number from 0 to 2, got 'warm'"),
    _judges("judges_retry_below_max", 3, "larger than `max_tokens` (2048), got 1024"),
    _judges("judges_retry_below_default", 2, "larger than the default max_tokens (1024), got 512"),
    # --- rubric files: the same strict YAML loader; JSON text checked like JSON Lines
    _rubrics("rubrics_billion_laughs.yaml", 1, "anchors (&name) are not allowed"),
    _rubrics("rubrics_float_tag.yaml", 6, "explicit tags such as '!!bool' are not allowed"),
    _rubrics("rubrics_duplicate_key.yaml", 6, "duplicate key 'criterion' (first on line 4)"),
    _rubrics("rubrics_surrogate.yaml", 4, "the text contains a lone UTF-16 surrogate"),
    _rubrics("rubrics_long_name.yaml", 2, "'name' is longer than 100 characters"),
    _rubrics("rubrics_control_name.yaml", 2, "'name' contains a control character (U+0009)"),
    _rubrics("rubrics_surrogate.json", 8, "contains a lone UTF-16 surrogate (\\ud83d)"),
    _rubrics("rubrics_nul.json", 4, "contains a NUL character"),
    _rubrics("rubrics_duplicate_key.json", None, "key 'Skill' appears twice"),
    _rubrics("rubrics_case_collision.yaml", 6, "'readability' differs from 'Readability' only"),
    # --- criteria names that readers or reports cannot tell apart (rubrics/names.py)
    _criteria("criteria_case_collision.yaml", 5, "'empathy' differs from 'Empathy' (line 2)"),
    _criteria("criteria_underscore_collision.yaml", 5, "'Tone_of_voice' differs from"),
    _criteria("criteria_fullwidth_collision.yaml", 5, "differs from 'Empathy' (line 2) only"),
    _criteria("criteria_zero_width_name.yaml", 2, "invisible format character (U+200B)"),
    _criteria("criteria_bidi_override_name.yaml", 2, "invisible format character (U+202E)"),
    _criteria("criteria_mixed_script_name.yaml", 2, "mixes Cyrillic and Latin letters"),
    # --- a protocol's scale that a criterion's rubric does not cover (rubrics/coverage.py)
    BadCase(
        "criteria_ten_levels_on_a_five_point_protocol",
        GOOD_INSTANCES,
        [GOOD_A],
        "",
        "criterion 'Helpfulness': protocol flask-eval scores 1-5 and shows every level's "
        "description, but the rubric describes levels 1-10",
        ("--judge", JUDGE, "--criteria", f"{BAD}/criteria_ten_levels.yaml"),
    ),
    # --- settings: whole numbers, finite numbers, sane ranges, usable URLs
    _env(
        "calls-per-message-fraction",
        "FLASK_EVAL_CALLS_PER_MESSAGE='0.5' is not a whole number",
        FLASK_EVAL_CALLS_PER_MESSAGE="0.5",
    ),
    _env(
        "calls-per-message-zero",
        "FLASK_EVAL_CALLS_PER_MESSAGE=0 is out of range",
        FLASK_EVAL_CALLS_PER_MESSAGE="0",
    ),
    _env(
        "lease-nan",
        "FLASK_EVAL_LEASE_SECONDS='nan' is not a finite number",
        FLASK_EVAL_LEASE_SECONDS="nan",
    ),
    _env(
        "lease-1e12",
        "FLASK_EVAL_LEASE_SECONDS='1e12' is out of range; use a number of seconds from 1 to 86,400",
        FLASK_EVAL_LEASE_SECONDS="1e12",
    ),
    _env(
        "max-attempts-nan",
        "FLASK_EVAL_MAX_ATTEMPTS='nan' is not a whole number",
        FLASK_EVAL_MAX_ATTEMPTS="nan",
    ),
    _env(
        "max-attempts-huge",
        "is out of range; use a whole number of attempts from 1 to 100",
        FLASK_EVAL_MAX_ATTEMPTS="9" * 5000,
    ),
    _env(
        "visibility-inf",
        "FLASK_EVAL_VISIBILITY_TIMEOUT='inf' is not a finite number",
        FLASK_EVAL_VISIBILITY_TIMEOUT="inf",
    ),
    _env(
        "visibility-below-lease",
        "must be longer than FLASK_EVAL_LEASE_SECONDS",
        FLASK_EVAL_LEASE_SECONDS="60",
        FLASK_EVAL_VISIBILITY_TIMEOUT="30",
    ),
    _env(
        "judge-timeout-negative",
        "FLASK_EVAL_JUDGE_TIMEOUT='-1' is out of range",
        FLASK_EVAL_JUDGE_TIMEOUT="-1",
    ),
    _env(
        "db-retry-text",
        "FLASK_EVAL_DB_RETRY_SECONDS='soon' is not a number",
        FLASK_EVAL_DB_RETRY_SECONDS="soon",
    ),
    _env(
        "queue-with-space",
        "FLASK_EVAL_QUEUE='my queue' is not a queue name",
        FLASK_EVAL_QUEUE="my queue",
    ),
    _env(
        "sqlite-in-memory",
        "an in-memory SQLite database is not supported",
        FLASK_EVAL_DATABASE_URL="sqlite://",
    ),
    _env(
        "sqlite-memory-path",
        "an in-memory SQLite database is not supported",
        FLASK_EVAL_DATABASE_URL="sqlite:///:memory:",
    ),
    _env(
        "sqlite-two-slashes",
        "a SQLite URL is sqlite:///PATH (three slashes)",
        FLASK_EVAL_DATABASE_URL="sqlite://flask-eval.db",
    ),
    _env(
        "database-unknown-scheme",
        "FLASK_EVAL_DATABASE_URL must be sqlite:///PATH or postgresql://..., got mysql://...",
        ("hunter2pw",),
        FLASK_EVAL_DATABASE_URL="mysql://root:hunter2pw@127.0.0.1/db",
    ),
    _env(
        "broker-unknown-scheme",
        "FLASK_EVAL_BROKER_URL must be a redis://, rediss://, amqp:// or amqps:// URL, got http://...",
        ("hunter2pw",),
        FLASK_EVAL_BROKER_URL="http://u:hunter2pw@127.0.0.1:6379/0",
    ),
    _env(
        "broker-without-scheme",
        "got a value without a scheme://",
        ("hunter2pw",),
        FLASK_EVAL_BROKER_URL="hunter2pw",
    ),
]
