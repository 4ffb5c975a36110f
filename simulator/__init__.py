"""Judge simulator: an HTTP server speaking the OpenAI and Anthropic wire formats.

Public API: ``SimConfig`` (``simulator.config``), ``make_answer`` (``simulator.answer``),
``make_app`` / ``serve`` / ``run`` (``simulator.server``) and ``running_simulator`` /
``spawn_simulator`` (``simulator.testing``); ``answer`` (``simulator.generate``) plays the
models under test named in ``SimConfig.generators``.
"""

from .config import SimConfig

__all__ = ["SimConfig"]
