"""OpenAI-compatible providers as data: a name, where its API is, which variable holds its
key. ``mistral/mistral-large-latest`` then calls Mistral's API with ``MISTRAL_API_KEY``
through the OpenAI judge (``workers/providers/openai_judge.py``: its SDK, error table,
retries, structured outputs and the json_object fallback), and never sends
``OPENAI_API_KEY`` anywhere but to OpenAI's base URL or one named in the spec.

A provider here is one row: no file, no class. A spec may still name another base URL
(``vllm/qwen@http://gpu-3:8000/v1``); the key variable stays the provider's. Prices are
not here: a judge's price is its judges-file entry's (``price:``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Compatible:
    """An OpenAI-compatible API: its default base URL (the API root, as the OpenAI SDK
    takes it) and the environment variable of its key. ``key_required``: its own API
    refuses requests without a key (a local server takes any, or none)."""

    base_url: str
    key_env: str
    key_required: bool = True


#: provider name (as in ``name/model``) -> its API. Local servers' defaults are their
#: own default ports on this machine.
COMPATIBLE: dict[str, Compatible] = {
    "mistral": Compatible("https://api.mistral.ai/v1", "MISTRAL_API_KEY"),
    "together": Compatible("https://api.together.xyz/v1", "TOGETHER_API_KEY"),
    "groq": Compatible("https://api.groq.com/openai/v1", "GROQ_API_KEY"),
    "deepseek": Compatible("https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    "fireworks": Compatible("https://api.fireworks.ai/inference/v1", "FIREWORKS_API_KEY"),
    "openrouter": Compatible("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "xai": Compatible("https://api.x.ai/v1", "XAI_API_KEY"),
    "vllm": Compatible("http://localhost:8000/v1", "VLLM_API_KEY", key_required=False),
    "ollama": Compatible("http://localhost:11434/v1", "OLLAMA_API_KEY", key_required=False),
}
