"""Protocols found by discovery: the ``rubrics`` package imports every module of this
package when it loads (``rubrics.discovery``), and each module registers its protocols
in ``rubrics.grading.PROTOCOLS``.
A protocol on another scale is one module here, a subclass that sets ``scale``::

    from flask_eval.rubrics.grading import PROTOCOLS, FlaskEvalProtocol
    from flask_eval.rubrics.scale import Scale


    class ThreePoint(FlaskEvalProtocol):
        name = "three-point"
        scale = Scale(1, 3)


    PROTOCOLS[ThreePoint.name] = ThreePoint

Its criteria then need rubrics of levels 1-3 (a criteria file's ``scale: 1-3``), or the
run is refused before it starts (``rubrics.coverage``).
"""
