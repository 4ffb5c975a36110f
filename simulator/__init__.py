"""Judge and model simulator: an HTTP server speaking the wire formats of OpenAI, Anthropic
and Gemini, live and batch (``simulator.options.WIRE_FORMATS`` lists them).

Public API: ``SimConfig`` (``simulator.config``), ``make_answer`` (``simulator.answer``),
``make_app`` (``simulator.server``), ``serve`` / ``run`` (``simulator.serving``) and
``running_simulator`` / ``spawn_simulator`` (``simulator.testing``); ``answer``
(``simulator.generate``) plays the models under test named in ``SimConfig.generators``.
"""

from .config import SimConfig

__all__ = ["SimConfig"]
